#!/usr/bin/env python3
"""What Intel AMX is worth: prefill (pp) and decode (tg) with AMX and with AMX
refused, for Q4_0, Q8_0 and Q4_K_M of the synthetic Qwen2.5-0.5B, hone against
the peer llama-bench in the same run, interleaved.

"AMX refused" preloads bench/amx_refuse.c, which fails the kernel's tile-data
permission as a machine without AMX support would; ggml then runs the same
weights on its AVX-512 repacked kernels. Both tools see the same refusal.

Usage: bench/amx_on_off.py [--reps 3] [--pp 512] [--tg 32] [--types q4_0,q8_0,q4_k_m]
Writes bench/results/amx_on_off-<host>-<date>.{md,json}. On a CPU without AMX
it says so and stops (nothing to compare) unless --force.
"""
import argparse, datetime, json, os, socket, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tg_vs_llama_bench import ROOT, peer_prefix, summary  # noqa: E402


def shim(prebuilt):
    # A machine without a C compiler (a borrowed box) takes one built elsewhere.
    if prebuilt:
        return prebuilt
    out = os.path.join(tempfile.mkdtemp(prefix="hone-amx-"), "amx_refuse.so")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", out, os.path.join(ROOT, "bench/amx_refuse.c"), "-ldl"],
                   check=True)
    return out


def env_for(mode, so):
    e = dict(os.environ)
    if mode == "off":
        e["LD_PRELOAD"] = so
    return e


def hone_once(hone, model, pp, tg, threads, env):
    # pp: a prompt of pp tokens (" hello" is one Qwen token), timed by hone itself.
    cmd = [hone, "run", model, "-p", "hello " * pp, "-n", str(tg), "--ignore-eos", "--temp", "0", "-t", str(threads),
           "-c", str(pp + tg + 64), "-b", "2048", "-u", "512", "--no-profile", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    j = json.loads(out[out.index("{"):])
    return j["prompt_tps"], j["gen_tps"], j["amx_weights"]


def peer_once(peer_bin, model, pp, tg, threads, env):
    # hone decodes after its pp-token prompt, so the peer's tg is taken at the
    # same depth (-d): from an empty context it was twice as fast on the
    # 16-core Xeon (decode of a 0.5B model at depth 512 is half attention).
    cmd = [os.path.join(peer_bin, "llama-bench"), "-m", model, "-p", str(pp), "-n", str(tg), "-d", f"0,{pp}",
           "-t", str(threads), "-r", "1", "-o", "json"]
    rows = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout)
    pp_ts = next(r["avg_ts"] for r in rows if r["n_prompt"] > 0 and r["n_depth"] == 0)
    tg_ts = next(r["avg_ts"] for r in rows if r["n_gen"] > 0 and r["n_depth"] == pp)
    return pp_ts, tg_ts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=32)
    ap.add_argument("--types", default="q4_0,q8_0,q4_k_m")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--hone", default=os.path.join(ROOT, "build/hone"))
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench/results"))
    ap.add_argument("--force", action="store_true", help="run even where the CPU has no AMX")
    ap.add_argument("--peer-bin", default="", help="folder of the peer llama-bench (default: the pinned build's)")
    ap.add_argument("--shim", default="", help="a prebuilt amx_refuse.so (default: built here with cc)")
    a = ap.parse_args()

    machine = json.loads(subprocess.run([a.hone, "info", "--json", "--no-bandwidth"], capture_output=True, text=True,
                                        check=True).stdout)
    if not machine["amx"]["in_use"] and not a.force:
        print("AMX " + machine["amx"]["reason"] + ": nothing to compare (--force runs anyway)", file=sys.stderr)
        return 2
    threads = a.threads or machine["physical_cores"]
    peer_bin = a.peer_bin or os.path.join(peer_prefix(), "bin")
    f16 = os.path.join(a.models_dir, "qwen2.5-0.5b.f16.gguf")
    os.makedirs(a.models_dir, exist_ok=True)
    if not os.path.exists(f16):
        subprocess.run([a.hone, "synth", "--like", "qwen2.5-0.5b", "--out", f16], check=True)
    so = shim(a.shim)
    rows = []
    for t in a.types.split(","):
        q = json.loads(subprocess.run([a.hone, "quantize", f16, "--types", t, "--out-dir", a.models_dir, "--json", "-q"],
                                      capture_output=True, text=True, check=True).stdout)
        model = q["outputs"][0]["path"]
        s = {k: [] for k in ("hone_pp_on", "hone_tg_on", "hone_pp_off", "hone_tg_off",
                             "peer_pp_on", "peer_tg_on", "peer_pp_off", "peer_tg_off")}
        amx_seen = {}
        hone_once(a.hone, model, 64, 4, threads, env_for("on", so))  # warm the page cache
        for i in range(a.reps):
            modes = ("on", "off") if i % 2 == 0 else ("off", "on")
            for mode in modes:
                env = env_for(mode, so)
                pp, tg, amx = hone_once(a.hone, model, a.pp, a.tg, threads, env)
                amx_seen[mode] = amx
                s[f"hone_pp_{mode}"].append(pp); s[f"hone_tg_{mode}"].append(tg)
                pp, tg = peer_once(peer_bin, model, a.pp, a.tg, threads, env)
                s[f"peer_pp_{mode}"].append(pp); s[f"peer_tg_{mode}"].append(tg)
                print(f"{t} rep {i + 1} AMX {mode}: hone pp {s[f'hone_pp_{mode}'][-1]:.1f} tg "
                      f"{s[f'hone_tg_{mode}'][-1]:.1f} | peer pp {pp:.1f} tg {tg:.1f}", file=sys.stderr)
        row = {"type": t, "model": os.path.relpath(model, ROOT), "amx_weights": amx_seen,
               "samples": s} | {k: summary(v) for k, v in s.items()}
        for tool in ("hone", "peer"):
            for ph in ("pp", "tg"):
                row[f"{tool}_{ph}_amx_speedup"] = summary([x / y for x, y in zip(s[f"{tool}_{ph}_on"], s[f"{tool}_{ph}_off"])])
        for ph in ("pp", "tg"):
            for mode in ("on", "off"):
                row[f"ratio_{ph}_{mode}"] = summary([x / y for x, y in zip(s[f"hone_{ph}_{mode}"], s[f"peer_{ph}_{mode}"])])
        rows.append(row)

    result = {"benchmark": f"AMX on/off: pp{a.pp} and tg{a.tg} at depth {a.pp}, hone run vs llama-bench",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": {k: machine[k] for k in ("cpu_model", "physical_cores", "logical_cpus", "isa", "fingerprint")}
              | {"amx": machine["amx"], "llama_build": machine["llama_cpp"]["build"]},
              "threads": threads, "reps": a.reps, "rows": rows}
    host = socket.gethostname().split(".")[0]
    base = os.path.join(a.out_dir, f"amx_on_off-{host}-{datetime.datetime.now():%Y%m%d-%H%M}")
    os.makedirs(a.out_dir, exist_ok=True)
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=2)
    m = lambda x: f"{x['mean']:.1f} ± {x['ci95']:.1f}"
    r3 = lambda x: f"{x['mean']:.2f} ± {x['ci95']:.2f}"
    md = [f"# {result['benchmark']}", "", f"- date: {result['date']}",
          f"- machine: {machine['cpu_model']}, {machine['physical_cores']} cores, llama.cpp build "
          f"{machine['llama_cpp']['build']}; AMX: {machine['amx']['reason']}",
          f"- synthetic Qwen2.5-0.5B, {threads} threads, {a.reps} interleaved repetitions; tok/s mean ± 95% CI",
          f"- command: `bench/amx_on_off.py --reps {a.reps} --pp {a.pp} --tg {a.tg} --types {a.types}`", "",
          "| type | tool | pp AMX | pp refused | AMX speedup | tg AMX | tg refused | AMX speedup |",
          "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for tool in ("hone", "peer"):
            md.append(f"| {r['type']} | {'hone run' if tool == 'hone' else 'llama-bench'} | {m(r[tool + '_pp_on'])} | "
                      f"{m(r[tool + '_pp_off'])} | {r3(r[tool + '_pp_amx_speedup'])} | {m(r[tool + '_tg_on'])} | "
                      f"{m(r[tool + '_tg_off'])} | {r3(r[tool + '_tg_amx_speedup'])} |")
    md += ["", "hone / llama-bench (paired per repetition):", "",
           "| type | pp AMX | pp refused | tg AMX | tg refused |", "|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['type']} | {r3(r['ratio_pp_on'])} | {r3(r['ratio_pp_off'])} | {r3(r['ratio_tg_on'])} | "
                  f"{r3(r['ratio_tg_off'])} |")
    with open(base + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
