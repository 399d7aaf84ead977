#!/usr/bin/env python3
"""Perplexity of `hone bench` against the peer `llama-perplexity`, same models,
same corpus, same context, same run: the issue's correctness bar (within 1%).

Usage: bench/quant_ppl_vs_peer.py [--hone build/hone] [--ctx 256] [--model M]
Default models: ../shared/models/stories260K.gguf and its Q8_0 and Q4_0 (made
with `hone quantize` into build/quant-lab/ when missing).
Writes bench/results/quant_ppl_vs_peer-<host>-<date>.{md,json} and prints the table.
"""
import argparse, datetime, json, os, platform, re, socket, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")


def peer_bin():
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts/build-llama.sh")], capture_output=True, text=True, check=True)
    return os.path.join(out.stdout.strip().splitlines()[-1], "bin")


def peer_ppl(bindir, model, corpus, ctx, threads):
    # Into a temporary file, not a pipe: through a pipe llama-perplexity at this
    # commit sometimes loses the tail of its log (the final estimate) at exit.
    with tempfile.TemporaryFile("w+") as f:
        subprocess.run([os.path.join(bindir, "llama-perplexity"), "-m", model, "-f", corpus, "-c", str(ctx),
                        "-t", str(threads)], stdout=f, stderr=subprocess.STDOUT, text=True)
        f.seek(0)
        out = f.read()
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
    return (float(m.group(1)), float(m.group(2))) if m else (None, None)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hone", default=os.path.join(ROOT, "build/hone"))
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--corpus", default=os.path.join(SHARED, "corpora/tinystories_heldout.txt"))
    ap.add_argument("--model", action="append")
    ap.add_argument("--lab", default=os.path.join(ROOT, "build/quant-lab"))
    a = ap.parse_args()
    src = os.path.join(SHARED, "models/stories260K.gguf")
    models = a.model or [src, os.path.join(a.lab, "stories260K.Q8_0.gguf"), os.path.join(a.lab, "stories260K.Q4_0.gguf")]
    if not a.model:
        subprocess.run([a.hone, "quantize", src, "--types", "q8_0,q4_0", "--out-dir", a.lab, "-q"], check=True,
                       stdout=subprocess.DEVNULL)
    bench = subprocess.run([a.hone, "bench", *models, "--corpus", a.corpus, "--ctx", str(a.ctx), "--no-speed",
                            "--no-tasks", "--no-cache", "--json", "-t", str(a.threads), "--results",
                            os.path.join(a.lab, "ppl-bench")], capture_output=True, text=True, check=True).stdout
    rows = json.loads(bench[bench.index("{"):])["rows"]
    bindir = peer_bin()
    results = []
    for m, r in zip(models, rows):
        p, pe = peer_ppl(bindir, m, a.corpus, a.ctx, a.threads)
        results.append({"model": os.path.basename(m), "hone_ppl": r["ppl"], "hone_err": r["ppl_err"], "peer_ppl": p,
                        "peer_err": pe, "ratio": r["ppl"] / p if p else None, "kld_mean": r["kld"]["mean"],
                        "same_top1": r["kld"]["same_top1"]})
    machine = subprocess.run([a.hone, "info", "--json", "--bandwidth-seconds", "0.2"], capture_output=True,
                             text=True).stdout
    try:
        mj = json.loads(machine[machine.index("{"):])
        desc = f"{mj.get('cpu_model', '?')}, {mj.get('physical_cores')} cores, {platform.system()}"
    except (ValueError, KeyError):
        desc = platform.platform()
    lines = [f"# hone bench perplexity vs llama-perplexity", "",
             f"{desc}; corpus `{os.path.relpath(a.corpus, ROOT)}`, context {a.ctx}, {a.threads} threads, "
             f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC", "",
             "| model | hone PPL | llama-perplexity PPL | hone / peer | hone mean KLD vs F32 | same top-1 |",
             "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['model']} | {r['hone_ppl']:.4f} ± {r['hone_err']:.4f} | {r['peer_ppl']:.4f} ± "
                     f"{r['peer_err']:.4f} | {r['ratio']:.5f} | {r['kld_mean']:.6f} | {100 * r['same_top1']:.2f}% |")
    ok = all(r["ratio"] and abs(r["ratio"] - 1) <= 0.01 for r in results)
    lines += ["", f"All within 1%: **{'yes' if ok else 'NO'}**. Rerun with `python3 bench/quant_ppl_vs_peer.py`."]
    text = "\n".join(lines) + "\n"
    print(text)
    stamp = f"{socket.gethostname().split('.')[0][:12]}-{datetime.datetime.utcnow():%Y%m%d-%H%M}"
    out = os.path.join(ROOT, "bench/results", f"quant_ppl_vs_peer-{stamp}")
    with open(out + ".md", "w") as f:
        f.write(text)
    with open(out + ".json", "w") as f:
        json.dump({"machine": desc, "ctx": a.ctx, "corpus": a.corpus, "results": results}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
