#include "testing/test_env.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

namespace hone::testing {

std::string SharedDir() {
  if (const char* env = std::getenv("HONE_SHARED")) return env;
  return HONE_SHARED_DIR;
}
std::string SharedModel(const std::string& file) { return SharedDir() + "/models/" + file; }
std::string SharedCorpus(const std::string& file) { return SharedDir() + "/corpora/" + file; }

std::string TempDir() {
  std::filesystem::create_directories(HONE_TEST_TMP);
  return HONE_TEST_TMP;
}
std::string TempPath(const std::string& name) { return TempDir() + "/" + name; }
std::string SourceDir() { return HONE_SOURCE_DIR; }
std::string HoneBinary() { return HONE_BINARY; }

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  std::string cmd = command + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string TinySynthModel() {
  static std::once_flag once;
  static std::string path = TempPath("tiny-synth.f16.gguf");
  std::call_once(once, [] {
    // A model older than the binary may come from an older synth: make it again.
    std::error_code ec;
    if (std::filesystem::exists(path) &&
        std::filesystem::last_write_time(path, ec) >= std::filesystem::last_write_time(HoneBinary(), ec)) {
      return;
    }
    // Test processes run in parallel: each writes its own temporary file and
    // the rename publishes a whole model atomically.
    std::string tmp = path + "." + std::to_string(::getpid()) + ".tmp";
    auto r = RunCommand(HoneBinary() + " synth --like tiny --out " + tmp);
    if (r.exit_code == 0)
      std::filesystem::rename(tmp, path);
    else
      std::fprintf(stderr, "hone synth failed:\n%s\n", r.output.c_str());
  });
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

}  // namespace hone::testing
