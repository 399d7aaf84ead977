#!/usr/bin/env python3
"""Decode speed of `hone run` against the peer `llama-bench` tg128, same model,
same threads, same run, interleaved so drift hits both alike.

Usage: bench/tg_vs_llama_bench.py [--model M] [--threads T] [--reps N] [--n 128]
Writes bench/results/tg_vs_llama_bench-<host>-<date>.{md,json} and prints the table.
The default model is the synthetic Qwen2.5-0.5B Q4_K_M made by ./setup.sh
(created here if missing).
"""
import argparse, datetime, json, math, os, platform, socket, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T95 = [0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
       2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086]


def t95(dof):
    return T95[dof] if 0 < dof < len(T95) else 1.96


def summary(xs):
    m = statistics.mean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return {"n": len(xs), "mean": m, "stddev": sd, "ci95": t95(len(xs) - 1) * sd / math.sqrt(len(xs)) if len(xs) > 1 else 0,
            "min": min(xs), "max": max(xs), "cv": sd / m if m else 0}


def peer_prefix():
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts/build-llama.sh")], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def ensure_default_model(hone, peer_bin):
    f16 = os.path.join(ROOT, "models/qwen2.5-0.5b.f16.gguf")
    q4 = os.path.join(ROOT, "models/qwen2.5-0.5b.Q4_K_M.gguf")
    os.makedirs(os.path.dirname(q4), exist_ok=True)
    if not os.path.exists(f16):
        subprocess.run([hone, "synth", "--like", "qwen2.5-0.5b", "--out", f16], check=True)
    if not os.path.exists(q4):
        subprocess.run([os.path.join(peer_bin, "llama-quantize"), f16, q4, "Q4_K_M"], check=True, capture_output=True)
    return q4


def run_peer(peer_bin, model, threads, n):
    cmd = [os.path.join(peer_bin, "llama-bench"), "-m", model, "-p", "0", "-n", str(n), "-t", str(threads), "-r", "1", "-o", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = json.loads(out)
    return rows[0]["avg_ts"]


def run_hone(hone, model, threads, n):
    cmd = [hone, "run", model, "-p", "Tell me a story about a fast computer.", "-n", str(n), "--ignore-eos",
           "--temp", "0", "-t", str(threads), "-c", "512", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{"):])["gen_tps"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model")
    ap.add_argument("--threads", type=int, default=0, help="0 = physical cores from `hone info`")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--hone", default=os.path.join(ROOT, "build/hone"))
    ap.add_argument("--hone-b", help="a second hone binary (an older build), measured in the same interleaved reps")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench/results"))
    ap.add_argument("--peer-bin", default=os.environ.get("HONE_PEER_BIN"),
                    help="folder with llama-bench/llama-quantize (default: the pinned cached build)")
    a = ap.parse_args()

    peer_bin = a.peer_bin or os.path.join(peer_prefix(), "bin")
    machine = json.loads(subprocess.run([a.hone, "info", "--json", "--bandwidth-seconds", "0.5"], capture_output=True,
                                        text=True, check=True).stdout)
    threads = a.threads or machine["physical_cores"]
    model = a.model or ensure_default_model(a.hone, peer_bin)

    # Warm the page cache and both code paths once, unmeasured.
    run_peer(peer_bin, model, threads, 16)
    run_hone(a.hone, model, threads, 16)
    if a.hone_b:
        run_hone(a.hone_b, model, threads, 16)
    samples = {"hone": [], "hone_b": [], "peer": []}
    runners = {"hone": lambda: run_hone(a.hone, model, threads, a.n),
               "hone_b": lambda: run_hone(a.hone_b, model, threads, a.n),
               "peer": lambda: run_peer(peer_bin, model, threads, a.n)}
    names = ["hone", "hone_b", "peer"] if a.hone_b else ["hone", "peer"]
    for i in range(a.reps):
        for name in (names if i % 2 == 0 else names[::-1]):
            v = runners[name]()
            samples[name].append(v)
            print(f"rep {i + 1}/{a.reps} {name}: {v:.2f} tok/s", file=sys.stderr)
    hone_tps, peer_tps = samples["hone"], samples["peer"]

    h, p = summary(hone_tps), summary(peer_tps)
    ratios = [x / y for x, y in zip(hone_tps, peer_tps)]  # paired: same rep, adjacent in time
    r = summary(ratios)
    result = {
        "benchmark": "decode tok/s: hone run vs llama-bench tg%d" % a.n,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "model": os.path.relpath(model, ROOT), "threads": threads, "reps": a.reps,
        "machine": {k: machine[k] for k in ("cpu_model", "arch", "physical_cores", "logical_cpus", "isa", "fingerprint")}
        | {"bandwidth_gbps": machine["bandwidth"]["read_gbps"], "memory_bytes": machine["memory"]["total_bytes"]},
        "hone": h, "llama_bench": p, "ratio": r, "hone_samples": hone_tps, "llama_bench_samples": peer_tps,
        "within_5pct": abs(r["mean"] - 1) <= 0.05,
    }
    if a.hone_b:
        result["hone_b"] = {"binary": a.hone_b, **summary(samples["hone_b"]), "samples": samples["hone_b"]}
        result["hone_vs_hone_b"] = summary([x / y for x, y in zip(hone_tps, samples["hone_b"])])
    host = socket.gethostname().split(".")[0]
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M")
    os.makedirs(a.out_dir, exist_ok=True)
    base = os.path.join(a.out_dir, f"tg_vs_llama_bench-{host}-{stamp}")
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=2)
    m = result["machine"]
    md = [f"# {result['benchmark']}", "",
          f"- date: {result['date']}", f"- machine: {m['cpu_model']} ({m['arch']}), {m['physical_cores']} cores / "
          f"{m['logical_cpus']} CPUs, {m['bandwidth_gbps']:.1f} GB/s measured read bandwidth, fingerprint {m['fingerprint']}",
          f"- model: `{result['model']}`, threads {threads}, {a.reps} interleaved repetitions of {a.n} generated tokens",
          f"- command: `bench/tg_vs_llama_bench.py --threads {threads} --reps {a.reps} --n {a.n}"
          + (f" --hone-b {a.hone_b}" if a.hone_b else "") + "`", "",
          "| tool | mean tok/s | ± 95% CI | stddev | min | max | CV |", "|---|---|---|---|---|---|---|"]
    for name, s in (("hone run", h), ("llama-bench tg%d" % a.n, p)):
        md.append(f"| {name} | {s['mean']:.2f} | {s['ci95']:.2f} | {s['stddev']:.2f} | {s['min']:.2f} | {s['max']:.2f} | {100 * s['cv']:.1f}% |")
    md += ["", f"**hone / llama-bench = {r['mean']:.3f} ± {r['ci95']:.3f}** (paired per repetition, 95% CI); "
           f"within 5%: {'yes' if result['within_5pct'] else 'no'}", ""]
    if a.hone_b:
        b, rb = result["hone_b"], result["hone_vs_hone_b"]
        md += [f"hone run ({a.hone_b}): {b['mean']:.2f} ± {b['ci95']:.2f} tok/s; "
               f"**hone / that build = {rb['mean']:.3f} ± {rb['ci95']:.3f}** (paired per repetition)", ""]
    with open(base + ".md", "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))
    print(f"wrote {base}.md and .json", file=sys.stderr)


if __name__ == "__main__":
    main()
