#!/usr/bin/env python3
"""`hone serve` against the peer `llama-server`, same model, same machine, same run.

Workload: a customer-support chat. Every request shares a ~300-token system
prompt, has its own ~30-token user turn, and generates 128 tokens, streamed
(SSE, OpenAI chat API). At 1, 4 and 8 concurrent clients it reports aggregate
generated tokens/s (mean ± 95% CI over repetitions), TTFT p50/p99 and
inter-token latency p50/p99. Servers: hone serve (slots = 8), llama-server with
its defaults, and llama-server with the same parallelism (-np 8, same total
context). Also: TTFT of a first request to a model hone has not loaded yet
(page cache warm), and hone's RSS after keep_alive expiry.

With --tools every chat request also offers a 2-function tool list
(lookup_order, book_technician) with tool_choice "auto", so the prompt grows
by the rendered tool list; llama-server then runs with --jinja instead of
--no-jinja (its tool support needs Jinja templates). Streamed
delta.tool_calls chunks count as generated pieces like delta.content, and the
responses that finish with finish_reason "tool_calls" are counted per server.

Usage: bench/serve_vs_llama_server.py [--model M] [--reps 2] [--threads T] [--levels 1,4,8] [--tools]
Writes bench/results/serve_vs_llama_server-<host>-<date>.{md,json}, or
bench/results/serve_vs_llama_server_tools-<host>-<date>.{md,json} with --tools.
"""
import argparse, datetime, http.client, json, math, os, socket, statistics, subprocess, sys, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from tg_vs_llama_bench import summary, peer_prefix, ensure_default_model  # noqa: E402

SYSTEM = ("You are the support assistant of Northwind Home Internet. Be polite, precise and brief. "
          "Our plans: Basic 100 Mbit/s at 29 euros a month, Plus 500 Mbit/s at 39 euros, Max 1 Gbit/s at 49 euros. "
          "Every plan includes a Wi-Fi 6 router, free installation, and no data cap. Contracts run month to month; "
          "there is no cancellation fee. Outages: first ask the customer to restart the router by unplugging it "
          "for thirty seconds, then check the status page at status.northwind.example. If the light on the router "
          "is red, the line is down and a technician visit can be booked for the next working day at no cost. "
          "Billing questions: invoices are sent on the first day of each month and can be paid by card or bank "
          "transfer; late payments after fourteen days incur a reminder fee of five euros. Moving house: the "
          "customer can take the plan to the new address if it is in our coverage area, with a free reinstallation. "
          "Never promise speeds above the plan, never ask for passwords, and escalate complaints about a technician "
          "to a human agent by saying you will open a ticket. Answer in the language of the customer. Keep answers "
          "under one hundred and fifty words, use short paragraphs, and end by asking whether anything else is "
          "needed. If you do not know an answer, say so and offer to open a ticket for a human colleague.")
QUESTIONS = [
    "My internet has been dropping every evening around eight for the past week, what should I do about it?",
    "I am moving to a new flat next month in the city centre, can I take my current plan with me please?",
    "Why is my invoice this month five euros higher than usual? I paid the last one a bit late I think.",
    "What is the difference between the Plus and the Max plan, and is it worth upgrading for gaming?",
    "The light on my router has been red since this morning and nothing works, can you send someone?",
    "Can I cancel my contract at the end of this month without paying any fee, and how do I do that?",
    "My neighbour says the Wi-Fi 6 router is better than mine, do I get one included with my Basic plan?",
    "The technician who came yesterday was rude and left a mess, I want to file a formal complaint now.",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, timeout=180):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError("server exited early")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return time.time() - t0
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("server did not become ready")


# "chat" (default, the workload): the OpenAI chat API. "completions":
# the chat rendered here in ChatML and sent to /v1/completions. Either way
# llama-server checks each answer with its chat-output parser, which fails
# some of the random-weight model's answers (invalid UTF-8 from split byte
# tokens: "unparsed Content-only output") with an error event mid-stream;
# such requests are counted in the table's last column.
API = "chat"

# --tools: the tool list every chat request carries (OpenAI form), with
# tool_choice "auto". Off by default; set from the command line in main().
USE_TOOLS = False
TOOLS = [
    {"type": "function", "function": {
        "name": "lookup_order",
        "description": "Look up a customer's order by its number",
        "parameters": {"type": "object",
                       "properties": {"order_id": {"type": "integer"},
                                      "email": {"type": "string", "maxLength": 64}},
                       "required": ["order_id"]}}},
    {"type": "function", "function": {
        "name": "book_technician",
        "description": "Book a technician visit for a line that is down",
        "parameters": {"type": "object",
                       "properties": {"date": {"type": "string", "format": "date"},
                                      "slot": {"type": "string", "enum": ["morning", "afternoon"]}},
                       "required": ["date", "slot"]}}},
]


def chatml(question):
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n"
            "<|im_start|>assistant\n")


def stream_chat(port, model, question, max_tokens, seed):
    """One streaming request: returns (ttft, [inter-token gaps], tokens, error, finish_reason).

    A chunk counts as one generated piece when it carries delta.content,
    delta.tool_calls (a server streaming a tool call) or, for /v1/completions,
    text; TTFT is the time to the first such chunk."""
    common = {"model": model, "stream": True, "stream_options": {"include_usage": True},
              "max_tokens": max_tokens, "temperature": 0.8, "seed": seed, "ignore_eos": True}
    if API == "chat":
        path = "/v1/chat/completions"
        body = dict(common, messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}])
        if USE_TOOLS:
            body.update(tools=TOOLS, tool_choice="auto")
    else:
        path = "/v1/completions"
        body = dict(common, prompt=chatml(question))
    body = json.dumps(body)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", path, body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"HTTP {r.status}: {r.read()[:200]}")
    ttft, last, gaps, chunks, usage, error, finish = None, None, [], 0, None, None, None
    for d in sse_events(r):
        if d.get("error"):  # an error event mid-stream: the request failed
            error = d["error"]
        if d.get("usage"):
            usage = d["usage"]
        choice = d["choices"][0] if d.get("choices") else {}
        if choice.get("finish_reason"):
            finish = choice["finish_reason"]
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("tool_calls") or choice.get("text"):
            now = time.perf_counter()
            if ttft is None:
                ttft = now - t0
            else:
                gaps.append(now - last)
            last = now
            chunks += 1
    tokens = usage["completion_tokens"] if usage else chunks
    return ttft or (time.perf_counter() - t0), gaps, tokens, error, finish


def sse_events(r, stop=lambda: False):
    """The JSON objects of an OpenAI server-sent event stream, until [DONE],
    the end of the stream, or stop() (asked before each line)."""
    while not stop():
        line = r.readline()
        if not line:
            return
        line = line.strip()
        if line == b"data: [DONE]":
            return
        if line.startswith(b"data: "):
            yield json.loads(line[6:])


def run_level(port, model, clients, per_client, max_tokens, rep):
    results, lock = [], threading.Lock()

    def client(i):
        for k in range(per_client):
            q = QUESTIONS[(i + k * clients + rep) % len(QUESTIONS)] + f" (ticket {rep}-{i}-{k})"
            r = stream_chat(port, model, q, max_tokens, seed=1000 * rep + 10 * i + k)
            with lock:
                results.append(r)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    return {"tps": sum(r[2] for r in results) / wall, "ttft": [r[0] for r in results],
            "itl": [g for r in results for g in r[1]], "tokens": sum(r[2] for r in results),
            "requests": len(results), "failed": sum(1 for r in results if r[3]),
            "tool_calls": sum(1 for r in results if r[4] == "tool_calls")}


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(math.ceil(q * len(xs))) - 1)]


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Server:
    def __init__(self, name, cmd, port):
        self.name, self.cmd, self.port = name, cmd, port

    def __enter__(self):
        self.log = open(os.path.join("/tmp", f"serve_bench_{self.port}.log"), "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.ready_s = wait_ready(self.port, self.proc)
        return self

    def __exit__(self, *a):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


# llama-server's default jinja chat path also parses every answer for tool
# calls and reasoning, which fails even more random-weight answers ("does not
# match the expected peg-native format"); --no-jinja gives the peer its best
# case with the same ChatML template.
NO_JINJA = ["--no-jinja"]
# With --tools llama-server needs its Jinja chat path (tool lists are rendered
# and tool calls parsed only there).
JINJA = ["--jinja"]


def peer_template_flags(tools):
    return JINJA if tools else NO_JINJA


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--levels", default="1,4,8")
    ap.add_argument("--api", choices=["chat", "completions"], default="chat",
                    help="how the chat is sent (see API in the script)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--hone", default=os.path.join(ROOT, "build/hone"))
    ap.add_argument("--peer-bin", default=os.environ.get("HONE_PEER_BIN"))
    ap.add_argument("--servers", help="comma-separated name prefixes, e.g. 'hone,llama-server -np'")
    ap.add_argument("--stamp", default=datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M"))
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench/results"))
    ap.add_argument("--tools", action="store_true",
                    help="every chat request also carries a 2-function tool list (tool_choice auto); "
                         "llama-server runs with --jinja instead of --no-jinja")
    a = ap.parse_args()
    if a.tools and a.api != "chat":
        ap.error("--tools needs --api chat (tool lists go over the chat API)")
    global API, USE_TOOLS
    API = a.api
    USE_TOOLS = a.tools
    peer_flags = peer_template_flags(a.tools)
    peer_bin = a.peer_bin or os.path.join(peer_prefix(), "bin")
    machine = json.loads(subprocess.run([a.hone, "info", "--json", "--bandwidth-seconds", "0.5"], capture_output=True,
                                        text=True, check=True).stdout)
    threads = a.threads or machine["physical_cores"]
    model = a.model or ensure_default_model(a.hone, peer_bin)
    name = os.path.splitext(os.path.basename(model))[0]
    levels = [int(x) for x in a.levels.split(",")]
    slots, ctx_slot = max(levels), 1024
    servers = {
        "hone serve": [a.hone, "serve", "-m", model, "--port", "{port}", "--slots", str(slots), "--ctx", str(ctx_slot),
                       "--threads", str(threads), "--quiet", "true"],
        # One KV stream per slot, as llama-server -np N: a step over slots
        # whose ids have gaps runs as several forward passes.
        "hone serve --kv-unified off": [a.hone, "serve", "-m", model, "--port", "{port}", "--slots", str(slots),
                                        "--ctx", str(ctx_slot), "--threads", str(threads), "--quiet", "true",
                                        "--kv-unified", "off"],
        "llama-server (defaults)": [os.path.join(peer_bin, "llama-server"), "-m", model, "--port", "{port}",
                                    "-t", str(threads), "-a", name, *peer_flags],
        f"llama-server -np {slots}": [os.path.join(peer_bin, "llama-server"), "-m", model, "--port", "{port}",
                                      "-t", str(threads), "-np", str(slots), "-c", str(slots * ctx_slot), "-a", name,
                                      *peer_flags],
    }
    if a.servers:
        keep = [x.strip() for x in a.servers.split(",")]
        servers = {k: v for k, v in servers.items() if any(k.startswith(x) for x in keep)}
    data = {s: {c: [] for c in levels} for s in servers}
    cold = {}
    # Level by level, servers interleaved, results rewritten after each level:
    # a run cut short still compares every server at the levels it reached.
    for c in levels:
        for rep in range(a.reps):
            for sname, cmd in servers.items():
                port = free_port()
                with Server(sname, [x.replace("{port}", str(port)) for x in cmd], port) as srv:
                    stream_chat(port, name, QUESTIONS[0], 8, seed=1)  # warm: load, first graph, prefix
                    per_client = 2 if c == 1 else 1
                    r = run_level(port, name, c, per_client, a.max_tokens, rep)
                    data[sname][c].append(r)
                    print(f"rep {rep} {sname:28s} c={c}: {r['tps']:.1f} tok/s, TTFT p50 {1000 * pct(r['ttft'], .5):.0f} ms",
                          file=sys.stderr)
        write_results(a, machine, threads, model, servers, [x for x in levels if data[next(iter(servers))][x]], data, cold)

    # Cold start: first request to a model hone has not loaded (page cache warm
    # from the runs above); then RSS once keep_alive has expired.
    port = free_port()
    with Server("hone cold", [a.hone, "serve", "-m", model, "--port", str(port), "--slots", str(slots), "--ctx",
                              str(ctx_slot), "--threads", str(threads), "--keep-alive", "2s", "--quiet", "true"],
                port) as srv:
        cold["rss_before_mb"] = rss_mb(srv.proc.pid)
        ttft = stream_chat(port, name, QUESTIONS[1], 16, seed=3)[0]
        cold["hone_unloaded_ttft_s"] = ttft
        cold["rss_loaded_mb"] = rss_mb(srv.proc.pid)
        time.sleep(3.5)
        cold["rss_after_keep_alive_mb"] = rss_mb(srv.proc.pid)
    port = free_port()
    t0 = time.perf_counter()
    peer_cmd = [os.path.join(peer_bin, "llama-server"), "-m", model, "--port", str(port), "-t", str(threads), "-a", name,
                *peer_flags]
    with Server("peer cold", peer_cmd, port) as srv:
        ttft = stream_chat(port, name, QUESTIONS[1], 16, seed=3)[0]
        cold["llama_server_start_to_first_token_s"] = time.perf_counter() - t0
    write_results(a, machine, threads, model, servers, levels, data, cold)


def write_results(a, machine, threads, model, servers, levels, data, cold):
    rows = {}
    for sname in servers:
        for c in levels:
            runs = data[sname][c]
            rows[f"{sname}|{c}"] = {"server": sname, "clients": c, "tps": summary([r["tps"] for r in runs]),
                                    "ttft_p50": pct([x for r in runs for x in r["ttft"]], .5),
                                    "ttft_p99": pct([x for r in runs for x in r["ttft"]], .99),
                                    "itl_p50": pct([x for r in runs for x in r["itl"]], .5),
                                    "itl_p99": pct([x for r in runs for x in r["itl"]], .99),
                                    "requests": sum(r.get("requests", 0) for r in runs),
                                    "failed": sum(r.get("failed", 0) for r in runs),
                                    "tool_calls": sum(r.get("tool_calls", 0) for r in runs)}
    stamp = a.stamp
    host = socket.gethostname().split(".")[0] or "host"
    m = {k: machine[k] for k in ("cpu_model", "arch", "physical_cores", "logical_cpus")}
    bench = "serve_vs_llama_server_tools" if a.tools else "serve_vs_llama_server"
    peer_flags = " ".join(peer_template_flags(a.tools))
    result = {"benchmark": bench, "date": stamp, "model": model, "threads": threads, "reps": a.reps,
              "max_tokens": a.max_tokens, "tools": a.tools, "llama_server_template_flags": peer_flags,
              "machine": m, "rows": rows, "cold": cold}
    if a.tools:
        result["tool_list"] = TOOLS
    os.makedirs(a.out_dir, exist_ok=True)
    base = os.path.join(a.out_dir, f"{bench}-{host}-{stamp}")
    with open(base + ".json", "w") as f:
        json.dump(result, f, indent=2)
    md = [f"# {bench}", "", f"- date: {stamp} UTC", f"- machine: {m['cpu_model']} ({m['arch']}), "
          f"{m['physical_cores']} cores / {m['logical_cpus']} CPUs; {threads} threads per server",
          f"- model: `{os.path.relpath(model, ROOT)}`; workload: ~300-token shared system prompt, ~30-token user turn, "
          f"{a.max_tokens} generated tokens, streamed; {a.reps} repetitions per level (servers interleaved)"]
    if a.tools:
        md.append("- tools: every request also carries a 2-function tool list (lookup_order, book_technician; "
                  "tool_choice auto), so the prompt grows by the rendered tool list; streamed delta.tool_calls "
                  "chunks count as generated pieces; llama-server runs with --jinja (tools need its Jinja templates)")
    md += [f"- load average when written: {os.getloadavg()[0]:.1f} (other jobs share this machine: expect noise)",
           f"- API: {API} (see the comment at API in the script); llama-server runs with {peer_flags}", "",
           "| server | clients | agg tok/s (mean ± 95% CI) | TTFT p50 ms | TTFT p99 ms | ITL p50 ms | ITL p99 ms "
           "| failed requests |" + (" finish_reason tool_calls |" if a.tools else ""),
           "|---|---|---|---|---|---|---|---|" + ("---|" if a.tools else "")]
    for r in rows.values():
        md.append(f"| {r['server']} | {r['clients']} | {r['tps']['mean']:.1f} ± {r['tps']['ci95']:.1f} | "
                  f"{1000 * r['ttft_p50']:.0f} | {1000 * r['ttft_p99']:.0f} | {1000 * r['itl_p50']:.1f} | "
                  f"{1000 * r['itl_p99']:.1f} | {r['failed']} of {r['requests']} |"
                  + (f" {r['tool_calls']} of {r['requests']} |" if a.tools else ""))
    md += ["", "Ratio of aggregate tok/s, hone / peer:", ""]
    for c in levels:
        if f"hone serve|{c}" not in rows:
            continue
        h = rows[f"hone serve|{c}"]["tps"]["mean"]
        for peer in [x for x in servers if x != "hone serve"]:
            md.append(f"- {c} clients: hone / {peer} = **{h / rows[f'{peer}|{c}']['tps']['mean']:.2f}**")
    if cold:
        md += ["", f"Cold start: hone TTFT of a first request to an unloaded model = "
               f"{1000 * cold['hone_unloaded_ttft_s']:.0f} ms (page cache warm); llama-server process start to first "
               f"token = {1000 * cold['llama_server_start_to_first_token_s']:.0f} ms.",
               f"hone RSS: {cold['rss_before_mb']:.0f} MiB idle before loading, {cold['rss_loaded_mb']:.0f} MiB loaded, "
               f"{cold['rss_after_keep_alive_mb']:.0f} MiB after keep_alive (2 s) expired."]
    else:
        md += ["", "(cold-start and RSS measurements not reached yet)"]
    with open(base + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    print(f"wrote {base}.md and .json", file=sys.stderr)


if __name__ == "__main__":
    main()
