#!/usr/bin/env python3
"""Speculative decoding with n-gram drafts: hone serve --spec against hone
without it and against llama-server with the same --spec-type (the peer, same
pinned tree), same model, same slots, same prompts, one run (issue 28).

Model [../shared/models/tinystories-d256-l4-f32.gguf]: trained, so drafts can
be right. Prompts: TinyStories openings, a third of them copy-heavy (the
answer restates the prompt). Each request: /v1/completions, greedy, ignore_eos,
--max-tokens [200]. Clients: 1, 4 and 8 at once, each sending --per-client [4]
requests. Per server and level: completion tokens per second over the level's
wall time (all clients together), and for --spec servers the share of drafts
kept (hone: /metrics; llama-server: timings.draft_n / draft_n_accepted).
Repeated --reps [3] times with the servers started fresh in rotating order;
ratios to "hone, no spec" with 95% CIs over the reps.

Servers: hone (none), hone --spec ngram-simple --spec-ngram N, llama-server
(none), llama-server --spec-type ngram-simple --spec-ngram-simple-size-n N;
with --servers also hone-mod / llama-mod (ngram-mod), and hone-draft /
llama-draft: the draft model --draft [../shared/models/stories260K.gguf]
(same vocabulary) at most --draft-max [8] tokens per step (hone --spec
draft-simple --draft M --spec-max N; llama-server -md M --spec-type
draft-simple --spec-draft-n-max N).

--alive: every server started once and kept, short rounds alternating between
them (a long server life, where ngram-mod remembers answers; tighter ratios).

Usage: bench/spec_vs_llama_server.py [--model M] [--ngram 3] [--reps 3] [--levels 1,4,8] [--prompts mixed|copy] [--alive]
       [--max-tokens 200] [--per-client 4] [--draft M] [--draft-max 8]
       [--servers hone,hone-spec,llama,llama-spec,hone-mod,llama-mod,hone-draft,llama-draft]
Writes bench/results/spec-<host>-<date>.{md,json}.
"""
import argparse, datetime, http.client, json, os, platform, subprocess, sys, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from tg_vs_llama_bench import summary, peer_prefix  # noqa: E402
from serve_vs_llama_server import free_port, wait_ready  # noqa: E402

PROMPTS = [
    'Lily said, "I like the big red ball." Max said, "I like the big red ball." Tom said, "I like the big red ball." Ben said,',
    "Once upon a time, there was a little boy named Tim. Tim had a big red ball. He liked to play with his ball every day. One day,",
    "The sun was hot. The cat sat in the shade of the tree. The dog sat in the shade of the tree. The bird",
    "One day, a little girl named Sue went to the park with her mom. At the park, Sue saw a big slide.",
    "Tom had a toy car. The toy car was red. Tom said, \"My toy car is red.\" Anna had a toy car. The toy car was blue. Anna said,",
    "There was a big dog named Spot. Spot liked to run and jump. One day, Spot saw a cat in the garden.",
]
# Copy-heavy only (--prompts copy): the answer restates what the prompt holds,
# as a support answer restates order numbers and policy text.
COPY_PROMPTS = [PROMPTS[0], PROMPTS[2], PROMPTS[4],
    'Mom said, "Put the red block on the blue block." Tim put the red block on the blue block. Mom said, "Put the green block on the red block." Tim',
    "The little duck said, \"Quack, quack, I want to swim.\" The big duck said, \"Quack, quack, I want to swim.\" The baby duck said,",
    "Sam saw a bird. The bird was blue. Sam saw a frog. The frog was green. Sam saw a fish. The fish was",
]
SERVERS = {
    "hone": "hone, no spec", "hone-spec": "hone --spec ngram-simple",
    "llama": "llama-server, no spec", "llama-spec": "llama-server --spec-type ngram-simple",
    "hone-mod": "hone --spec ngram-mod", "llama-mod": "llama-server --spec-type ngram-mod",
    "hone-draft": "hone --spec draft-simple --draft", "llama-draft": "llama-server --spec-type draft-simple -md",
}


def label(kind):
    # "-split": hone with one KV stream per slot (--kv-unified off), llama.cpp's
    # layout with explicit -np, where a mixed step runs as several passes;
    # "-shared": one stream for all slots (--kv-unified on).
    for suffix, flag in (("-split", "off"), ("-shared", "on")):
        if kind.endswith(suffix):
            return SERVERS[kind[:-len(suffix)]] + " --kv-unified " + flag
    return SERVERS[kind]


def start(kind, a, peer_bin):
    port = free_port()
    model_dir = os.path.dirname(os.path.abspath(a.model))
    layout = None
    for suffix, flag in (("-split", "off"), ("-shared", "on")):
        if kind.endswith(suffix):
            layout, kind = flag, kind[:-len(suffix)]
    if kind.startswith("hone"):
        cmd = [a.hone, "serve", "--models", model_dir, "--port", str(port), "--slots", "8", "--threads", str(a.threads),
               "--quiet", "true", "--cache-ram", "0", "--cache-disk", "0"]
        if layout:
            cmd += ["--kv-unified", layout]
        if kind == "hone-spec":
            cmd += ["--spec", "ngram-simple", "--spec-ngram", str(a.ngram)]
        elif kind == "hone-mod":
            cmd += ["--spec", "ngram-mod"]
        elif kind == "hone-draft":
            cmd += ["--spec", "draft-simple", "--draft", a.draft, "--spec-max", str(a.draft_max)]
    else:
        cmd = [os.path.join(peer_bin, "llama-server"), "-m", a.model, "--port", str(port), "-np", "8",
               "-c", str(8 * 1024), "-t", str(a.threads)]
        if kind == "llama-spec":
            cmd += ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", str(a.ngram)]
        elif kind == "llama-mod":
            cmd += ["--spec-type", "ngram-mod"]
        elif kind == "llama-draft":
            cmd += ["-md", a.draft, "--spec-type", "draft-simple", "--spec-draft-n-max", str(a.draft_max)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port, p)
    return p, port


def one(port, model, prompt, max_tokens):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True, "n_predict": max_tokens})
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = json.loads(c.getresponse().read())
    t = r.get("timings") or {}
    return r["usage"]["completion_tokens"], t.get("draft_n", 0), t.get("draft_n_accepted", 0)


def spec_counts(port, model):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    got = {}
    for name in ("hone_spec_draft_tokens_total", "hone_spec_accepted_tokens_total"):
        for line in text.splitlines():
            if line.startswith(name + '{model_name="' + model + '"}'):
                got[name] = float(line.split()[-1])
    return got.get("hone_spec_draft_tokens_total", 0), got.get("hone_spec_accepted_tokens_total", 0)


def level(port, model, clients, a):
    out = {"tokens": 0, "drafted": 0, "kept": 0}
    lock = threading.Lock()

    def client(i):
        for k in range(a.per_client):
            prompts = COPY_PROMPTS if a.prompts == "copy" else PROMPTS
            n, d, kept = one(port, model, prompts[(i + k) % len(prompts)], a.max_tokens)
            with lock:
                out["tokens"] += n
                out["drafted"] += d
                out["kept"] += kept

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out["seconds"] = time.perf_counter() - t0
    out["tps"] = out["tokens"] / out["seconds"]
    return out


def measure(a, model, kind, port, lv, rep, data):
    hone_spec = kind.startswith("hone-") and kind not in ("hone-split", "hone-shared")
    before = spec_counts(port, model) if hone_spec else (0, 0)
    r = level(port, model, lv, a)
    if hone_spec:
        after = spec_counts(port, model)
        r["drafted"], r["kept"] = after[0] - before[0], after[1] - before[1]
    data[kind][lv].append(r)
    print(f"rep {rep} {kind:10s} {lv} clients: {r['tps']:.0f} tok/s, drafts kept "
          f"{r['kept']:.0f}/{r['drafted']:.0f}", file=sys.stderr)


def run_alive(a, model, kinds, levels, peer_bin, data):
    """Every server started once and kept: each rep runs one short round per
    server back to back (the order rotating), so the drift of a shared
    machine falls alike on the rounds a ratio pairs, and hone's adaptation
    runs over one long server life, as in production."""
    servers = {}
    try:
        for kind in kinds:
            servers[kind] = start(kind, a, peer_bin)
            one(servers[kind][1], model, PROMPTS[0], 8)  # warm
        for rep in range(a.reps):
            for lv in levels:
                order = kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]
                for kind in order:
                    measure(a, model, kind, servers[kind][1], lv, rep, data)
    finally:
        for p, _ in servers.values():
            p.terminate()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "..", "shared", "models", "tinystories-d256-l4-f32.gguf"))
    ap.add_argument("--hone", default=os.path.join(ROOT, "build", "hone"))
    ap.add_argument("--ngram", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--levels", default="1,4,8")
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--per-client", type=int, default=4)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--servers", default="hone,hone-spec,llama,llama-spec")
    ap.add_argument("--draft", default=os.path.join(ROOT, "..", "shared", "models", "stories260K.gguf"))
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--prompts", choices=("mixed", "copy"), default="mixed",
                    help="mixed: TinyStories openings, a third copy-heavy; copy: copy-heavy only")
    ap.add_argument("--alive", action="store_true",
                    help="start every server once and alternate short rounds between them (tighter ratios "
                         "on a noisy machine; one long server life)")
    a = ap.parse_args()
    a.model = os.path.abspath(a.model)
    a.draft = os.path.abspath(a.draft)
    model = os.path.splitext(os.path.basename(a.model))[0]
    kinds = a.servers.split(",")
    peer_bin = os.environ.get("HONE_PEER_BIN_DIR") or os.path.join(peer_prefix(), "bin")
    levels = [int(x) for x in a.levels.split(",")]
    data = {k: {lv: [] for lv in levels} for k in kinds}
    if a.alive:
        run_alive(a, model, kinds, levels, peer_bin, data)
    else:
        for rep in range(a.reps):
            order = kinds[rep % len(kinds):] + kinds[:rep % len(kinds)]
            for kind in order:
                p, port = start(kind, a, peer_bin)
                try:
                    one(port, model, PROMPTS[0], 8)  # warm
                    for lv in levels:
                        measure(a, model, kind, port, lv, rep, data)
                finally:
                    p.terminate()
                    p.wait()
    write(a, model, kinds, levels, data)


def write(a, model, kinds, levels, data):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
    md = [f"# Speculative decoding: hone vs llama-server ({stamp})", "",
          f"Machine: {cpu}, {os.cpu_count()} CPUs; model {os.path.basename(a.model)}; greedy, ignore_eos, "
          f"{a.max_tokens} tokens per request, {a.per_client} requests per client; n-gram {a.ngram}; {a.reps} reps; "
          f"prompts: {a.prompts}; "
          f"{'servers kept alive, rounds alternating' if a.alive else 'a fresh server per rep'}.",
          f"Command: `python3 bench/spec_vs_llama_server.py {' '.join(sys.argv[1:])}`", "",
          "| server | clients | tok/s (mean ± 95% CI) | ratio to hone, no spec | drafts kept |", "|---|---|---|---|---|"]
    for kind in kinds:
        for lv in levels:
            runs = data[kind][lv]
            s = summary([r["tps"] for r in runs])
            ratio = ""
            if "hone" in data and kind != "hone":
                rs = summary([r["tps"] / b["tps"] for r, b in zip(runs, data["hone"][lv])])
                ratio = f"{rs['mean']:.3f} ± {rs['ci95']:.3f}"
            drafted = sum(r["drafted"] for r in runs)
            kept = f"{100 * sum(r['kept'] for r in runs) / drafted:.0f}% of {drafted:.0f}" if drafted else "-"
            md.append(f"| {label(kind)} | {lv} | {s['mean']:.0f} ± {s['ci95']:.0f} | {ratio} | {kept} |")
    out = os.path.join(ROOT, "bench", "results", f"spec-vm-{stamp}")
    with open(out + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    with open(out + ".json", "w") as f:
        json.dump({k: {str(lv): v for lv, v in d.items()} for k, d in data.items()}, f, indent=1)
    print("\n".join(md))
    print(f"written to {out}.md", file=sys.stderr)


if __name__ == "__main__":
    main()
