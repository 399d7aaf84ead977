// hone's JSON-schema-to-grammar converter (serve/json_grammar.h) against
// llama.cpp's (common/json-schema-to-grammar, llama-server's), on the same
// schemas: the seed corpus of the fuzz target (tests/fuzz/corpus/json_schema),
// the schema shapes of serve/json_grammar_test.cc, and hostile ones (deep
// nesting, nested type lists, wide objects). For each: whether each converter
// gives a grammar, that grammar's size, the time it took, and whether
// llama.cpp's grammar parser accepts it (a sampler on a real vocabulary).
//
// Usage: build/bench/grammar_compare MODEL.gguf SCHEMA_DIR > bench/results/grammar-vm-DATE.md
// The hostile cases run llama.cpp's converter in a child process, so one
// that overflows the stack is reported, not fatal to the run.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/schema_grammar.h"
#include "serve/json_grammar.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Outcome {
  std::string status;  // "ok", "error: ...", "crashed (signal N)"
  size_t bytes = 0;
  double ms = 0;
  std::string parses;  // "yes", "no", "-"
};

// A table cell: one line, at most 90 characters.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '|') c = ' ';
  }
  return s.size() > 90 ? s.substr(0, 87) + "..." : s;
}

std::string Parses(const hone::engine::Model& model, const std::string& grammar) {
  hone::engine::SamplingOptions o;
  o.grammar = grammar;
  return hone::engine::Sampler::Create(model, o).ok() ? "yes" : "no";
}

template <class F>
Outcome Measure(const hone::engine::Model& model, F convert) {
  Outcome o;
  const auto t0 = Clock::now();
  auto g = convert();
  o.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!g) {
    o.status = "error: " + OneLine(g.error().message);
    o.parses = "-";
    return o;
  }
  o.status = "ok";
  o.bytes = g->size();
  o.parses = Parses(model, *g);
  return o;
}

// llama.cpp's converter in a child: its recursion has no depth limit.
Outcome MeasureLlama(const hone::engine::Model& model, const std::string& schema) {
  int fds[2];
  if (pipe(fds) != 0) return {"error: pipe", 0, 0, "-"};
  const auto t0 = Clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    auto g = hone::engine::LlamaJsonSchemaGrammar(schema);
    std::string out = g ? "G" + *g : "E" + g.error().message;
    size_t off = 0;
    while (off < out.size()) {
      ssize_t n = write(fds[1], out.data() + off, out.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string got;
  char buf[65536];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Outcome o;
  o.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  o.parses = "-";
  if (WIFSIGNALED(status)) {
    o.status = "crashed (signal " + std::to_string(WTERMSIG(status)) + ")";
  } else if (got.empty() || got[0] == 'E') {
    o.status = "error: " + (got.empty() ? std::string("no output") : OneLine(got.substr(1)));
  } else {
    o.status = "ok";
    o.bytes = got.size() - 1;
    o.parses = Parses(model, got.substr(1));
  }
  return o;
}

std::string Nested(int depth) {
  std::string s = R"({"type":"string"})";
  for (int i = 0; i < depth; ++i) s = R"({"type":"object","properties":{"a":)" + s + "}}";
  return s;
}

std::string NestedTypeLists(int depth) {
  // Linear in depth as text; each level's three types each expand the level below.
  std::string s = R"({"type":["string","number","null"]})";
  for (int i = 0; i < depth; ++i) s = R"({"type":["object","object","object"],"properties":{"a":)" + s + "}}";
  return s;
}

std::string Wide(int n) {
  std::string s = R"({"type":"object","properties":{)";
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::string("\"p") + std::to_string(i) + R"(":{"type":"integer"})";
  return s + "}}";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.gguf SCHEMA_DIR\n", argv[0]);
    return 2;
  }
  auto model = hone::engine::Model::Load(argv[1]);
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().ToString().c_str());
    return 1;
  }
  std::vector<std::pair<std::string, std::string>> cases;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(argv[2])) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    std::ifstream f(p);
    cases.emplace_back(p.filename().string(), std::string(std::istreambuf_iterator<char>(f), {}));
  }
  // The shapes of serve/json_grammar_test.cc.
  cases.emplace_back("test: optional properties",
                     R"({"type":"object","required":["b"],"properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}}})");
  cases.emplace_back("test: alternatives and lengths",
                     R"({"type":"object","properties":{"id":{"anyOf":[{"type":"integer"},{"type":"string","maxLength":8}]},"tag":{"oneOf":[{"const":"a"},{"enum":["b","c"]}]},"note":{"type":["string","null"]},"list":{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":3}}})");
  cases.emplace_back("test: remote $ref", R"({"$ref":"https://example.com/schema.json"})");
  cases.emplace_back("test: dangling $ref", R"({"$ref":"#/$defs/missing"})");
  cases.emplace_back("test: false subschema", R"({"type":"object","properties":{"x":false}})");
  for (int d : {16, 64, 1000, 20000}) cases.emplace_back("hostile: nested objects, depth " + std::to_string(d), Nested(d));
  for (int d : {4, 8, 12}) cases.emplace_back("hostile: nested type lists, depth " + std::to_string(d), NestedTypeLists(d));
  cases.emplace_back("hostile: 2,000 properties", Wide(2000));

  std::printf("| schema | hone | bytes | ms | parses | llama.cpp | bytes | ms | parses |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& c : cases) {
    const std::string& name = c.first;
    const std::string& text = c.second;
    Outcome ours = Measure(**model, [&]() -> hone::Result<std::string> {
      nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return hone::MakeError(hone::ErrorCode::kInvalidArgument, "not JSON");
      return hone::serve::JsonSchemaGrammar(j);
    });
    Outcome theirs = MeasureLlama(**model, text);
    std::printf("| %s | %s | %zu | %.2f | %s | %s | %zu | %.2f | %s |\n", name.c_str(), ours.status.c_str(), ours.bytes,
                ours.ms, ours.parses.c_str(), theirs.status.c_str(), theirs.bytes, theirs.ms, theirs.parses.c_str());
    std::fflush(stdout);
  }
  return 0;
}
