#include "serve/job.h"

namespace hone::serve {
namespace {
double Seconds(Clock::time_point a, Clock::time_point b) {
  if (a == Clock::time_point{} || b == Clock::time_point{} || b < a) return 0;
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

double JobTimings::queue_seconds() const { return Seconds(enqueued, started); }
double JobTimings::prompt_seconds() const { return Seconds(started, first_token); }
double JobTimings::gen_seconds() const { return Seconds(first_token, finished); }
double JobTimings::total_seconds() const { return Seconds(enqueued, finished); }

Job::Job(std::vector<engine::Token> p, int max, engine::SamplingOptions s, std::vector<std::string> st,
         Clock::time_point dl, std::vector<engine::Token> preserved, std::string scope)
    : prompt(std::move(p)),
      max_tokens(max),
      sampling(std::move(s)),
      stops(std::move(st)),
      deadline(dl),
      preserved_tokens(std::move(preserved)),
      cache_scope(std::move(scope)) {}

std::string Job::Take(std::chrono::milliseconds wait, bool* done) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, wait, [&] { return !pending_.empty() || finished_; });
  std::string out;
  out.swap(pending_);
  *done = finished_;
  return out;
}

std::string Job::WaitAll() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return finished_; });
  std::string out;
  out.swap(pending_);
  return out;
}

JobResult Job::result() const {
  std::lock_guard<std::mutex> lock(mu_);
  return result_;
}

void Job::Emit(const std::string& text) {
  if (text.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_ += text;
  }
  cv_.notify_all();
}

void Job::Finish(const JobResult& result) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    result_ = result;
    finished_ = true;
  }
  cv_.notify_all();
}

}  // namespace hone::serve
