#include "util/progress.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace hone {
namespace {
std::atomic<bool> g_enabled{true};
}

bool ProgressBar::StderrIsTerminal() { return isatty(STDERR_FILENO) == 1; }
void ProgressBar::SetEnabled(bool enabled) { g_enabled = enabled; }

ProgressBar::ProgressBar(std::string label, uint64_t total)
    : label_(std::move(label)),
      total_(total ? total : 1),
      tty_(StderrIsTerminal()),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() {
  // An unfinished bar on a terminal still needs its line ended.
  if (!finished_ && tty_ && last_permille_ >= 0 && g_enabled) std::fputc('\n', stderr);
}

void ProgressBar::Update(uint64_t done) { UpdateFraction(static_cast<double>(done) / total_); }

void ProgressBar::UpdateFraction(double f) {
  if (finished_ || !g_enabled) return;
  if (f < 0) f = 0;
  if (f > 1) f = 1;
  Draw(f);
}

void ProgressBar::Finish() {
  if (finished_) return;
  UpdateFraction(1.0);
  finished_ = true;
  if (tty_ && g_enabled) std::fputc('\n', stderr);
}

void ProgressBar::Draw(double f) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!tty_) {
    // Logs only want to hear about work long enough to wonder about.
    if (secs < 1.0) return;
    int quarter = static_cast<int>(f * 4);
    if (quarter == last_quarter_) return;
    last_quarter_ = quarter;
    std::fprintf(stderr, "%s: %3d%% (%.1fs)\n", label_.c_str(), quarter * 25, secs);
    return;
  }
  int permille = static_cast<int>(f * 1000);
  if (permille == last_permille_) return;
  last_permille_ = permille;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(f * kWidth);
  std::string bar(filled, '#');
  bar.append(kWidth - filled, '.');
  std::fprintf(stderr, "\r%s [%s] %5.1f%% %6.1fs", label_.c_str(), bar.c_str(), f * 100, secs);
  std::fflush(stderr);
}

}  // namespace hone
