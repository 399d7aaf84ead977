#include "engine/backend.h"

#include <llama.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>

namespace hone::engine {
namespace {

std::atomic<bool> g_verbose{false};
thread_local std::deque<std::string> t_recent;  // last few warn/error lines
thread_local std::string t_partial;             // llama logs lines in pieces

void LogCallback(ggml_log_level level, const char* text, void*) {
  if (g_verbose) std::fputs(text, stderr);
  if (level == GGML_LOG_LEVEL_CONT) {
    t_partial += text;
  } else if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) {
    t_partial = text;
  } else {
    t_partial.clear();
    return;
  }
  if (!t_partial.empty() && t_partial.back() == '\n') {
    t_partial.pop_back();
    t_recent.push_back(t_partial);
    t_partial.clear();
    if (t_recent.size() > 8) t_recent.pop_front();
  }
}

}  // namespace

void EnsureBackend() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (const char* v = std::getenv("HONE_VERBOSE"); v && *v && *v != '0') g_verbose = true;
    llama_log_set(LogCallback, nullptr);
    llama_backend_init();
  });
}

void SetVerbose(bool verbose) { g_verbose = verbose; }

std::string TakeRecentLlamaErrors() {
  std::string out;
  for (auto& line : t_recent) {
    if (!out.empty()) out += "; ";
    out += line;
  }
  t_recent.clear();
  return out;
}

std::string SystemInfo() {
  EnsureBackend();
  return llama_print_system_info();
}

bool UsesOpenMp() { return SystemInfo().find("OPENMP = 1") != std::string::npos; }

std::string LlamaVersion() {
#ifdef HONE_LLAMA_COMMIT
  return HONE_LLAMA_COMMIT;
#else
  return "unknown";
#endif
}

}  // namespace hone::engine
