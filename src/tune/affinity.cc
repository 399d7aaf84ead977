#include "tune/affinity.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace hone::tune {

Result<std::vector<int>> ParseKernelCpuList(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    part.erase(std::remove_if(part.begin(), part.end(), ::isspace), part.end());
    if (part.empty()) continue;
    size_t dash = part.find('-');
    try {
      size_t used = 0;
      int a = std::stoi(part.substr(0, dash), &used);
      if (used != (dash == std::string::npos ? part.size() : dash)) throw std::invalid_argument(part);
      int b = a;
      if (dash != std::string::npos) {
        std::string hi = part.substr(dash + 1);
        b = std::stoi(hi, &used);
        if (used != hi.size()) throw std::invalid_argument(part);
      }
      if (a < 0 || b < a) throw std::invalid_argument(part);
      for (int c = a; c <= b; ++c) cpus.push_back(c);
    } catch (...) {
      return MakeError(ErrorCode::kCorrupt, "malformed CPU list '" + text + "'");
    }
  }
  return cpus;
}

Result<std::vector<int>> CpusAllowedFromStatus(const std::string& status_text) {
  std::istringstream in(status_text);
  std::string line;
  const std::string key = "Cpus_allowed_list:";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return ParseKernelCpuList(line.substr(key.size()));
  }
  return MakeError(ErrorCode::kCorrupt, "no Cpus_allowed_list in the status file");
}

Result<std::vector<ThreadAffinity>> ReadThreadAffinities(const std::string& proc_root) {
  namespace fs = std::filesystem;
  std::vector<ThreadAffinity> out;
  std::error_code ec;
  fs::directory_iterator it(fs::path(proc_root) / "self" / "task", ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot list " + proc_root + "/self/task: " + ec.message());
  for (const fs::directory_entry& e : it) {
    std::ifstream f(e.path() / "status");
    if (!f) continue;  // the thread ended meanwhile
    std::stringstream text;
    text << f.rdbuf();
    auto cpus = CpusAllowedFromStatus(text.str());
    if (!cpus) return cpus.error();
    ThreadAffinity t;
    try {
      t.tid = std::stoi(e.path().filename().string());
    } catch (...) {
      continue;
    }
    t.cpus = *cpus;
    out.push_back(t);
  }
  std::sort(out.begin(), out.end(),
            [](const ThreadAffinity& a, const ThreadAffinity& b) { return a.tid < b.tid; });
  return out;
}

bool PlacementTookEffect(const std::vector<ThreadAffinity>& threads, const std::vector<int>& cpus,
                         int n_threads) {
  std::set<int> want(cpus.begin(), cpus.end());
  int confined = 0;
  for (const ThreadAffinity& t : threads) {
    bool inside =
        !t.cpus.empty() && std::all_of(t.cpus.begin(), t.cpus.end(), [&](int c) { return want.count(c); });
    confined += inside;
  }
  return confined >= n_threads;
}

std::vector<int> CurrentThreadCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

void SetCurrentThreadCpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

}  // namespace hone::tune
