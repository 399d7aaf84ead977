// Progress reporting for long work: a redrawn bar on a terminal, a few plain
// lines (every 25%) when stderr is a pipe or file, so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace hone {

class ProgressBar {
 public:
  // label: what is being done ("loading", "writing tensors"); total: units of work.
  ProgressBar(std::string label, uint64_t total);
  ~ProgressBar();

  void Update(uint64_t done);     // absolute progress, thread-compatible (one writer)
  void UpdateFraction(double f);  // 0..1
  void Finish();                  // draws 100% and ends the line; idempotent

  static bool StderrIsTerminal();
  // Tests and --quiet runs turn all bars off.
  static void SetEnabled(bool enabled);

 private:
  void Draw(double fraction);

  std::string label_;
  uint64_t total_;
  bool tty_;
  bool finished_ = false;
  int last_quarter_ = -1;
  int last_permille_ = -1;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace hone
