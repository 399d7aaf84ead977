#!/usr/bin/env python3
"""One KV stream for all slots against one stream per slot (`hone serve
--kv-unified on|off`), with long contexts in every slot: the case where the
shared stream could cost, since each token's attention then walks every
slot's cells (masked) instead of its own.

Workload: C clients [8] at once, each with its own prompt of about P tokens
[1500] (a support policy text, numbered per client so no two share a prefix
beyond the first words), streamed /v1/completions, greedy, ignore_eos, N
tokens [64]. Decode rate per request = (tokens - 1) / (last token - first
token); aggregate = all tokens after the first / (last end - first first
token). On and off alternate within each rep; ratio on/off per rep, mean ±
95% CI.

Usage: bench/kv_layout.py [--model M] [--clients 8] [--prompt-tokens 1500]
       [--max-tokens 64] [--reps 3] [--ctx 2048]
Writes bench/results/kv_layout-<host>-<date>.md.
"""
import argparse, datetime, http.client, json, os, platform, subprocess, sys, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from tg_vs_llama_bench import summary  # noqa: E402
from serve_vs_llama_server import SYSTEM, free_port, wait_ready, sse_events  # noqa: E402


def prompt_for(client, tokens):
    # ~4 characters a token for English under the Qwen2 tokenizer.
    text, i = f"Case {client}. ", 0
    while len(text) < tokens * 4:
        text += f"[{client}.{i}] " + SYSTEM + " "
        i += 1
    return text[: tokens * 4]


def stream(port, model, prompt, max_tokens, out):
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True, "stream": True})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]}")
    times = []
    for d in sse_events(r):
        ch = d.get("choices") or [{}]
        if ch[0].get("text"):
            times.append(time.perf_counter())
    out.append(times)


def run(a, unified):
    port = free_port()
    model_dir = os.path.dirname(os.path.abspath(a.model))
    name = os.path.splitext(os.path.basename(a.model))[0]
    cmd = [a.hone, "serve", "--models", model_dir, "--port", str(port), "--slots", str(a.clients), "--ctx", str(a.ctx),
           "--quiet", "true", "--cache-ram", "0", "--cache-disk", "0", "--kv-unified", "on" if unified else "off"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, p)
        stream(port, name, "Hello", 4, [])  # warm: load and first graph
        out = []
        threads = [threading.Thread(target=stream, args=(port, name, prompt_for(i, a.prompt_tokens), a.max_tokens, out))
                   for i in range(a.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        p.terminate()
        p.wait()
    per_request = [(len(t) - 1) / (t[-1] - t[0]) for t in out if len(t) > 1]
    # Aggregate over the stretch where every client had its first token.
    start, end = max(t[0] for t in out), min(t[-1] for t in out)
    during = sum(sum(1 for x in t if start < x <= end) for t in out)
    return {"per_request": sum(per_request) / len(per_request), "aggregate": during / (end - start) if end > start else 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "qwen2.5-0.5b.Q4_K_M.gguf"))
    ap.add_argument("--hone", default=os.path.join(ROOT, "build", "hone"))
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--prompt-tokens", type=int, default=1500)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    data = {True: [], False: []}
    for rep in range(a.reps):
        for unified in ([True, False] if rep % 2 == 0 else [False, True]):
            r = run(a, unified)
            data[unified].append(r)
            print(f"rep {rep} kv-unified {'on ' if unified else 'off'}: decode {r['per_request']:.1f} tok/s per request, "
                  f"{r['aggregate']:.1f} aggregate", file=sys.stderr)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    md = [f"# One KV stream vs one per slot, long contexts ({stamp})", "",
          f"Machine: {cpu}, {os.cpu_count()} CPUs; model {os.path.basename(a.model)}; {a.clients} clients at once, "
          f"~{a.prompt_tokens}-token prompts each, {a.max_tokens} tokens, greedy; --slots {a.clients} --ctx {a.ctx}; "
          f"{a.reps} reps, on and off alternating.",
          f"Command: `python3 bench/kv_layout.py {' '.join(sys.argv[1:])}`", "",
          "| measure | --kv-unified on | off | on / off (mean ± 95% CI) |", "|---|---|---|---|"]
    for key, label in (("per_request", "decode tok/s per request"), ("aggregate", "aggregate decode tok/s")):
        on, off = summary([r[key] for r in data[True]]), summary([r[key] for r in data[False]])
        ratio = summary([x[key] / y[key] for x, y in zip(data[True], data[False])])
        md.append(f"| {label} | {on['mean']:.1f} ± {on['ci95']:.1f} | {off['mean']:.1f} ± {off['ci95']:.1f} | "
                  f"{ratio['mean']:.3f} ± {ratio['ci95']:.3f} |")
    out = os.path.join(ROOT, "bench", "results", f"kv_layout-vm-{stamp}.md")
    with open(out, "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
