#!/usr/bin/env python3
"""Returning conversations, more of them than slots: `hone serve` against the
peer `llama-server` (same pinned llama.cpp), same model, same slot count, same
run (issue 26).

Workload: C conversations [12] over S slots [2], T turns each [4]. Every turn
re-sends the whole history: the ~300-token support system prompt of
serve_vs_llama_server.py, then per turn a user question ("Customer #<n>: ...",
so conversations differ from their first user turn on) and the assistant's
actual streamed answer; max_tokens [16], temperature 0, streamed OpenAI chat
with include_usage. Think time uniform in [think-min, think-max] s [2, 6]
between a conversation's turns (scaled down from the real 20-75 s); first turns
spread over [0, think-max]. K clients [= C, one per conversation].

Per server: TTFT (request sent -> first content delta) p50/p99 of first and of
returning turns (turn >= 2), the mean cached share of returning prompts
(usage.prompt_tokens_details.cached_tokens / prompt_tokens), peak VmRSS
(sampled every 0.5 s). Ratios hone / llama-server of the returning-turn p50 and
p99, mean +- 95% CI over reps. Restart phase (hone only): SIGTERM, start again
on the same --state-dir, every conversation's next turn once; its TTFT p50/p99
against the hot returning-turn p50.

Usage: bench/multiturn_cache.py [-C 12] [-S 2] [-T 4] [--reps 3] [--servers hone,llama]
       [--hone-args "--cache-ram 2G --cache-disk 4G"] [--model M] [--max-seconds 900]
Writes bench/results/multiturn_cache-<host>-<date>.{md,json} and prints the table.
"""
import argparse, datetime, heapq, http.client, json, os, platform, random, shlex, shutil, signal, socket
import statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from tg_vs_llama_bench import summary, peer_prefix, ensure_default_model  # noqa: E402
from serve_vs_llama_server import SYSTEM, QUESTIONS, NO_JINJA, free_port, wait_ready, pct, rss_mb, sse_events  # noqa: E402

NAMES = {"hone": "hone serve", "llama": "llama-server"}


class Deadline:
    """The global --max-seconds bound: every wait and every loop asks it."""
    def __init__(self, seconds): self.end = time.monotonic() + seconds  # noqa: E704
    def left(self): return self.end - time.monotonic()  # noqa: E704
    def passed(self): return self.left() <= 0  # noqa: E704


# ---------------------------------------------------------------- one turn

def usage_counts(last):
    """(prompt_tokens, cached_tokens, source) from the final chunks' usage, else
    llama-server's timings (cache_n = tokens reused, prompt_n = tokens prefilled)."""
    u, t = last.get("usage") or {}, last.get("timings") or {}
    details = u.get("prompt_tokens_details") or {}
    if "prompt_tokens" in u and "cached_tokens" in details:
        return u["prompt_tokens"], details["cached_tokens"], "usage"
    if "cache_n" in t:
        return t.get("cache_n", 0) + t.get("prompt_n", 0), t["cache_n"], "timings"
    return u.get("prompt_tokens"), None, "none"


def stream_turn(port, model, messages, max_tokens, deadline):
    """One streamed chat request. Returns TTFT (to the first content delta),
    the answer text, token counts and any error event."""
    body = json.dumps({"model": model, "messages": messages, "stream": True, "max_tokens": max_tokens,
                       "stream_options": {"include_usage": True}, "temperature": 0, "ignore_eos": True})
    # The socket timeout bounds each read; the deadline check bounds the stream.
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=max(1.0, min(600.0, deadline.left())))
    t0 = time.perf_counter()
    ttft, parts, last, error = None, [], {}, None
    try:
        c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return {"error": f"HTTP {r.status}: {r.read()[:200]!r}", "ttft": None}
        for d in sse_events(r, deadline.passed):
            error = d.get("error") or error
            for k in ("usage", "timings"):  # usage comes on the last chunk, choices empty
                if d.get(k):
                    last[k] = d[k]
            delta = (d.get("choices") or [{}])[0].get("delta") or {}
            if delta.get("content"):
                ttft = ttft if ttft is not None else time.perf_counter() - t0
                parts.append(delta["content"])
    except (OSError, http.client.HTTPException, ValueError) as e:
        error = f"{type(e).__name__}: {e}"
    finally:
        c.close()
    prompt, cached, source = usage_counts(last)
    return {"ttft": ttft, "text": "".join(parts), "prompt_tokens": prompt, "cached_tokens": cached,
            "completion_tokens": (last.get("usage") or {}).get("completion_tokens"), "count_source": source,
            "error": str(error) if error else None}


# ------------------------------------------------------ conversations driver

def new_conversations(n):
    return [{"id": i, "messages": [{"role": "system", "content": SYSTEM}], "turns": 0} for i in range(n)]


def user_turn(conv):
    q = QUESTIONS[(conv["id"] + conv["turns"]) % len(QUESTIONS)]
    return {"role": "user", "content": f"Customer #{conv['id'] + 1}: {q}"}


def drive(port, model, convs, turns, a, seed, deadline, first_delay):
    """Sends `turns` more turns of every conversation with K client threads.

    A heap orders conversations by the time their next turn is due (think time
    after the previous answer); a free client takes the earliest. Think times
    come from a per-conversation RNG seeded by the rep, so both servers see the
    same schedule. Returns one record per turn sent."""
    rngs = {c["id"]: random.Random(seed * 1000 + c["id"]) for c in convs}
    t0 = time.monotonic()
    heap = [(t0 + first_delay(rngs[c["id"]]), c["id"]) for c in convs]
    heapq.heapify(heap)
    left = {c["id"]: turns for c in convs}
    by_id = {c["id"]: c for c in convs}
    records, lock = [], threading.Lock()

    def client():
        while not deadline.passed():
            with lock:
                if not heap:
                    return  # the conversations in flight come back to their own client
                due, cid = heapq.heappop(heap)
            time.sleep(max(0.0, min(due - time.monotonic(), deadline.left())))
            if deadline.passed():
                return
            rec = send_turn(port, model, by_id[cid], a.max_tokens, deadline)
            with lock:
                records.append(rec)
                left[cid] -= 1
                if left[cid] > 0:
                    heapq.heappush(heap, (time.monotonic() + rngs[cid].uniform(a.think_min, a.think_max), cid))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(a.clients or len(convs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline.left()) + 5)
    with lock:
        return list(records)


def send_turn(port, model, conv, max_tokens, deadline):
    """Appends the user turn, streams the answer, appends the answer as sent."""
    conv["messages"].append(user_turn(conv))
    conv["turns"] += 1
    r = stream_turn(port, model, conv["messages"], max_tokens, deadline)
    # The answer goes back into the history exactly as streamed (what a client
    # would re-send); an empty or failed answer still keeps the roles alternating.
    conv["messages"].append({"role": "assistant", "content": r.get("text") or ""})
    r.pop("text", None)
    return dict(r, conv=conv["id"], turn=conv["turns"], t=time.time())


# ------------------------------------------------------------------ servers

class Server:
    """A server process with its log, a health wait, and an RSS sampler."""

    def __init__(self, name, cmd, port, deadline):
        self.name, self.cmd, self.port, self.deadline = name, cmd, port, deadline
        self.proc, self.peak_mb, self._stop = None, 0.0, threading.Event()

    def start(self):
        self.log_path = os.path.join(tempfile.gettempdir(), f"multiturn_cache_{self.port}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self._stop = threading.Event()  # one per process: an old sampler never reads the new one
        threading.Thread(target=self._sample, args=(self.proc, self._stop), daemon=True).start()
        try:
            self.ready_s = wait_ready(self.port, self.proc, timeout=max(1.0, min(300.0, self.deadline.left())))
        except RuntimeError as e:
            raise RuntimeError(f"{self.name}: {e}; command: {shlex.join(self.cmd)}\n{self.log_tail()}") from None
        return self

    def _sample(self, proc, stop):
        # Peak VmRSS, sampled every 0.5 s until stop() or the process exits.
        while not stop.is_set() and proc.poll() is None:
            try:
                self.peak_mb = max(self.peak_mb, rss_mb(proc.pid))
            except (OSError, ValueError):
                break
            stop.wait(0.5)

    def stop(self, grace=60):
        """SIGTERM, wait for the exit (hone drains first), SIGKILL after grace."""
        self._stop.set()
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        if self.proc:
            self.log.close()

    def log_tail(self, n=15):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


def server_cmd(kind, a, port, state_dir):
    if kind == "hone":
        return [a.hone, "serve", "-m", a.model, "--port", str(port), "--slots", str(a.slots), "--ctx", str(a.ctx),
                "--threads", str(a.threads), "--quiet", "true", "--state-dir", state_dir, *shlex.split(a.hone_args)]
    # llama-server: the same slots and total context, its defaults otherwise;
    # --no-jinja as in serve_vs_llama_server.py (its Jinja path rejects many of
    # the random-weight model's answers mid-stream), -a so the model name matches.
    return [os.path.join(a.peer_bin, "llama-server"), "-m", a.model, "--port", str(port), "-t", str(a.threads),
            "-np", str(a.slots), "-c", str(a.slots * a.ctx), "-a", a.name, *NO_JINJA]


def warm(srv, a, deadline):
    # Loads weights and builds graphs before timing, with a prompt that shares
    # nothing with the conversations, so it seeds no cache the workload uses.
    stream_turn(srv.port, a.name, [{"role": "user", "content": "Hello"}], 4, deadline)


# ------------------------------------------------------------- one repetition

def run_server(kind, a, rep, deadline):
    """Main phase (and the restart phase for hone) on a fresh server."""
    state_dir = tempfile.mkdtemp(prefix=f"multiturn-cache-{kind}-")
    port = free_port()
    srv = Server(NAMES[kind], server_cmd(kind, a, port, state_dir), port, deadline)
    out = {"rep": rep, "server": NAMES[kind]}
    convs = new_conversations(a.conversations)
    try:
        srv.start()
        warm(srv, a, deadline)
        out["turns"] = drive(port, a.name, convs, a.turns, a, rep, deadline, lambda r: r.uniform(0, a.think_max))
        out["peak_rss_mb"] = srv.peak_mb
        if kind == "hone":
            out["rss_bound_mb"] = rss_bound_mb(port, a)
        if kind == "hone" and not deadline.passed():
            try:  # a restart that fails is a finding to report, not a reason to lose the rep
                out["restart"] = restart_phase(srv, a, convs, rep, deadline)
            except RuntimeError as e:
                out["restart_error"] = str(e)
                print(f"rep {rep} hone restart failed: {e}", file=sys.stderr)
    finally:
        srv.stop()
        shutil.rmtree(state_dir, ignore_errors=True)
    return out


def rss_bound_mb(port, a):
    """Issue 26's RSS bound, 1.1 x (model file + the slots' KV + --cache-ram),
    from what hone reports: /hone/cache gives the RAM limit and the entries'
    bytes per token (a token's KV, as a state copy holds it); NaN without entries."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/hone/cache")
        body = json.loads(conn.getresponse().read())
        conn.close()
        m = next(x for x in body["data"] if x["model"] == a.name)
        per_token = max(e["bytes"] / e["tokens"] for e in m["entries"] if e["tokens"] > 0)
    except (OSError, ValueError, KeyError, StopIteration, http.client.HTTPException):
        return float("nan")
    kv = a.slots * a.ctx * per_token
    return 1.1 * (os.path.getsize(a.model) + kv + m["ram_limit_bytes"]) / 2**20


def restart_phase(srv, a, convs, rep, deadline):
    """SIGTERM hone, start it on the same state dir, one more turn each."""
    srv.stop()
    t0 = time.monotonic()
    srv.port = free_port()
    srv.cmd[srv.cmd.index("--port") + 1] = str(srv.port)
    srv.peak_mb = 0.0
    srv.start()
    ready_s = time.monotonic() - t0
    warm(srv, a, deadline)
    # Each conversation comes back after one think time, as if the restart
    # had happened while its customer was typing.
    turns = drive(srv.port, a.name, convs, 1, a, rep + 7919, deadline, lambda r: r.uniform(a.think_min, a.think_max))
    return {"turns": turns, "restart_to_ready_s": ready_s, "peak_rss_mb": srv.peak_mb}


# ---------------------------------------------------------------- statistics

def ttfts(turns, returning):
    return [r["ttft"] for r in turns if r["ttft"] is not None and (r["turn"] >= 2) == returning]


def cached_share(turns):
    return mean_or_nan([r["cached_tokens"] / r["prompt_tokens"] for r in turns
                        if r.get("cached_tokens") is not None and r.get("prompt_tokens")])


def reachable(turns):
    """Per returning turn, the share a cache holding the whole previous turn
    (its prompt and answer) could give: the new user turn is never cached, so
    short histories cap the cached share below 100%."""
    by = {(r["conv"], r["turn"]): r for r in turns}
    xs = []
    for r in turns:
        p = by.get((r["conv"], r["turn"] - 1))
        if p and p.get("prompt_tokens") and p.get("completion_tokens") is not None and r.get("prompt_tokens"):
            xs.append(min(1.0, (p["prompt_tokens"] + p["completion_tokens"]) / r["prompt_tokens"]))
    return xs


def mean_or_nan(xs):
    xs = [x for x in xs if x == x]  # NaN: a rep cut short
    return statistics.mean(xs) if xs else float("nan")


def max_or_nan(xs):
    xs = [x for x in xs if x == x]
    return max(xs) if xs else float("nan")


def phase_stats(turn_lists):
    """TTFT percentiles and cached shares pooled over some reps' turns."""
    t = [r for ts in turn_lists for r in ts]
    ret = [r for r in t if r["turn"] >= 2]
    return {"first_p50": pct(ttfts(t, False), .5), "first_p99": pct(ttfts(t, False), .99),
            "ret_p50": pct(ttfts(t, True), .5), "ret_p99": pct(ttfts(t, True), .99),
            "ret_cached_share": cached_share(ret),
            "ret_reachable_share": mean_or_nan([x for ts in turn_lists for x in reachable(ts)]),
            "ret_prompt_tokens": mean_or_nan([r["prompt_tokens"] for r in ret if r.get("prompt_tokens")]),
            "turns": len(t), "errors": sum(1 for r in t if r["error"]),
            "no_content": sum(1 for r in t if r["ttft"] is None),
            "count_sources": sorted({r["count_source"] for r in t})}


def server_stats(runs):
    """One server's numbers over some reps (one rep: that rep's numbers)."""
    s = phase_stats([r.get("turns", []) for r in runs])
    s["peak_rss_mb"] = max_or_nan([r.get("peak_rss_mb", float("nan")) for r in runs])
    # Peak RSS (the restart's too) over the bound: issue 26 asks for <= 1.
    s["rss_over_bound"] = max_or_nan([max(r.get("peak_rss_mb", 0), r.get("restart", {}).get("peak_rss_mb", 0))
                                      / r["rss_bound_mb"] for r in runs if r.get("rss_bound_mb", 0) > 0])
    restarts = [r["restart"] for r in runs if "restart" in r]
    if restarts:
        p = phase_stats([x["turns"] for x in restarts])
        s.update(restart_p50=p["ret_p50"], restart_p99=p["ret_p99"], restart_cached_share=p["ret_cached_share"],
                 restart_turns=p["turns"], restart_errors=p["errors"],
                 restart_to_ready_s=max_or_nan([x["restart_to_ready_s"] for x in restarts]),
                 restart_peak_rss_mb=max_or_nan([x["peak_rss_mb"] for x in restarts]))
    return s


def ratio_summary(xs):
    xs = [x for x in xs if x == x]  # drop NaN (a rep cut short)
    return summary(xs) if xs else None


def aggregate(runs_by_server):
    """Pooled rows per server, and per-rep ratios with their 95% CI."""
    rows = {name: dict(server_stats(runs), reps=len(runs), per_rep=[server_stats([r]) for r in runs])
            for name, runs in runs_by_server.items()}
    ratios, h, l = {}, rows.get(NAMES["hone"]), rows.get(NAMES["llama"])
    if h and l:  # paired: the same rep's schedule, adjacent in time
        for k in ("ret_p50", "ret_p99", "first_p50"):
            ratios[k] = ratio_summary([x[k] / y[k] for x, y in zip(h["per_rep"], l["per_rep"])])
    hs = [s for s in h["per_rep"] if "restart_p50" in s] if h else []
    if hs:
        ratios["restart_p50_over_hot_p50"] = ratio_summary([s["restart_p50"] / s["ret_p50"] for s in hs])
        ratios["restart_p99_over_hot_p99"] = ratio_summary([s["restart_p99"] / s["ret_p99"] for s in hs])
    return rows, ratios


# ------------------------------------------------------------------- output

def ms(x):
    return "n/a" if x != x else f"{1000 * x:.0f}"


def fmt_ratio(s):
    if not s:
        return "n/a"
    return f"**{s['mean']:.2f}** ± {s['ci95']:.2f} (n={s['n']})" if s["n"] > 1 else f"**{s['mean']:.2f}** (n=1, no CI)"


def shown_path(p):
    return os.path.relpath(p, ROOT) if p.startswith(ROOT + os.sep) else p


def markdown(a, machine, runs_by_server, rows, ratios, cut_short):
    m = machine
    md = ["# multiturn_cache", "", f"- date: {a.stamp} UTC", f"- machine: {m['cpu_model']} ({m['arch']}), "
          f"{m['physical_cores']} cores / {m['logical_cpus']} CPUs; {a.threads} threads per server",
          f"- model: `{shown_path(a.model)}` ({os.path.getsize(a.model) / 2**20:.0f} MiB); "
          f"{a.conversations} conversations over {a.slots} slots, "
          f"{a.turns} turns each, {a.clients or a.conversations} clients, {a.max_tokens} tokens per answer "
          f"(temperature 0), {a.ctx} context per slot; {a.reps} repetitions, servers alternated",
          f"- think time uniform in [{a.think_min}, {a.think_max}] s, scaled down from the real 20-75 s; "
          f"first turns spread over [0, {a.think_max}] s",
          f"- hone serve --slots {a.slots} --ctx {a.ctx} --state-dir <fresh temp dir per rep> {a.hone_args}",
          f"- llama-server -np {a.slots} -c {a.slots * a.ctx} {' '.join(NO_JINJA)}, its defaults otherwise "
          "(--cache-ram 8192 MiB)",
          f"- load average when written: {os.getloadavg()[0]:.1f}"
          + ("; **cut short by --max-seconds**" if cut_short else ""),
          f"- command: `bench/multiturn_cache.py {' '.join(shlex.quote(x) for x in sys.argv[1:])}`", "",
          "| server | first-turn TTFT p50 ms | p99 ms | returning TTFT p50 ms | p99 ms | cached share of returning "
          "prompts (reachable) | peak RSS MiB | turns (errors) |", "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        share = f"{100 * r['ret_cached_share']:.1f}% ({100 * r['ret_reachable_share']:.1f}%)"
        md.append(f"| {name} | {ms(r['first_p50'])} | {ms(r['first_p99'])} | {ms(r['ret_p50'])} | {ms(r['ret_p99'])} "
                  f"| {share} | {r['peak_rss_mb']:.0f} | {r['turns']} ({r['errors']}) |".replace("nan", "n/a")
                  .replace("n/a%", "n/a"))
    md += ["", "p50/p99 pool every rep's turns (with few turns the p99 is close to the max). Ratios are per rep, "
           "mean ± 95% CI over reps; the goal of issue 26 is ≤ 0.8 for returning turns. Reachable: the mean share a "
           "cache of each conversation's whole previous turn would give (the new user turn is never cached).", ""]
    for k, label in (("ret_p50", "returning-turn TTFT p50"), ("ret_p99", "returning-turn TTFT p99"),
                     ("first_p50", "first-turn TTFT p50")):
        if k in ratios:
            md.append(f"- {label}, hone / llama-server: {fmt_ratio(ratios[k])}")
    h = rows.get(NAMES["hone"], {})
    if h.get("rss_over_bound", float("nan")) == h.get("rss_over_bound"):
        md.append(f"- hone peak RSS / (1.1 × (model file + slots' KV + --cache-ram)): {h['rss_over_bound']:.2f} "
                  "(goal ≤ 1; the KV per token read from /hone/cache's entries)")
    return md + restart_md(runs_by_server, rows, ratios)


def restart_md(runs_by_server, rows, ratios):
    md, h = [], rows.get(NAMES["hone"], {})
    failed = [r["restart_error"].splitlines()[0] for r in runs_by_server.get(NAMES["hone"], []) if "restart_error" in r]
    if failed:
        md += ["", f"**hone failed to restart in {len(failed)} rep(s)**: {failed[0]}"]
    if "restart_p50" in h:
        md += ["", "Restart (hone only): SIGTERM, start on the same state dir, each conversation's next turn once "
               "(goal: within 1.5× a hot turn; llama-server would start cold).", "",
               f"- restart turn TTFT p50 {ms(h['restart_p50'])} ms, p99 {ms(h['restart_p99'])} ms; hot returning p50 "
               f"{ms(h['ret_p50'])} ms, p99 {ms(h['ret_p99'])} ms; cached share {100 * h['restart_cached_share']:.1f}%",
               f"- restart p50 / hot p50: {fmt_ratio(ratios.get('restart_p50_over_hot_p50'))}",
               f"- restart p99 / hot p99: {fmt_ratio(ratios.get('restart_p99_over_hot_p99'))}"]
    return md


def write_results(a, machine, runs_by_server, cut_short):
    rows, ratios = aggregate(runs_by_server)
    host = socket.gethostname().split(".")[0] or "host"
    base = os.path.join(a.out_dir, f"multiturn_cache-{host}-{a.stamp}")
    os.makedirs(a.out_dir, exist_ok=True)
    config = {k: v for k, v in vars(a).items() if k not in ("stamp", "out_dir")}
    with open(base + ".json", "w") as f:
        json.dump({"benchmark": "multiturn_cache", "date": a.stamp, "config": config, "machine": machine,
                   "cut_short": cut_short, "rows": rows, "ratios": ratios, "runs": runs_by_server}, f, indent=2)
    md = markdown(a, machine, runs_by_server, rows, ratios, cut_short)
    with open(base + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    return base, md


# --------------------------------------------------------------------- main

def machine_info(hone):
    try:
        out = subprocess.run([hone, "info", "--json", "--bandwidth-seconds", "0.5"], capture_output=True, text=True,
                             check=True, timeout=60).stdout
        keep = ("cpu_model", "arch", "physical_cores", "logical_cpus")
        return {k: v for k, v in json.loads(out).items() if k in keep}
    except (OSError, subprocess.SubprocessError, ValueError):
        # hone not built (a llama-server-only run): what Python can see.
        n, cpu = os.cpu_count() or 1, "unknown"
        with open("/proc/cpuinfo") as f:
            cpu = next((x.split(":", 1)[1].strip() for x in f if x.startswith("model name")), cpu)
        return {"cpu_model": cpu, "arch": platform.machine(), "physical_cores": n, "logical_cpus": n}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = ap.add_argument
    add("--conversations", "-C", type=int, default=12)
    add("--slots", "-S", type=int, default=2)
    add("--turns", "-T", type=int, default=4)
    add("--clients", "-K", type=int, default=0, help="client threads (0 = one per conversation)")
    add("--think-min", type=float, default=2.0)
    add("--think-max", type=float, default=6.0)
    add("--max-tokens", type=int, default=16)
    add("--ctx", type=int, default=2048, help="context per slot (llama-server gets -c slots*ctx)")
    add("--reps", type=int, default=3)
    add("--servers", default="hone,llama", help="comma-separated: hone, llama")
    add("--hone-args", default="--cache-ram 2G --cache-disk 4G", help="extra hone serve flags")
    add("--model")
    add("--threads", type=int, default=0, help="0 = physical cores")
    add("--hone", default=os.path.join(ROOT, "build/hone"))
    add("--peer-bin", default=os.environ.get("HONE_PEER_BIN"), help="folder with llama-server (default: pinned build)")
    add("--max-seconds", type=float, default=900, help="bound on the whole run; a run cut short still writes results")
    add("--stamp", default=datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M"))
    add("--out-dir", default=os.path.join(ROOT, "bench/results"))
    a = ap.parse_args()
    a.servers = [x.strip() for x in a.servers.split(",") if x.strip()]
    if not a.servers or any(x not in NAMES for x in a.servers):
        ap.error("--servers takes a comma-separated subset of: hone, llama")
    if a.think_min < 0 or a.think_max < a.think_min:
        ap.error("need 0 <= --think-min <= --think-max")
    if min(a.conversations, a.slots, a.turns, a.reps) < 1:
        ap.error("--conversations, --slots, --turns and --reps must be >= 1")
    return a


def resolve_tools(a):
    """peer bin, model and threads; a clear error when something is missing."""
    if "hone" in a.servers and not os.access(a.hone, os.X_OK):
        sys.exit(f"multiturn_cache: hone not found at {a.hone} (build it, or pass --hone)")
    if a.peer_bin is None and ("llama" in a.servers or not a.model):
        # scripts/build-llama.sh prints the pinned build's prefix at once when
        # built; otherwise it builds llama.cpp (10-35 min).
        try:
            a.peer_bin = os.path.join(peer_prefix(), "bin")
        except (OSError, subprocess.CalledProcessError) as e:
            sys.exit(f"multiturn_cache: no pinned llama.cpp build ({e}); run scripts/build-llama.sh or pass --peer-bin")
    if "llama" in a.servers and not os.access(os.path.join(a.peer_bin, "llama-server"), os.X_OK):
        sys.exit(f"multiturn_cache: llama-server not found in {a.peer_bin} (pass --peer-bin DIR or set HONE_PEER_BIN)")
    if not a.model:
        if not os.access(a.hone, os.X_OK):
            sys.exit("multiturn_cache: the default model is made by `hone synth`; build hone or pass --model")
        a.model = ensure_default_model(a.hone, a.peer_bin)
    a.model = os.path.abspath(a.model)
    a.name = os.path.splitext(os.path.basename(a.model))[0]


def main():
    a = parse_args()
    deadline = Deadline(a.max_seconds)
    resolve_tools(a)
    machine = machine_info(a.hone)
    a.threads = a.threads or machine["physical_cores"]
    runs = {NAMES[k]: [] for k in a.servers}
    cut_short, md, base = False, [], None
    for rep in range(a.reps):
        # Alternate the order so drift over the run hits both servers alike.
        for kind in (a.servers if rep % 2 == 0 else a.servers[::-1]):
            if deadline.passed():
                cut_short = True
                break
            run = run_server(kind, a, rep, deadline)
            cut_short |= deadline.passed()
            runs[NAMES[kind]].append(run)
            s = server_stats([run])
            print(f"rep {rep} {NAMES[kind]:13s}: returning TTFT p50 {ms(s['ret_p50'])} ms p99 {ms(s['ret_p99'])} ms, "
                  f"cached {100 * s['ret_cached_share']:.0f}%, {s['turns']} turns, {s['errors']} errors"
                  + (f"; restart p50 {ms(s['restart_p50'])} ms" if "restart_p50" in s else ""), file=sys.stderr)
        base, md = write_results(a, machine, runs, cut_short)  # after each rep: a cut run still reports
    print("\n".join(md))
    print(f"wrote {base}.md and .json", file=sys.stderr)


if __name__ == "__main__":
    main()
