#include "hw/bandwidth.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "util/stats.h"

namespace hone::hw {
namespace {

using Clock = std::chrono::steady_clock;

// Sums land here so the compiler must perform every read.
volatile uint64_t g_sink = 0;

// Four independent accumulators break the add dependency chain, so the loop
// runs at load throughput; -O2/-O3 turn it into wide vector loads.
uint64_t SumWords(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  for (; i < n; ++i) a += p[i];
  return a + b + c + d;
}

// Best effort: in a restricted cpuset the kernel may refuse, and the thread
// then floats, which costs accuracy but not correctness.
void PinSelf(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Result<Bandwidth> MeasureReadBandwidth(const BandwidthOptions& options) {
  const int threads = options.threads;
  if (threads < 1 || threads > 4096) {
    return MakeError(ErrorCode::kInvalidArgument, "bandwidth: bad thread count " + std::to_string(threads));
  }
  // Whole cache lines per thread, at least a page each.
  const size_t words_per_thread = options.buffer_bytes / threads / 64 * 8;
  if (words_per_thread < 512) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "bandwidth: buffer too small for " + std::to_string(threads) + " threads");
  }
  const size_t bytes = words_per_thread * 8 * threads;
  // 2 MiB alignment lets the kernel back the buffer with transparent huge
  // pages: far fewer faults while filling and fewer TLB misses while reading.
  const size_t huge = 2u << 20;
  const size_t alloc_bytes = (bytes + huge - 1) / huge * huge;
  std::unique_ptr<uint64_t, decltype(&std::free)> buffer(
      static_cast<uint64_t*>(std::aligned_alloc(huge, alloc_bytes)), &std::free);
  if (!buffer) {
    return MakeError(ErrorCode::kOutOfMemory,
                     "bandwidth: cannot allocate " + std::to_string(bytes) + " bytes");
  }
  madvise(buffer.get(), alloc_bytes, MADV_HUGEPAGE);  // a hint; failure only costs speed

  const Clock::time_point start = Clock::now();
  // Phases: one for filling, then start/end pairs per run; the last start
  // phase with `stop` set releases the workers.
  std::barrier sync(threads + 1);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sink{0};
  std::vector<std::thread> workers;
  auto work = [&](int t) {
    if (t < static_cast<int>(options.pin_cpus.size())) PinSelf(options.pin_cpus[t]);
    uint64_t* chunk = buffer.get() + t * words_per_thread;
    // Each thread writes its own chunk first: on NUMA machines the first touch
    // places the pages on the node of the core that will read them.
    for (size_t i = 0; i < words_per_thread; ++i) chunk[i] = i;
    sync.arrive_and_wait();
    while (true) {
      sync.arrive_and_wait();
      if (stop.load()) return;
      sink.fetch_add(SumWords(chunk, words_per_thread), std::memory_order_relaxed);
      sync.arrive_and_wait();
    }
  };
  try {
    workers.reserve(threads);
    for (int t = 0; t < threads; ++t) workers.emplace_back(work, t);
  } catch (const std::exception&) {
    // Out of threads: the missing ones leave the barrier and the run goes on
    // with those that started (their chunks only).
  }
  const int started = static_cast<int>(workers.size());
  for (int t = started; t < threads; ++t) sync.arrive_and_drop();
  sync.arrive_and_wait();  // buffer filled

  std::vector<double> gbps;
  const double run_bytes = 8.0 * words_per_thread * started;
  double last_run = 0;
  for (int run = 0; started > 0; ++run) {
    double elapsed = Seconds(Clock::now() - start);
    if (run > 3 && (elapsed + last_run > options.seconds || run > 1000)) break;
    Clock::time_point t0 = Clock::now();
    sync.arrive_and_wait();  // go
    sync.arrive_and_wait();  // all threads done
    last_run = Seconds(Clock::now() - t0);
    // Run 0 warms TLBs and wakes the cores from idle clocks; it is not counted.
    if (run > 0) gbps.push_back(run_bytes / last_run / 1e9);
  }
  stop.store(true);
  sync.arrive_and_wait();
  for (std::thread& w : workers) w.join();
  g_sink = sink.load();
  if (started == 0) return MakeError(ErrorCode::kInternal, "bandwidth: could not start any thread");

  Summary s = Summarize(gbps);
  Bandwidth result;
  result.read_gbps = s.max;
  result.read_gbps_mean = s.mean;
  result.read_gbps_ci95 = s.ci95;
  result.threads = started;
  result.buffer_bytes = static_cast<uint64_t>(run_bytes);
  result.runs = s.n;
  return result;
}

}  // namespace hone::hw
