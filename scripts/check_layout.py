#!/usr/bin/env python3
"""Source layout rules (issue 25); exits 1 listing every violation.

  a. no non-test source in src/ (*.cc, *.h; *_test.cc exempt) over 600 lines;
  b. include rules over the project's own include graph (#include "x/y.h"
     resolved against src/, followed through headers; the chain is printed):
     serve reaches no route/ or api/; api reaches no engine/; backend reaches
     only backend/ and util/; engine reaches no serve/ route/ api/ cli/ tune/
     quant/; util reaches only util/. Tests are exempt;
  c. with --functions BUILD_DIR: clang-tidy's readability-function-size over
     the non-test src/**/*.cc in BUILD_DIR/compile_commands.json; a function
     over 80 lines fails unless scripts/long_functions.txt lists it
     ("path function-name" lines, # comments); a listed function no longer
     over 80 lines (or gone) fails as stale, so the list only shrinks.

Usage: scripts/check_layout.py [--functions BUILD_DIR]
"""
import argparse, collections, json, os, re, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
MAX_LINES = 600
MAX_FUNCTION_LINES = 80
ALLOW_FILE = ROOT / "scripts" / "long_functions.txt"
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
WARN_RE = re.compile(r"^(\S+?):(\d+):\d+: warning: function '(.+?)' exceeds")
NOTE_RE = re.compile(r"^(\S+?):\d+:\d+: note: (\d+) lines including whitespace and comments")

def under(*dirs):
    return lambda inc: inc.split("/", 1)[0] in dirs

# folder -> (is the included file forbidden?, what the rule says)
RULES = {
    "serve": (under("route", "api"), "serve must not include route/ or api/"),
    "api": (under("engine"), "api must not reach engine/"),
    "backend": (lambda i: not under("backend", "util")(i), "backend may include only backend/ and util/"),
    "engine": (under("serve", "route", "api", "cli", "tune", "quant"),
               "engine must not include serve/ route/ api/ cli/ tune/ quant/"),
    "util": (lambda i: not under("util")(i), "util may include only util/"),
}

def sources():
    return sorted(p for p in SRC.rglob("*") if p.suffix in (".cc", ".h") and not p.name.endswith("_test.cc"))

_includes = {}
def includes(rel):
    """Project-internal includes of src/<rel>, as paths relative to src/ (cached)."""
    if rel not in _includes:
        text = (SRC / rel).read_text(errors="replace")
        _includes[rel] = [i for i in INCLUDE_RE.findall(text) if (SRC / i).is_file()]
    return _includes[rel]

def forbidden_reached(rel, forbidden):
    """Breadth first from src/<rel>; stops at the first forbidden file on each path,
    so each entry into forbidden territory is reported once, with its shortest chain."""
    parent, queue, hits = {rel: None}, collections.deque([rel]), []
    while queue:
        node = queue.popleft()
        for inc in includes(node):
            if inc in parent:
                continue
            parent[inc] = node
            if forbidden(inc):
                chain, n = [inc], node
                while n is not None:
                    chain.append(n)
                    n = parent[n]
                hits.append(chain[::-1])
            else:
                queue.append(inc)
    return hits

def check_sizes_and_includes(files):
    problems = []
    for path in files:
        rel = path.relative_to(SRC).as_posix()
        n = len(path.read_text(errors="replace").splitlines())
        if n > MAX_LINES:
            problems.append(f"src/{rel}: {n} lines (max {MAX_LINES})")
        rule = RULES.get(rel.split("/", 1)[0])
        if rule:  # one line per direct include that leads into forbidden files
            by_hop = {}
            for chain in forbidden_reached(rel, rule[0]):
                by_hop.setdefault(chain[1], []).append(chain)
            for chains in by_hop.values():
                more = f" (+{len(chains) - 1} more forbidden)" if len(chains) > 1 else ""
                problems.append(" -> ".join(["src/" + rel] + chains[0][1:]) + f"{more}   [{rule[1]}]")
    return problems

def read_allow_list():
    allowed = set()
    if ALLOW_FILE.is_file():
        for line in ALLOW_FILE.read_text().splitlines():
            line = line.split("#", 1)[0].split()
            if len(line) == 2:
                allowed.add((line[0], line[1]))
            elif line:
                print(f"{ALLOW_FILE.relative_to(ROOT)}: ignoring malformed line: {' '.join(line)}")
    return allowed

def check_functions(build_dir, files):
    """Returns (problems, notes) from clang-tidy's readability-function-size."""
    db_path = Path(build_dir).resolve() / "compile_commands.json"
    if not db_path.is_file():
        return [f"{db_path}: not found (configure the build first)"], []
    db = {}  # resolved path -> the spelling run-clang-tidy matches against
    for e in json.loads(db_path.read_text()):
        spelled = os.path.normpath(os.path.join(e["directory"], e["file"]))
        db[str(Path(spelled).resolve())] = spelled
    ccs = [str(p) for p in files if p.suffix == ".cc"]
    problems = [f"{Path(c).relative_to(ROOT)}: not in {db_path} (reconfigure)" for c in ccs if c not in db]
    ccs = [c for c in ccs if c in db]
    config = "{CheckOptions: [{key: readability-function-size.LineThreshold, value: %d}]}" % MAX_FUNCTION_LINES
    cmd = ["run-clang-tidy", "-p", str(Path(build_dir).resolve()), "-j", "2", "-quiet",
           "-checks=-*,readability-function-size", "-config=" + config] + ["^" + re.escape(db[c]) + "$" for c in ccs]
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    lines = ANSI_RE.sub("", proc.stdout).splitlines()
    found, pending = {}, None  # (path, name) -> [(line, n)]
    for line in lines:
        if m := WARN_RE.match(line):
            pending = (m.group(1), int(m.group(2)), m.group(3))
        elif (m := NOTE_RE.match(line)) and pending and m.group(1) == pending[0]:
            path = Path(pending[0]).resolve()
            rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
            found.setdefault((rel, pending[2]), set()).add((pending[1], int(m.group(2))))
            pending = None
    if proc.returncode != 0:
        errors = [l for l in lines if ": error:" in l]
        problems.append(f"run-clang-tidy exited {proc.returncode}; results may be incomplete")
        problems += ["  " + e for e in errors[:20]]
    allowed, notes = read_allow_list(), []
    for (rel, name), hits in sorted(found.items()):
        for line_no, n in sorted(hits):
            text = f"{rel}:{line_no} {name} {n} lines"
            if (rel, name) in allowed:
                notes.append(f"allowed: {text}")
            else:
                problems.append(f"{text} (max {MAX_FUNCTION_LINES})")
    for rel, name in sorted(allowed - set(found)):
        problems.append(f"stale: {rel} {name} is no longer over {MAX_FUNCTION_LINES} lines; "
                        f"remove it from {ALLOW_FILE.relative_to(ROOT)}")
    return problems, notes

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--functions", metavar="BUILD_DIR", help="also check function sizes with clang-tidy")
    args = ap.parse_args()
    files = sources()
    problems, notes = check_sizes_and_includes(files), []
    if args.functions:
        more, notes = check_functions(args.functions, files)
        problems += more
    for note in notes:
        print(note)
    for p in problems:
        print(p)
    if problems:
        print(f"layout: {len(problems)} violation(s) in {len(files)} files")
        return 1
    print(f"layout ok: {len(files)} files")
    return 0

if __name__ == "__main__":
    sys.exit(main())
