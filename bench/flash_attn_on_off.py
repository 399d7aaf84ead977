#!/usr/bin/env python3
"""hone serve with flash attention on against hone's default (off), one
client, a long prompt (--prompt-tokens [~1400]) then --max-tokens [48]
generated: time to first token (the prefill at that depth) and decode tok/s
at that depth, each server started fresh, the order alternating, --reps [3].

Model [models/qwen2.5-0.5b.Q4_K_M.gguf, setup.sh's synthetic Qwen]. Writes
bench/results/flash_attn-<host>-<date>.md with means, 95% CIs and the
off/on ratios.
"""
import argparse, datetime, http.client, json, os, platform, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from tg_vs_llama_bench import summary  # noqa: E402
from serve_vs_llama_server import free_port, wait_ready  # noqa: E402


def run_once(a, fa, prompt):
    port = free_port()
    name = os.path.basename(a.model)[:-5]
    p = subprocess.Popen([a.hone, "serve", "--models", os.path.dirname(a.model), "--port", str(port), "--slots", "1",
                          "--threads", str(a.threads), "--quiet", "true", "--cache-ram", "0", "--cache-disk", "0",
                          "--flash-attn", fa], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, p)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
        t0 = time.perf_counter()
        c.request("POST", "/v1/completions", json.dumps({"model": name, "prompt": prompt, "max_tokens": a.max_tokens,
                                                         "temperature": 0, "ignore_eos": True, "stream": True}),
                  {"Content-Type": "application/json"})
        first, n = None, 0
        for line in c.getresponse():
            if line.startswith(b"data: {"):
                first = first or time.perf_counter()
                n += 1
        end = time.perf_counter()
        return first - t0, (n - 1) / (end - first)
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "qwen2.5-0.5b.Q4_K_M.gguf"))
    ap.add_argument("--hone", default=os.path.join(ROOT, "build", "hone"))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeat", type=int, default=70, help="times the support sentence repeats in the prompt")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    prompt = " ".join(["The order number is 48213 and the address is 12 Long Road."] * a.repeat)
    got = {"on": [], "off": []}
    for rep in range(a.reps):
        for fa in (("on", "off") if rep % 2 == 0 else ("off", "on")):
            ttft, tps = run_once(a, fa, prompt)
            got[fa].append((ttft, tps))
            print(f"rep {rep} flash attention {fa}: TTFT {ttft:.2f} s, decode {tps:.1f} tok/s", file=sys.stderr)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M")
    lines = [f"# hone serve: flash attention on vs off ({stamp})", "",
             f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; model "
             f"{os.path.basename(a.model)}; one client, ~{a.repeat * 20} prompt tokens, {a.max_tokens} generated; "
             f"{a.reps} reps, fresh servers, order alternating.",
             f"Command: `python3 bench/flash_attn_on_off.py {' '.join(sys.argv[1:])}`", "",
             "| flash attention | TTFT s (mean ± 95% CI) | decode tok/s (mean ± 95% CI) |", "|---|---|---|"]
    for fa in ("on", "off"):
        t, d = summary([x[0] for x in got[fa]]), summary([x[1] for x in got[fa]])
        lines.append(f"| {fa} | {t['mean']:.2f} ± {t['ci95']:.2f} | {d['mean']:.1f} ± {d['ci95']:.1f} |")
    rt = summary([off[0] / on[0] for off, on in zip(got["off"], got["on"])])
    rd = summary([off[1] / on[1] for off, on in zip(got["off"], got["on"])])
    lines += ["", f"off / on: TTFT {rt['mean']:.3f} ± {rt['ci95']:.3f}, decode {rd['mean']:.3f} ± {rd['ci95']:.3f}"]
    out = os.path.join(ROOT, "bench", "results", f"flash_attn-{platform.node().split('.')[0]}-{stamp}.md")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("written to", out)


if __name__ == "__main__":
    main()
