// Runs a libFuzzer target without libFuzzer, for CTest's smoke run with the
// project's own compiler: every file of the seed corpus, then N mutations of
// them (byte flips, inserts, erases, splices; a fixed seed, so a failure
// repeats). The real fuzzing is bench/fuzz.sh, with clang's libFuzzer.
//
// Usage: fuzz_X_smoke CORPUS_DIR [MUTATIONS]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS]\n", argv[0]);
    return 2;
  }
  std::vector<std::string> seeds;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) {
    std::ifstream f(e.path(), std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "%s: no seeds in %s\n", argv[0], argv[1]);
    return 2;
  }
  for (const auto& s : seeds) Run(s);
  const long mutations = argc > 2 ? std::atol(argv[2]) : 2000;
  std::mt19937_64 rng(20261201);
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  for (long i = 0; i < mutations; ++i) {
    std::string s = seeds[pick(seeds.size())];
    for (int edits = 1 + static_cast<int>(pick(4)); edits > 0; --edits) {
      switch (pick(5)) {
        case 0:
          if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << pick(8));
          break;
        case 1:
          s.insert(pick(s.size() + 1), 1, "{}[]\",:0-e.\\u"[pick(14)]);
          break;
        case 2:
          if (!s.empty()) s.erase(pick(s.size()), 1 + pick(8));
          break;
        case 3: {  // splice in a piece of another seed
          const std::string& o = seeds[pick(seeds.size())];
          size_t at = pick(o.size());
          s.insert(pick(s.size() + 1), o.substr(at, pick(64)));
          break;
        }
        default:
          if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng());
      }
    }
    Run(s);
  }
  std::printf("%s: %zu seeds and %ld mutations ran\n", argv[0], seeds.size(), mutations);
  return 0;
}
