#!/usr/bin/env python3
"""The cost of verifying k drafts, t(k+1)/t(1), on memory-bound model shapes,
measured by hone (`hone tune --spec only`) and by the peer (llama-bench prompt
processing of k+1 tokens against 1), and the speedup it projects for the
acceptances measured on real text.

Random weights make acceptance meaningless, so the synthetic Qwen shapes give
the cost only; the acceptance comes from the trained TinyStories model
(--acceptance, default: what bench/spec_vs_llama_server.py and `hone tune`
measured there). The projection is (1 - a^(k+1)) / (1 - a) / cost(k), the best
over k, and is a projection, not a measurement: it leaves out the drafter's own
time (near zero for n-gram drafting).

Usage: bench/spec_cost_curve.py [--model M ...] [--reps 2] [--acceptance 0.45,0.6,0.75]
The 7B shape (8 min, 15 GB of disk on 2 cores) is made with:
  build/hone synth --like qwen2.5-7b --out models/qwen2.5-7b.f16.gguf
  build/hone quantize models/qwen2.5-7b.f16.gguf --types q4_k_m
Writes bench/results/spec_cost_curve-<host>-<date>.{md,json}.
"""
import argparse, datetime, json, math, os, socket, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KS = [0, 1, 2, 3, 4, 6, 8, 12, 16]


def peer_prefix():
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts/build-llama.sh")], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def hone_curve(hone, model, prompts):
    env = dict(os.environ, HONE_PROFILE_DIR=tempfile.mkdtemp(prefix="hone-cost-"))
    cmd = [hone, "tune", model, "--spec", "only", "--no-save", "--json", "-q", "--gen-tokens", "16",
           "--spec-prompts", prompts]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    s = json.loads(out[out.index("{"):])["speculation"]
    return dict(zip(s["cost_k"], s["cost_curve"]))


def peer_curve(peer_bin, model, threads):
    sizes = ",".join(str(k + 1) for k in KS)
    cmd = [os.path.join(peer_bin, "llama-bench"), "-m", model, "-p", sizes, "-n", "0", "-t", str(threads),
           "-r", "5", "-o", "json"]
    rows = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    ns = {r["n_prompt"]: r["avg_ns"] for r in rows}
    return {k: ns[k + 1] / ns[1] for k in KS}


def projected(a, curve):
    best = (1.0, 0)
    for k, c in curve.items():
        if k == 0 or c <= 0:
            continue
        tokens = (1 - a ** (k + 1)) / (1 - a) if a < 1 else k + 1
        best = max(best, (tokens / c, k))
    return best


def mean_ci(xs):
    m = statistics.mean(xs)
    if len(xs) < 2:
        return m, 0.0
    return m, 1.96 * statistics.stdev(xs) / math.sqrt(len(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", help="GGUF (repeatable); default: the synthetic 0.5B and 7B Q4_K_M if present")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--acceptance", default="0.45,0.6,0.75",
                    help="acceptances to project (TinyStories: draft model 42-47%%, n-gram on copy-heavy text 54-75%%)")
    ap.add_argument("--hone", default=os.path.join(ROOT, "build/hone"))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench/results"))
    ap.add_argument("--peer-bin", default="", help="folder of the peer llama-bench (default: the pinned build's)")
    a = ap.parse_args()
    peer_bin = a.peer_bin or os.path.join(peer_prefix(), "bin")
    machine = json.loads(subprocess.run([a.hone, "info", "--json", "--bandwidth-seconds", "0.5"], capture_output=True,
                                        text=True, check=True).stdout)
    threads = machine["physical_cores"]
    models = a.model or [m for m in (os.path.join(ROOT, "models/qwen2.5-0.5b.Q4_K_M.gguf"),
                                      os.path.join(ROOT, "models/qwen2.5-7b.Q4_K_M.gguf")) if os.path.exists(m)]
    if not models:
        raise SystemExit("no model: run ./setup.sh (makes models/qwen2.5-0.5b.Q4_K_M.gguf) or pass --model")
    prompts = os.path.join(tempfile.mkdtemp(prefix="hone-cost-"), "p.txt")
    with open(prompts, "w") as f:
        f.write("Customer: my order 48213-A has not arrived. Agent: I am sorry, your order 48213-A\n")
    accs = [float(x) for x in a.acceptance.split(",")]
    report = {"machine": machine.get("cpu_model"), "threads": threads, "reps": a.reps, "models": {}}
    for model in models:
        hone, peer = {k: [] for k in KS}, {k: [] for k in KS}
        for rep in range(a.reps):  # interleaved: drift hits both alike
            for k, v in hone_curve(a.hone, model, prompts).items():
                hone[int(k)].append(v)
            for k, v in peer_curve(peer_bin, model, threads).items():
                peer[k].append(v)
            print(f"{os.path.basename(model)} rep {rep + 1}/{a.reps} done", flush=True)
        h = {k: mean_ci(v) for k, v in hone.items()}
        p = {k: mean_ci(v) for k, v in peer.items()}
        proj = {str(acc): projected(acc, {k: m for k, (m, _) in h.items()}) for acc in accs}
        report["models"][os.path.basename(model)] = {
            "hone": {str(k): {"mean": m, "ci95": c} for k, (m, c) in h.items()},
            "llama_bench": {str(k): {"mean": m, "ci95": c} for k, (m, c) in p.items()},
            "projected": {acc: {"speedup": s, "k": k} for acc, (s, k) in proj.items()}}
    lines = [f"# t(k+1)/t(1) on {report['machine']}, {threads} threads, {a.reps} reps (mean ± 95% CI)", ""]
    for name, r in report["models"].items():
        lines += [f"## {name}", "", "| k | hone | llama-bench pp(k+1)/pp(1) |", "|---|---|---|"]
        for k in KS:
            hk, pk = r["hone"][str(k)], r["llama_bench"][str(k)]
            lines.append(f"| {k} | {hk['mean']:.2f} ± {hk['ci95']:.2f} | {pk['mean']:.2f} ± {pk['ci95']:.2f} |")
        lines += ["", "Projected single-stream speedup (from hone's curve; not measured):", ""]
        for acc, pr in r["projected"].items():
            lines.append(f"- acceptance {acc}: x{pr['speedup']:.2f} at k={pr['k']}")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    os.makedirs(a.out_dir, exist_ok=True)
    stem = os.path.join(a.out_dir, f"spec_cost_curve-{socket.gethostname().split('.')[0]}-{datetime.datetime.utcnow():%Y%m%d-%H%M}")
    with open(stem + ".md", "w") as f:
        f.write(text)
    with open(stem + ".json", "w") as f:
        json.dump(report, f, indent=2)
    print("wrote", stem + ".md")


if __name__ == "__main__":
    main()
