#!/usr/bin/env python3
"""`hone tune`: llama.cpp's defaults vs the default (budgeted) search vs the
`--exhaustive` grid's best, with each search's measuring time, on the
synthetic Qwen2.5-0.5B Q4_K_M and one other shape.

For each model:
  1. `hone tune --json --no-save` (default search, --budget) and
     `hone tune --exhaustive --json --no-save`: best configuration, the tuner's
     own paired speedup, and the time each spent measuring.
  2. An independent check in the same run: `hone run` with llama.cpp's
     defaults, the tuned flags and the grid-best flags, interleaved, --reps
     times each; the objective is the chat one, (prompt + generated tokens) /
     time to answer. Mean, 95% CI and ratios to the defaults.
  3. The peer: `llama-bench -pg P,G` (same objective) with its defaults and
     with the tuned parameters it accepts (one thread count for both phases,
     so the decode count; no repack switch).

Usage: bench/tune_bench.py [--budget 2m] [--reps 5] [--prompt-tokens 64] [--gen-tokens 32] [--models a,b]
Writes bench/results/tune_bench-<host>-<date>.{md,json}.
"""
import argparse, datetime, json, math, os, platform, socket, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HONE = os.path.join(ROOT, os.environ.get("HONE_BUILD_DIR", "build"), "hone")
T95 = [0, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228]
DEFAULT_MODELS = ["models/qwen2.5-0.5b.Q4_K_M.gguf", "../shared/models/tinystories-d256-l4-f32.gguf"]
WORDS = ("the old lighthouse keeper climbed the stairs each evening counting the steps and listening to the sea "
         "while the ships passed far away in the dark").split()


def prompt_text(n):
    # About one token per common word (plus BOS): close to the tuner's --prompt-tokens.
    return " ".join(WORDS[i % len(WORDS)] for i in range(max(1, n - 2)))


def summary(xs):
    m = statistics.mean(xs)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    t = T95[len(xs) - 1] if 0 < len(xs) - 1 < len(T95) else 1.96
    return {"n": len(xs), "mean": m, "ci95": t * sd / math.sqrt(len(xs)) if len(xs) > 1 else 0.0,
            "min": min(xs), "max": max(xs), "cv": sd / m if m else 0}


def peer_bin():
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts/build-llama.sh")], capture_output=True, text=True, check=True)
    return os.path.join(out.stdout.strip().splitlines()[-1], "bin")


def tune(model, args, exhaustive):
    cmd = [HONE, "tune", model, "--json", "--no-save", "-q", "--prompt-tokens", str(args.prompt_tokens),
           "--gen-tokens", str(args.gen_tokens), "--budget", args.budget] + (["--exhaustive"] if exhaustive else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out[out.index("{"):])


def run_flags(p):
    f = ["-t", str(p["threads"]), "--threads-batch", str(p["threads_batch"]), "--poll", str(p["poll"]),
         "-b", str(p["n_batch"]), "-u", str(p["n_ubatch"]), "--flash-attn", p["flash_attn"],
         "--kv-type", p["kv_type"], "--load-mode", p["load_mode"]]
    if p["cpus"]:
        f += ["--cpus", ",".join(map(str, p["cpus"]))] + (["--cpu-strict"] if p["strict_cpu"] else [])
    if not p["repack"]:
        f.append("--no-repack")
    return f


def hone_run(model, params, args):
    cmd = [HONE, "run", model, "--no-profile", "-q", "--json", "-p", prompt_text(args.prompt_tokens), "-n", str(args.gen_tokens), "--ignore-eos",
           "--temp", "0", "-c", "1024"] + run_flags(params)
    j = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    answer = j["ttft_seconds"] + j["gen_seconds"]
    return (j["prompt_tokens"] + j["generated_tokens"]) / answer, j["prompt_tokens"]


def peer_flags(p):
    f = ["-t", str(p["threads"]), "-ub", str(p["n_ubatch"]), "-b", str(p["n_batch"]), "--poll", str(p["poll"]),
         "-fa", p["flash_attn"], "-ctk", p["kv_type"], "-ctv", p["kv_type"],
         "-lm", {"mmap": "mmap", "no-mmap": "none", "mlock": "mlock", "mmap+mlock": "mmap+mlock"}[p["load_mode"]]]
    if p["cpus"]:
        mask = sum(1 << c for c in p["cpus"][:max(p["threads"], 1)])
        f += ["-C", hex(mask), "--cpu-strict", "1" if p["strict_cpu"] else "0"]
    return f


def llama_bench(pb, model, params, prompt_tokens, args):
    cmd = [os.path.join(pb, "llama-bench"), "-m", model, "-p", "0", "-n", "0", "-pg",
           f"{prompt_tokens},{args.gen_tokens}", "-r", "1", "-o", "json"] + (peer_flags(params) if params else [])
    rows = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    return rows[0]["avg_ts"]


def bench_model(model, args, pb):
    print(f"== {model}", file=sys.stderr)
    fast = tune(model, args, False)
    grid = tune(model, args, True)
    variants = {"default": fast["default_params"], "tuned": fast["best_params"], "exhaustive best": grid["best_params"]}
    scores = {k: [] for k in variants}
    peer = {"default": [], "tuned": []}
    prompt_tokens = args.prompt_tokens
    for rep in range(args.reps):
        names = list(variants)
        names = names[rep % len(names):] + names[:rep % len(names)]  # rotate the order: drift hits all alike
        for name in names:
            s, prompt_tokens = hone_run(model, variants[name], args)
            scores[name].append(s)
        peer["default"].append(llama_bench(pb, model, None, prompt_tokens, args))
        peer["tuned"].append(llama_bench(pb, model, fast["best_params"], prompt_tokens, args))
        print(f"   rep {rep + 1}/{args.reps} done", file=sys.stderr)
    ratios = {k: summary([a / b for a, b in zip(scores[k], scores["default"])]) for k in variants}
    peer_ratio = summary([a / b for a, b in zip(peer["tuned"], peer["default"])])
    return {"model": model, "prompt_tokens": prompt_tokens, "gen_tokens": args.gen_tokens,
            "search": {"default": {"best": fast["best"], "measure_seconds": fast["measure_seconds"],
                                   "trials": len(fast["trials"]), "speedup": fast["speedup"],
                                   "speedup_ci95": fast["speedup_ci95"], "budget_exhausted": fast["budget_exhausted"],
                                   "kept_defaults": fast["kept_defaults"], "roofline": fast["roofline"],
                                   "llama_server_flags": fast["llama_server_flags"]},
                       "exhaustive": {"best": grid["best"], "measure_seconds": grid["measure_seconds"],
                                      "trials": len(grid["trials"]), "grid_size": grid["grid_size"],
                                      "speedup": grid["speedup"], "speedup_ci95": grid["speedup_ci95"]}},
            "hone_run": {k: summary(v) for k, v in scores.items()}, "ratio_to_default": ratios,
            "llama_bench": {k: summary(v) for k, v in peer.items()}, "llama_bench_ratio": peer_ratio}


def machine():
    j = json.loads(subprocess.run([HONE, "info", "--json"], capture_output=True, text=True, check=True).stdout)
    return j


def markdown(res):
    m = res["machine"]
    lines = [f"# hone tune: defaults vs tuned vs exhaustive ({res['date']})", "",
             f"Machine: {res['host']}, {m.get('cpu_model', '?')}, {m.get('physical_cores', '?')} cores / "
             f"{m.get('logical_cpus', '?')} CPUs, measured read bandwidth {res['bandwidth_gbps']:.1f} GB/s. "
             "Shared with other jobs while it ran: expect noise.", "",
             f"Objective: chat, (prompt + generated tokens) / time to answer (tok/s). Budget for the default search: "
             f"{res['args']['budget']}; independent check: {res['args']['reps']} interleaved `hone run` repetitions "
             "per variant, and the peer `llama-bench -pg` with its defaults vs the tuned parameters.", ""]
    for r in res["models"]:
        s = r["search"]
        lines += [f"## {os.path.basename(r['model'])} (prompt {r['prompt_tokens']}, generate {r['gen_tokens']})", "",
                  "| variant | configuration | measuring time s | hone run tok/s | ± 95% CI | ratio to default |",
                  "|---|---|---|---|---|---|"]
        conf = {"default": "llama.cpp defaults", "tuned": s["default"]["best"], "exhaustive best": s["exhaustive"]["best"]}
        mt = {"default": "-", "tuned": f"{s['default']['measure_seconds']:.1f}",
              "exhaustive best": f"{s['exhaustive']['measure_seconds']:.1f}"}
        for k in ("default", "tuned", "exhaustive best"):
            h, q = r["hone_run"][k], r["ratio_to_default"][k]
            lines.append(f"| {k} | `{conf[k]}` | {mt[k]} | {h['mean']:.2f} | {h['ci95']:.2f} | "
                         f"{q['mean']:.3f} ± {q['ci95']:.3f} |")
        pb = r["llama_bench"]
        share = s["default"]["measure_seconds"] / max(s["exhaustive"]["measure_seconds"], 1e-9)
        lines += ["", f"- default search: {s['default']['trials']} trials, {s['default']['measure_seconds']:.1f} s "
                  f"measuring = {share * 100:.0f}% of the grid's {s['exhaustive']['measure_seconds']:.1f} s "
                  f"({s['exhaustive']['grid_size']} grid configurations); tuner's own speedup "
                  f"{s['default']['speedup']:.3f} ± {s['default']['speedup_ci95']:.3f}"
                  f"{' (kept the defaults)' if s['default']['kept_defaults'] else ''}.",
                  f"- tuned vs exhaustive best (independent check): "
                  f"{r['hone_run']['tuned']['mean'] / r['hone_run']['exhaustive best']['mean']:.3f}.",
                  f"- llama-bench -pg: defaults {pb['default']['mean']:.2f} ± {pb['default']['ci95']:.2f}, tuned "
                  f"parameters {pb['tuned']['mean']:.2f} ± {pb['tuned']['ci95']:.2f} tok/s, ratio "
                  f"{r['llama_bench_ratio']['mean']:.3f} ± {r['llama_bench_ratio']['ci95']:.3f}.",
                  f"- decode roofline of the tuned run: {s['default']['roofline']['fraction'] * 100:.1f}% of "
                  f"{s['default']['roofline']['max_decode_tps']:.1f} tok/s.",
                  f"- llama-server flags: `{s['default']['llama_server_flags']}`", ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", default="2m")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=32)
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    args = ap.parse_args()
    os.chdir(ROOT)
    pb = peer_bin()
    info = machine()
    res = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"), "host": socket.gethostname(),
           "platform": platform.platform(), "machine": info,
           "bandwidth_gbps": info.get("bandwidth", {}).get("read_gbps", 0), "args": vars(args), "models": []}
    stamp = datetime.datetime.utcnow().strftime("%Y%m%d-%H%M")
    base = os.path.join(ROOT, "bench/results", f"tune_bench-{socket.gethostname()}-{stamp}")
    for m in args.models.split(","):
        res["models"].append(bench_model(m, args, pb))
        # Written after every model, so a long run that is stopped keeps what it measured.
        with open(base + ".json", "w") as f:
            json.dump(res, f, indent=2)
        md = markdown(res)
        with open(base + ".md", "w") as f:
            f.write(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
