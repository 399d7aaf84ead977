#!/usr/bin/env python3
"""What n-gram speculation would give a single stream on copy-heavy prompts on
a machine where decode is memory-bound (issue 28, goal "single stream >= 1.5x").

Random-weight models make acceptance meaningless and the trained model at hand
(../shared/models/tinystories-d256-l4-f32.gguf) is compute-bound, so the goal
cannot be measured directly here. This splits it into what can be measured:

1. Measured on this machine: hone serve without speculation and with
   `--spec ngram-simple --spec-min-gain 0` (always draft, so the drafts and the
   tokens kept are the n-gram library's, not bent by this machine's costs), one
   client, copy-heavy TinyStories prompts, greedy; tok/s and the ratio, with
   95% CIs over --reps interleaved runs. HONE_STEP_TRACE records every step:
   how many drafts it checked (k) and how many tokens it emitted.
2. The check of the method: the decode steps alone (from both servers' traces)
   give a decode-only ratio; the end-to-end ratio should sit near it (the rest
   is prefill and HTTP, the same work in both). This machine's own curve (mean
   seconds of a k-draft step over a plain one-token step) is printed beside the
   saved curves, so it can be compared with what spec_cost_curve.py measured.
3. Projected, not measured: the same steps priced with the cost curves
   t(k+1)/t(1) of bench/spec_cost_curve.py (--curve FILE.json, each model and
   column in it), and the per-draft cost b that a curve 1 + b*k must not exceed
   for 1.5x. Speedup = tokens emitted / sum over steps of t(k+1)/t(1): decode
   only, assuming the always-drafting policy (the cost model would draft less
   where drafts cost more).

Usage: bench/spec_projection.py [--reps 3] [--requests 6] [--max-tokens 200]
       [--spec-max 8] [--curve bench/results/spec_cost_curve-*.json ...]
Writes bench/results/spec_projection-<host>-<date>.{md,json}.
"""
import argparse, csv, datetime, glob, json, os, socket, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from tg_vs_llama_bench import summary  # noqa: E402
from serve_vs_llama_server import free_port, wait_ready  # noqa: E402
from spec_vs_llama_server import COPY_PROMPTS, one  # noqa: E402


def serve(a, trace, spec):
    port = free_port()
    cmd = [a.hone, "serve", "--models", os.path.dirname(a.model), "--port", str(port), "--slots", "1",
           "--quiet", "true", "--cache-ram", "0", "--cache-disk", "0"]
    if spec:
        cmd += ["--spec", a.spec, "--spec-ngram", str(a.ngram), "--spec-min-gain", "0",
                "--spec-max", str(a.spec_max)]
        if a.draft:
            cmd += ["--draft", a.draft]
    env = dict(os.environ, HONE_STEP_TRACE=trace)
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wait_ready(port, p)
    return p, port


def run_once(a, model, spec, trace):
    p, port = serve(a, trace, spec)
    try:
        one(port, model, COPY_PROMPTS[0], 8)  # warm (its few steps stay in the trace: copy-heavy too)
        tokens, t0 = 0, time.perf_counter()
        for i in range(a.requests):
            tokens += one(port, model, COPY_PROMPTS[i % len(COPY_PROMPTS)], a.max_tokens)[0]
        return tokens / (time.perf_counter() - t0)
    finally:
        p.terminate()
        p.wait()


def steps(trace):
    """Decode-only steps of the one slot: (drafts checked, tokens emitted, seconds)."""
    out = []
    with open(trace) as f:
        for row in csv.DictReader(f):
            if row["model"] == "model" or int(row["prefill_tokens"]) or int(row["decode_tokens"]) < 1:
                continue
            out.append((int(row["drafted"]), int(row["emitted"]), float(row["whole_s"])))
    return out


def price(run, cost):
    """Tokens emitted per unit of one plain step's time, steps priced by cost(k)."""
    return sum(e for _, e, _ in run) / sum(cost(k) for k, _, _ in run)


def interpolated(curve):
    ks = sorted(curve)

    def cost(k):
        if k in curve:
            return curve[k]
        if k > ks[-1]:
            return curve[ks[-1]] * (k + 1) / (ks[-1] + 1)
        lo = max(x for x in ks if x < k)
        hi = min(x for x in ks if x > k)
        return curve[lo] + (curve[hi] - curve[lo]) * (k - lo) / (hi - lo)
    return cost


def own_curve(run, plain):
    """t(k+1)/t(1) from the traces: a k-draft step over a plain one-token step."""
    by_k = {}
    for k, _, s in run:
        by_k.setdefault(k, []).append(s)
    base = sum(s for _, _, s in plain) / len(plain)
    return {k: (sum(v) / len(v)) / base for k, v in by_k.items()}


def decode_rate(run):
    return sum(e for _, e, _ in run) / sum(s for _, _, s in run)


def break_even_b(run, goal):
    emitted = sum(e for _, e, _ in run)
    drafts = sum(k for k, _, _ in run)
    return (emitted / goal - len(run)) / drafts if drafts else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "..", "shared", "models", "tinystories-d256-l4-f32.gguf"))
    ap.add_argument("--hone", default=os.path.join(ROOT, "build", "hone"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--requests", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--spec", default="ngram-simple",
                    help="the drafter: an n-gram type, draft-simple (with --draft) or a list, as hone serve --spec")
    ap.add_argument("--draft", help="draft model GGUF for --spec draft-simple (e.g. ../shared/models/stories260K.gguf)")
    ap.add_argument("--ngram", type=int, default=3)
    ap.add_argument("--spec-max", type=int, default=8)
    ap.add_argument("--curve", action="append",
                    help="spec_cost_curve JSON (repeatable; default: every one in bench/results)")
    a = ap.parse_args()
    a.model = os.path.abspath(a.model)
    if a.draft:
        a.draft = os.path.abspath(a.draft)
    model = os.path.splitext(os.path.basename(a.model))[0]
    tmp = tempfile.mkdtemp(prefix="hone-proj-")
    plain_tps, spec_tps, ratios, spec_steps, plain_steps = [], [], [], [], []
    for rep in range(a.reps):
        order = [False, True] if rep % 2 == 0 else [True, False]
        got = {}
        for spec in order:
            trace = os.path.join(tmp, f"trace-{rep}-{int(spec)}.csv")
            got[spec] = run_once(a, model, spec, trace)
            (spec_steps if spec else plain_steps).extend(steps(trace))
        plain_tps.append(got[False])
        spec_tps.append(got[True])
        ratios.append(got[True] / got[False])
        print(f"rep {rep + 1}/{a.reps}: plain {got[False]:.0f} tok/s, spec {got[True]:.0f} tok/s", flush=True)
    if not spec_steps or not plain_steps:
        raise SystemExit(f"no decode steps in the traces under {tmp}: does {a.hone} write HONE_STEP_TRACE?")
    report(a, plain_tps, spec_tps, ratios, spec_steps, plain_steps)


def curves(a):
    files = a.curve or sorted(glob.glob(os.path.join(ROOT, "bench", "results", "spec_cost_curve-*.json")))
    for path in files:
        data = json.load(open(path))
        for name, cols in data["models"].items():
            for col in ("hone", "llama_bench"):
                if col in cols:
                    yield (f"{name}, {col} ({os.path.basename(path)}, {data.get('machine', '?')})",
                           {int(k): v["mean"] for k, v in cols[col].items()})


def report(a, plain_tps, spec_tps, ratios, run, plain):
    p, s, r = summary(plain_tps), summary(spec_tps), summary(ratios)
    drafts = sum(k for k, _, _ in run)
    kept = sum(e - 1 for _, e, _ in run)
    mine = own_curve(run, plain)
    lines = [f"# Single stream on copy-heavy prompts: measured here, projected elsewhere "
             f"({datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC)", "",
             f"Model {os.path.basename(a.model)}, `--spec {a.spec} --spec-ngram {a.ngram} --spec-min-gain 0 "
             f"--spec-max {a.spec_max}{' --draft ' + os.path.basename(a.draft) if a.draft else ''}`, {a.requests} copy-heavy requests of {a.max_tokens} tokens per run, "
             f"{a.reps} interleaved reps. Command: `python3 bench/spec_projection.py {' '.join(sys.argv[1:])}`", "",
             "## Measured on this machine", "",
             f"- plain {p['mean']:.0f} ± {p['ci95']:.0f} tok/s, always drafting {s['mean']:.0f} ± {s['ci95']:.0f} "
             f"tok/s: **ratio {r['mean']:.3f} ± {r['ci95']:.3f}**",
             f"- {len(run)} decode steps, {drafts} drafts checked, {kept} kept ({100 * kept / max(drafts, 1):.0f}%), "
             f"{sum(e for _, e, _ in run) / len(run):.2f} tokens per step",
             "- this machine's own step cost t(k+1)/t(1): " +
             ", ".join(f"k={k}: {c:.2f}" for k, c in sorted(mine.items())), "",
             "## The method checked here", "",
             f"- decode steps alone (both traces): **{decode_rate(run) / decode_rate(plain):.3f}**; end to end "
             f"{r['mean']:.3f} ± {r['ci95']:.3f} (the difference is prefill and HTTP, alike in both)", "",
             "## Projected (not measured): the same steps on other cost curves", "",
             "| cost curve | t(2)/t(1) | t(5)/t(1) | projected speedup |", "|---|---|---|---|"]
    projections = {}
    for name, curve in curves(a):
        cost = interpolated(curve)
        projections[name] = price(run, cost)
        lines.append(f"| {name} | {cost(1):.2f} | {cost(4):.2f} | {projections[name]:.2f} |")
    b15 = break_even_b(run, 1.5)
    ceiling = sum(e for _, e, _ in run) / len(run)
    if b15 >= 0:
        need = (f"a curve t(k+1)/t(1) = 1 + b·k gives 1.5× for **b ≤ {b15:.3f}** "
                f"(t(5)/t(1) ≤ {1 + 4 * b15:.2f})")
    else:  # fewer than 1.5 tokens per step: no cost curve reaches it
        need = (f"**1.5× is out of reach on any machine with these drafts**: even free verification "
                f"gives {ceiling:.2f}× (tokens per step)")
    lines += ["", f"- {need}; 1.0× for b ≤ {break_even_b(run, 1.0):.3f}", ""]
    text = "\n".join(lines)
    print(text)
    stem = os.path.join(ROOT, "bench", "results",
                        f"spec_projection-{socket.gethostname().split('.')[0]}-{datetime.datetime.utcnow():%Y%m%d-%H%M}")
    with open(stem + ".md", "w") as f:
        f.write(text)
    with open(stem + ".json", "w") as f:
        json.dump({"plain_tps": plain_tps, "spec_tps": spec_tps, "ratios": ratios, "own_curve": mine,
                   "projections": projections, "break_even_b_1_5": b15, "tokens_per_step": ceiling,
                   "steps": [list(x) for x in run]}, f, indent=1)
    print("wrote", stem + ".md")


if __name__ == "__main__":
    main()
