#!/usr/bin/env python3
"""Soak test of `hone serve`: mixed hostile and normal load for a long time.

One hone serve on loopback with two small real models (the synthetic Qwen2
`tiny`, with a chat template, and the trained `stories260K`), --keep-alive
10s. The run cycles through 2-minute phases (tiny only, stories260K only,
both), so the idle model expires, unloads and loads again at each switch.
Client threads send, for --minutes (default 30):
  - streaming chat, read to the end (both models, so they switch);
  - streaming chat abandoned after the first chunks (a disconnect mid-stream);
  - embeddings;
  - an oversized body (413), malformed JSON (400), an unknown model (404),
    a half-sent request left to time out.
Every request must end in a status the client expects (or be one the client
abandoned on purpose); anything else (a reset, a timeout, a 500, a stream
cut without its end) is "lost".

Every 5 s it samples the server's RSS (/proc/PID/status) and the gauges
(hone_num_requests_running, hone_num_requests_waiting,
hone_kv_cache_usage_perc, hone_prompt_cache_ram_bytes and _disk_bytes). The
prompt cache (--cache-ram 128M for all models, --cache-disk 96M per model here)
keeps what slots give up on purpose, up to its budgets: the leak checks use RSS
net of its RAM tier, the RAM tier must stay within its budget, and the disk
tier must fill (>= 80% of its bound) and stay within it. When the load stops, running and waiting must
return to 0 (no slot or sequence leaks). RSS slope: least squares over the
second half of the run (after warm-up), in MB per hour.

Writes bench/results/soak-vm-<date>.md. Exit status 1 if anything was lost,
the gauges did not return to 0, the second half's RSS peak passed the first
half's by more than 25% + 32 MB, a cache tier passed its budget, the disk
tier never filled, or the server died.

Usage: bench/soak.py [--minutes 30] [--clients 6] [--hone build/hone]
"""
import argparse
import datetime
import http.client
import json
import os
import platform
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ap = argparse.ArgumentParser()
ap.add_argument("--minutes", type=float, default=30)
ap.add_argument("--clients", type=int, default=6)
ap.add_argument("--hone", default=os.path.join(ROOT, "build/hone"))
ap.add_argument("--shared", default=os.path.join(os.path.dirname(ROOT), "shared"))
args = ap.parse_args()

work = tempfile.mkdtemp(prefix="hone-soak-")
models = os.path.join(work, "models")
os.makedirs(models)
subprocess.run([args.hone, "synth", "--like", "tiny", "--out", os.path.join(models, "tiny.gguf")], check=True,
               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.symlink(os.path.join(args.shared, "models", "stories260K.gguf"), os.path.join(models, "stories260K.gguf"))

CACHE_RAM_MB = 128
# --cache-disk is a bound per model folder: small, so the disk tier fills
# within the run and the soak runs with it full (issue 26).
CACHE_DISK_MB = 96
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
log = open(os.path.join(work, "server.log"), "w")
server = subprocess.Popen([args.hone, "serve", "--models", models, "--port", str(port), "--threads", "2",
                           "--slots", "2", "--ctx", "1024", "--max-queue", "8", "--max-body", "64K",
                           "--keep-alive", "10s", "--read-timeout", "3",
                           # The prompt cache holds what slots give up, up to its
                           # budget: a small one fills within the run, so the
                           # leak check below (RSS net of the cache) sees it full.
                           "--cache-ram", f"{CACHE_RAM_MB}M", "--cache-disk", f"{CACHE_DISK_MB}M",
                           "--cache-dir", os.path.join(work, "prompt-cache"),
                           "--quiet", "true"], stdout=log, stderr=log)


def conn(timeout=120):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)


for _ in range(300):
    try:
        c = conn(2)
        c.request("GET", "/livez")
        if c.getresponse().status == 200:
            break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("hone serve did not start")

counts = {}
lost = []
lock = threading.Lock()


def note(kind, ok, detail=""):
    with lock:
        c = counts.setdefault(kind, [0, 0])
        c[0 if ok else 1] += 1
        if not ok and len(lost) < 50:
            lost.append(f"{kind}: {detail}")


def post(path, body, content_type="application/json"):
    c = conn()
    c.request("POST", path, body=body, headers={"Content-Type": content_type})
    return c, c.getresponse()


QUESTIONS = ["Where is my order?", "我的订单在哪里？", "Can I return shoes after 30 days?", "Hello!"]


def chat(model, abandon):
    body = json.dumps({"model": model, "stream": True, "max_tokens": 48, "temperature": 0.8,
                       "messages": [{"role": "system", "content": "You are a support assistant."},
                                    {"role": "user", "content": random.choice(QUESTIONS)}]})
    kind = "chat-abandoned" if abandon else "chat-stream"
    try:
        c, r = post("/v1/chat/completions", body)
        if r.status == 429:  # the queue is full: refused with Retry-After, as promised
            note(kind, r.getheader("Retry-After") is not None, "429 without Retry-After")
            return
        if r.status != 200:
            note(kind, False, f"status {r.status}: {r.read()[:200]!r}")
            return
        if abandon:
            r.read(200)  # a few chunks, then the client goes away
            c.sock.shutdown(socket.SHUT_RDWR)
            c.close()
            note(kind, True)
            return
        text = r.read().decode()
        note(kind, "data: [DONE]" in text, "stream ended without [DONE]: " + text[-200:])
    except Exception as e:  # noqa: BLE001 - any failure is what this counts
        note(kind, False, repr(e))


def embed():
    try:
        _, r = post("/v1/embeddings", json.dumps({"model": "stories260K", "input": ["a happy dog", "一只快乐的狗"]}))
        data = r.read()
        ok = r.status == 200 and len(json.loads(data)["data"]) == 2
        ok = ok or r.status in (429, 503) and r.getheader("Retry-After") is not None
        note("embeddings", ok, f"status {r.status}: {data[:200]!r}")
    except Exception as e:  # noqa: BLE001
        note("embeddings", False, repr(e))


def hostile():
    what = random.choice(["oversized", "malformed", "unknown", "half"])
    try:
        if what == "oversized":
            _, r = post("/v1/chat/completions", json.dumps({"model": "tiny", "messages": [
                {"role": "user", "content": "x" * 100_000}]}))
            r.read()
            note(what, r.status == 413, f"status {r.status}")
        elif what == "malformed":
            _, r = post("/v1/chat/completions", '{"model": "tiny", "messages": [')
            r.read()
            note(what, r.status == 400, f"status {r.status}")
        elif what == "unknown":
            _, r = post("/v1/chat/completions", json.dumps({"model": "no-such-model", "messages": [
                {"role": "user", "content": "hi"}]}))
            r.read()
            note(what, r.status == 404, f"status {r.status}")
        else:  # half a request, then silence: the server must drop it
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{")
            t0 = time.time()
            try:
                s.recv(4096)  # a 400/408 or the close itself
            except OSError:
                pass
            s.close()
            note(what, time.time() - t0 < 20, f"held {time.time() - t0:.0f} s")
    except Exception as e:  # noqa: BLE001
        note(what, False, repr(e))


deadline = time.time() + args.minutes * 60
stop = threading.Event()


def client(i):
    rng = random.Random(i)
    while time.time() < deadline and not stop.is_set():
        x = rng.random()
        phase = int((time.time() - t_start) / 120) % 3  # tiny only, stories260K only, both
        model = ["tiny", "stories260K", rng.choice(["tiny", "stories260K"])][phase]
        if x < 0.55:
            chat(model, abandon=False)
        elif x < 0.75:
            chat(model, abandon=True)
        elif x < 0.87:
            embed()
        else:
            hostile()


def gauges():
    c = conn(10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    out = {}
    for name in ("hone_num_requests_running", "hone_num_requests_waiting", "hone_kv_cache_usage_perc",
                 "hone_prompt_cache_ram_bytes"):
        out[name] = sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))
    # --cache-ram is one budget for all models (the sum above is what it
    # bounds); --cache-disk bounds each model's folder, so the largest counts.
    out["prompt_cache_disk_bytes_max_model"] = max(
        [float(v) for v in re.findall(r"^hone_prompt_cache_disk_bytes\{[^}]*\} (\S+)$", text, re.M)] or [0.0])
    return out


def cache_mb(g):
    return g.get("hone_prompt_cache_ram_bytes", 0) / 2**20


def rss_mb():
    with open(f"/proc/{server.pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024


samples = []
threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(args.clients)]
t_start = time.time()
for t in threads:
    t.start()
while time.time() < deadline and server.poll() is None:
    try:
        samples.append((time.time() - t_start, rss_mb(), gauges()))
    except Exception as e:  # noqa: BLE001
        note("sampler", False, repr(e))
    time.sleep(5)
stop.set()
for t in threads:
    t.join(timeout=180)
alive = server.poll() is None

# After the load: the gauges must come back to 0.
settled = None
for _ in range(60):
    if not alive:
        break
    g = gauges()
    if g["hone_num_requests_running"] == 0 and g["hone_num_requests_waiting"] == 0:
        settled = g
        break
    time.sleep(1)
final_rss = rss_mb() if alive else float("nan")
server.terminate()
try:
    server.wait(timeout=60)
except subprocess.TimeoutExpired:
    server.kill()

# The prompt cache's RAM tier is memory hone keeps on purpose, up to its
# budget: the leak check looks at RSS net of it.
net = [(t, r - cache_mb(g), g) for t, r, g in samples]
cache_peak = max((cache_mb(g) for _, _, g in samples), default=0.0)
cache_bounded = cache_peak <= CACHE_RAM_MB * 1.05
disk_peak = max((g.get("prompt_cache_disk_bytes_max_model", 0) / 2**20 for _, _, g in samples), default=0.0)
disk_bounded = disk_peak <= CACHE_DISK_MB * 1.05
# Full: within an entry or two of its bound (entries here are a few MB).
disk_full = disk_peak >= CACHE_DISK_MB * 0.8
raw_samples, samples = samples, net
half = [(t, r) for t, r, _ in samples if t >= args.minutes * 30]
slope = float("nan")
if len(half) >= 3:
    n = len(half)
    mt = sum(t for t, _ in half) / n
    mr = sum(r for _, r in half) / n
    var = sum((t - mt) ** 2 for t, _ in half)
    slope = sum((t - mt) * (r - mr) for t, r in half) / var * 3600 if var else float("nan")
# Models load and unload all run long, so RSS is a sawtooth: its peaks, half
# against half, say more than the slope.
first_peak = max((r for t, r, _ in samples if t < args.minutes * 30), default=float("nan"))
second_peak = max((r for t, r, _ in samples if t >= args.minutes * 30), default=float("nan"))
total = sum(a + b for a, b in counts.values())
lost_n = sum(b for _, b in counts.values())
peak = {k: max(s[2][k] for s in samples) for k in samples[0][2]} if samples else {}
# Flat: the second half's peak within 25% (plus 32 MB of noise) of the first's.
rss_flat = not (second_peak > first_peak * 1.25 + 32)
ok = alive and lost_n == 0 and settled is not None and rss_flat and cache_bounded and disk_bounded and disk_full

cpu = platform.processor() or open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].split("\n")[0].strip()
stamp = datetime.datetime.utcnow().strftime("%Y%m%d-%H%M")
md = [f"# Soak: {args.minutes:g} minutes of mixed load on hone serve ({stamp})", "",
      f"Machine: {cpu}, {os.cpu_count()} CPUs. Command: `bench/soak.py {' '.join(sys.argv[1:])}`. "
      f"Models tiny (synthetic Qwen2 shape) and stories260K in 2-minute phases (one, the other, both; "
      f"--keep-alive 10s, so each switch unloads and reloads), 2 slots, --max-queue 8, "
      f"{args.clients} client threads.", "",
      f"**Result: {'pass' if ok else 'FAIL'}**: server {'alive' if alive else 'DIED'}; "
      f"{total} requests, {lost_n} lost; gauges after the load: "
      f"{'running 0, waiting 0' if settled else 'did not return to 0'}; "
      f"RSS {raw_samples[0][1] if raw_samples else float('nan'):.0f} MB at start, {final_rss:.0f} MB at the end; "
      f"the prompt cache's RAM tier (all models) peaked at {cache_peak:.0f} MB of its {CACHE_RAM_MB} MB "
      f"({'bounded' if cache_bounded else 'PAST ITS BUDGET'}); its disk tier (largest model folder) at "
      f"{disk_peak:.0f} MB of {CACHE_DISK_MB} MB "
      f"({'full and bounded' if disk_full and disk_bounded else 'PAST ITS BUDGET' if not disk_bounded else 'NEVER FILLED'}); "
      f"RSS net of the RAM tier: "
      f"slope over the second half {slope:+.1f} MB/hour ({len(half)} samples), "
      f"peak {first_peak:.0f} MB in the first half, {second_peak:.0f} MB in the second "
      f"({'flat' if rss_flat else 'GROWING'}).", "",
      "| kind | ok | lost |", "|---|---|---|"]
md += [f"| {k} | {a} | {b} |" for k, (a, b) in sorted(counts.items())]
md += ["", f"Peak gauges: {json.dumps(peak)}", ""]
if lost:
    md += ["First lost requests:", ""] + [f"- {x}" for x in lost] + [""]
rss_points = raw_samples[:: max(1, len(raw_samples) // 12)]
md += ["RSS over time (MB; in brackets: the prompt cache's RAM tier): " +
       ", ".join(f"{t / 60:.0f} min {r:.0f} [{cache_mb(g):.0f}]" for t, r, g in rss_points), ""]
out = os.path.join(ROOT, "bench/results", f"soak-vm-{stamp}.md")
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    f.write("\n".join(md))
print("\n".join(md))
print(f"written to {out}", file=sys.stderr)
shutil.rmtree(work, ignore_errors=True)
sys.exit(0 if ok else 1)
