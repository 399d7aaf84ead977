#!/usr/bin/env python3
"""The arm64 smoke suite: hone built for aarch64 (scripts/arm64.sh build), run
under qemu-aarch64-static on this x86-64 machine, checked against the native
build on the same inputs.

Each step is one CTest test (arm64_smoke.<step>); run them all, or some, with
`scripts/arm64.sh smoke [STEP...]`. Steps:

  info    hone info: arm64, the ARM features from the kernel's HWCAP bits (not the
          host's /proc/cpuinfo), the llama.cpp build key, a bandwidth figure
  isa     on an emulated Cortex-A53 (no dotprod) hone refuses to start, naming
          what is missing; on a Cortex-A76 it starts
  run     hone run at temperature 0 on both trained models: the same text as the
          native x86 run (the same tokenizer, so the same tokens)
  serve   hone serve answers an OpenAI chat and an Ollama chat; RSS with no model
          loaded and with the trained model loaded, arm64 and x86
  quant   hone quantize of the d256 model to Q8_0 and Q4_K_M (whether the files are
          byte-identical is reported); hone bench perplexity within 0.1% of the
          native figure for each
  engine  the engine unit tests (real models) under emulation
  hw      the hw (probe) unit tests under emulation

Speeds under emulation mean nothing: nothing here times anything.
"""
import argparse
import hashlib
import json
import os
import re
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("HONE_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
STORIES = os.path.join(SHARED, "models", "stories260K.gguf")
D256 = os.path.join(SHARED, "models", "tinystories-d256-l4-f32.gguf")
HELDOUT = os.path.join(SHARED, "corpora", "tinystories_heldout.txt")


class Failure(Exception):
    pass


class Suite:
    def __init__(self, args):
        self.arm = os.path.abspath(os.path.join(args.arm64_build, "hone"))
        self.arm_build = os.path.abspath(args.arm64_build)
        self.native = os.path.abspath(os.path.join(args.native_build, "hone"))
        qemu = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
        if not qemu:
            raise Failure("qemu-aarch64-static not found (apt-get install qemu-user-static)")
        # -L gives the programs the cross toolchain's loader (ld-linux-aarch64.so.1);
        # LD_LIBRARY_PATH makes that loader take the same glibc from beside it.
        # Without it the loader follows the host's ld.so.cache to the arm64
        # multiarch libc (libc6:arm64, a newer Debian revision), whose private
        # layout differs: the first pthread_create then spins forever.
        lib = os.path.join(args.sysroot, "lib")
        self.qemu = [qemu, "-L", args.sysroot, "-E", "LD_LIBRARY_PATH=" + lib]
        self.tmp = tempfile.mkdtemp(prefix="hone-arm64-")
        # Neither build may read the other's tuned profiles or caches.
        self.env = dict(os.environ, HOME=self.tmp, XDG_CACHE_HOME=os.path.join(self.tmp, "cache"))

    def emulated(self, program, *args, cpu=None):
        return self.qemu + (["-cpu", cpu] if cpu else []) + [program, *args]

    def run(self, cmd, timeout=900, check=True):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=self.env)
        if check and p.returncode != 0:
            raise Failure(f"{' '.join(cmd[-6:])} exited {p.returncode}: {p.stderr.strip()[-800:]}")
        return p

    # --- steps -------------------------------------------------------------

    def step_info(self):
        info = json.loads(self.run(self.emulated(self.arm, "info", "--json")).stdout)
        text = self.run(self.emulated(self.arm, "info")).stdout
        expect(info.get("arch") == "aarch64", f"arch is {info.get('arch')}")
        isa = info.get("isa", [])
        # qemu's default CPU ("max") has every feature hone names.
        for f in ("NEON", "FP16", "DOTPROD", "I8MM", "SVE"):
            expect(f in isa, f"{f} missing from the ISA list {isa}")
        expect(not any(f.startswith("AVX") or f.startswith("SSE") for f in isa), f"x86 features on ARM: {isa}")
        expect("EPYC" not in info.get("cpu_model", "") and "Xeon" not in info.get("cpu_model", ""),
               f"the host's CPU name leaked through /proc/cpuinfo: {info.get('cpu_model')}")
        key = info.get("llama_cpp", {}).get("build", "")
        expect("cross-aarch64" in key, "the llama.cpp build key does not name the arm64 build")
        bw = info.get("bandwidth", {}).get("read_gbps", 0)
        expect(bw > 0, "no bandwidth figure")
        amx = next((l for l in text.splitlines() if l.startswith("AMX")), "")
        expect("x86" in amx, f"hone info's AMX line should say AMX is x86-only: {amx!r}")
        return f"{info.get('cpu_model')}; ISA {' '.join(isa)}; {bw:.1f} GB/s (emulated, not a speed)"

    def step_isa(self):
        p = self.run(self.emulated(self.arm, "info", cpu="cortex-a53"), check=False)
        expect(p.returncode != 0, "hone started on a CPU without dotprod")
        expect("DOTPROD" in p.stderr, f"the refusal does not name dotprod: {p.stderr.strip()[:300]}")
        expect("Segmentation" not in p.stderr and p.returncode != -4, "died of SIGILL instead of refusing")
        a76 = self.run(self.emulated(self.arm, "info", "--no-bandwidth", cpu="cortex-a76")).stdout
        # The name comes from MIDR_EL1 (implementer 0x41, part 0xd0b), read live.
        expect("ARM Cortex-A76" in a76, "hone info on a Cortex-A76 does not name it:\n" + a76[:400])
        return "Cortex-A53 refused: " + first_line_with(p.stderr, "DOTPROD")[:160] + "; Cortex-A76 named and started"


    def step_run(self):
        out = []
        for model, prompt in ((STORIES, "Once upon a time"), (D256, "Once upon a time, there was")):
            args = ["run", model, "-p", prompt, "-n", "64", "--temp", "0", "--json", "-q", "--no-profile"]
            arm = json.loads(self.run(self.emulated(self.arm, *args)).stdout)
            x86 = json.loads(self.run([self.native, *args]).stdout)
            name = os.path.basename(model)
            if arm["text"] != x86["text"]:
                i = next((k for k, (a, b) in enumerate(zip(arm["text"], x86["text"])) if a != b),
                         min(len(arm["text"]), len(x86["text"])))
                raise Failure(f"{name}: arm64 and x86 differ from character {i}:\n"
                              f"  arm64: {arm['text']!r}\n  x86:   {x86['text']!r}")
            expect(arm["generated_tokens"] == x86["generated_tokens"], f"{name}: token counts differ")
            out.append(f"{name}: {arm['generated_tokens']} tokens identical")
        return "; ".join(out)

    def step_serve(self):
        rows = []
        for label, cmd in (("arm64 (qemu)", lambda *a: self.emulated(self.arm, *a)),
                           ("x86-64", lambda *a: [self.native, *a])):
            rss = self.serve_and_chat(label, cmd)
            rows.append(f"{label}: RSS " + ", ".join(f"{v / 2**20:.1f} MiB {k}" for k, v in rss.items()))
        return "; ".join(rows)

    def serve_and_chat(self, label, cmd):
        models = os.path.join(self.tmp, "models")
        os.makedirs(models, exist_ok=True)
        for model in (STORIES, D256):
            link = os.path.join(models, os.path.basename(model))
            if not os.path.exists(link):
                os.symlink(model, link)
        state = tempfile.mkdtemp(dir=self.tmp)
        proc = subprocess.Popen(cmd("serve", "--models", models, "--port", "0", "--state-dir", state, "--no-ui",
                                    "--slots", "1", "--ctx", "512"),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env)
        try:
            base = wait_for_url(proc, 120)
            rss = {"idle": rss_bytes(proc.pid)}
            chat = post(base + "/v1/chat/completions", {
                "model": "stories260K", "max_tokens": 12, "temperature": 0,
                "messages": [{"role": "user", "content": "Once upon a time"}]})
            text = chat["choices"][0]["message"]["content"]
            expect(chat["usage"]["completion_tokens"] > 0 and text, f"{label}: empty OpenAI chat answer")
            ollama = post(base + "/api/chat", {
                "model": "stories260K", "stream": False, "options": {"num_predict": 12, "temperature": 0},
                "messages": [{"role": "user", "content": "Once upon a time"}]})
            expect(ollama.get("done") is True and ollama["message"]["content"],
                   f"{label}: empty Ollama chat answer: {ollama}")
            expect(ollama["message"]["content"] == text,
                   f"{label}: the OpenAI and Ollama answers differ at temperature 0")
            rss["with stories260K"] = rss_bytes(proc.pid)
            d256 = post(base + "/v1/chat/completions", {
                "model": "tinystories-d256-l4-f32", "max_tokens": 12, "temperature": 0,
                "messages": [{"role": "user", "content": "Once upon a time"}]})
            expect(d256["usage"]["completion_tokens"] > 0, f"{label}: empty answer from the d256 model")
            rss["with d256 (f32) too"] = rss_bytes(proc.pid)
            return rss
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()

    def step_quant(self):
        results = []
        ppl = {}
        for label, cmd in (("arm64", lambda *a: self.emulated(self.arm, *a)), ("x86", lambda *a: [self.native, *a])):
            out = os.path.join(self.tmp, "quant-" + label)
            os.makedirs(out, exist_ok=True)
            self.run(cmd("quantize", D256, "--types", "q8_0,q4_k_m", "--out-dir", out, "-t", "2"))
            files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".gguf"))
            expect(len(files) == 2, f"{label}: quantize made {files}")
            report = json.loads(self.run(cmd(
                "bench", *files, "--corpus", HELDOUT, "--ctx", "128", "--chunks", "24", "--no-speed", "--no-tasks",
                "--no-cache", "--no-profile", "--json", "--results", os.path.join(out, "results"))).stdout)
            ppl[label] = {os.path.basename(r["model"]): r["ppl"] for r in report_rows(report)}
            results.append((label, files))
        # Byte identity is reported, not required: the quantizers' float rounding
        # may differ between the two compilers and ISAs (FMA contraction, NEON
        # vs AVX paths). What must hold is the perplexity, below.
        notes = []
        for (a, b) in zip(results[0][1], results[1][1]):
            expect(os.path.getsize(a) == os.path.getsize(b), f"{os.path.basename(a)}: sizes differ")
            same = sha256(a) == sha256(b)
            notes.append(f"{os.path.basename(a)} " + ("byte-identical" if same else
                         f"differs in {differing_bytes(a, b) / os.path.getsize(a):.4%} of its bytes"))
        for name, x86_ppl in ppl["x86"].items():
            arm_ppl = ppl["arm64"].get(name)
            expect(arm_ppl is not None, f"no arm64 perplexity for {name}")
            rel = abs(arm_ppl - x86_ppl) / x86_ppl
            expect(rel < 0.001, f"{name}: perplexity {arm_ppl:.4f} on arm64 vs {x86_ppl:.4f} on x86 ({rel:.3%})")
            notes.append(f"{name} PPL {arm_ppl:.4f} vs {x86_ppl:.4f} ({rel:.4%})")
        return "; ".join(notes)

    def step_engine(self):
        # The tests make their random-weight model by running `hone synth`, which
        # cannot start an arm64 program from inside emulation (no binfmt): made
        # here instead, by the arm64 hone, where the tests look for it.
        tmp = os.path.join(self.arm_build, "test-tmp")
        os.makedirs(tmp, exist_ok=True)
        model = os.path.join(tmp, "tiny-synth.f16.gguf")
        self.run(self.emulated(self.arm, "synth", "--like", "tiny", "--out", model + ".tmp"))
        os.replace(model + ".tmp", model)
        return self.gtest("engine_tests")

    def step_hw(self):
        return self.gtest("hw_tests")

    def gtest(self, name):
        p = self.run(self.emulated(os.path.join(self.arm_build, "tests", name), "--gtest_brief=1"), timeout=1500, check=False)
        summary = [l for l in p.stdout.splitlines() if re.match(r"\[  (PASSED|FAILED) ", l)]
        if p.returncode != 0:
            raise Failure(f"{name} under qemu exited {p.returncode}:\n{p.stdout[-3000:]}\n{p.stderr[-1000:]}")
        return " ".join(summary) or p.stdout.strip().splitlines()[-1]


def report_rows(report):
    rows = report.get("rows") or []
    for r in rows:
        if not r.get("has_ppl"):
            raise Failure(f"no perplexity for {r.get('path')}: {r.get('error')}")
    if not rows:
        raise Failure(f"hone bench's JSON has no rows: {json.dumps(report)[:300]}")
    return [{"model": r["path"], "ppl": float(r["ppl"])} for r in rows]


def expect(ok, message):
    if not ok:
        raise Failure(message)


def first_line_with(text, word):
    return next((l for l in text.splitlines() if word in l), text.strip())


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def differing_bytes(a, b):
    n = 0
    with open(a, "rb") as fa, open(b, "rb") as fb:
        for x, y in zip(iter(lambda: fa.read(1 << 20), b""), iter(lambda: fb.read(1 << 20), b"")):
            if x != y:
                n += sum(1 for i, j in zip(x, y) if i != j)
    return n


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise Failure(f"no VmRSS for {pid}")


def wait_for_url(proc, timeout):
    # A reader thread, so a server that hangs without a word cannot block the
    # deadline (readline on the pipe would); it keeps draining the output after.
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout], daemon=True).start()
    deadline = time.time() + timeout
    seen = []
    while time.time() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if proc.poll() is not None and lines.empty():
                break
            continue
        seen.append(line)
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            return m.group(1)
    if proc.poll() is not None:
        raise Failure("hone serve exited before listening:\n" + "".join(seen))
    raise Failure("hone serve did not listen within %ds:\n%s" % (timeout, "".join(seen)))


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


STEPS = ["info", "isa", "run", "serve", "quant", "engine", "hw"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arm64-build", default="build-arm64")
    ap.add_argument("--native-build", default="build")
    ap.add_argument("--sysroot", default="/usr/aarch64-linux-gnu")
    ap.add_argument("steps", nargs="*", help="some of: " + " ".join(STEPS))
    args = ap.parse_args()
    unknown = [s for s in args.steps if s not in STEPS]
    if unknown:
        ap.error(f"unknown step(s) {unknown}; the steps are {STEPS}")
    suite = Suite(args)
    failed = 0
    try:
        for step in args.steps or STEPS:
            t0 = time.time()
            try:
                detail = getattr(suite, "step_" + step)()
                print(f"PASS {step} ({time.time() - t0:.0f} s): {detail}", flush=True)
            except (Failure, subprocess.TimeoutExpired, urllib.error.URLError, KeyError, ValueError) as e:
                failed += 1
                print(f"FAIL {step}: {e}", flush=True)
    finally:
        shutil.rmtree(suite.tmp, ignore_errors=True)
    total = len(args.steps or STEPS)
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
