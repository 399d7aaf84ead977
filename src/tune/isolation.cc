#include "tune/isolation.h"

#include <cstdlib>

#include "util/isolated.h"

namespace hone::tune {

std::string CrashGuard::PathKey(const Config& c) {
  return std::string(c.repack ? "repack" : "no-repack") + (c.repack && !c.amx ? " no-amx" : "") +
         " fa=" + engine::FlashAttnName(c.flash_attn) + " kv=" + c.kv_type;
}

std::vector<std::string> CrashGuard::ChildArgs(const Config& c) const {
  std::string prompt;
  for (int i = 0; i < o_.prompt_tokens; ++i) prompt += "hello ";  // about one token a word
  std::vector<std::string> a = {o_.hone_binary, "run", o_.model,       "-p",          prompt, "-n", "4",
                                "--temp",       "0",   "--ignore-eos", "--no-profile"};
  auto add = [&a](const char* flag, const std::string& value) {
    a.push_back(flag);
    a.push_back(value);
  };
  // Room for the prompt whatever the tokenizer makes of "hello " (one token in
  // Qwen's vocabulary, several in a 512-piece one).
  add("-c", std::to_string((4 * o_.prompt_tokens + 64 + 255) / 256 * 256));
  add("-t", std::to_string(c.threads));
  add("--threads-batch", std::to_string(c.threads_batch));
  add("-b", std::to_string(c.n_batch));
  add("-u", std::to_string(c.n_ubatch));
  add("--flash-attn", engine::FlashAttnName(c.flash_attn));
  add("--kv-type", c.kv_type);
  add("--load-mode", engine::LoadModeName(c.load_mode));
  add("--poll", std::to_string(c.poll));
  if (!c.repack) a.push_back("--no-repack");
  if (!c.amx) a.push_back("--no-amx");
  return a;
}

Status CrashGuard::Check(const Config& c) {
  if (o_.hone_binary.empty()) return {};
  const std::string key = PathKey(c);
  if (auto it = verdicts_.find(key); it != verdicts_.end()) return it->second;
  std::vector<std::string> argv = ChildArgs(c);
  // Fault injection for tests: a child that dies of SIGILL for the paths
  // named, as ggml's AMX kernels did on the first prompt batch.
  if (const char* inject = std::getenv("HONE_TUNE_INJECT_CRASH");
      inject && *inject && key.find(inject) != std::string::npos) {
    argv = {"/bin/sh", "-c", "kill -ILL $$"};
  }
  ++children_;
  ChildOutcome r = RunProgram(argv, o_.timeout_s, 600);
  // Only a crash or a hang condemns the path. A child that exits with an error
  // (say, a context that does not fit) failed cleanly; the in-process trial
  // will meet the same error and report it in its own words.
  Status verdict;
  if (!r.exited) {
    std::string tail = r.output;
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
    if (auto nl = tail.rfind('\n'); nl != std::string::npos) tail = tail.substr(nl + 1);
    verdict =
        MakeError(ErrorCode::kUnsupported, "crashed in an isolated child run (" + key + "): " + r.Describe() +
                                               (!tail.empty() ? " after: " + tail : "") + "; not measured");
  }
  verdicts_[key] = verdict;
  return verdict;
}

}  // namespace hone::tune
