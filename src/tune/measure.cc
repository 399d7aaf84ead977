#include "tune/measure.h"

#include <algorithm>
#include <chrono>

#include "engine/batch_decoder.h"
#include "engine/generator.h"
#include "tune/affinity.h"

namespace hone::tune {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A fixed prompt: ordinary prose repeated, so every trial sees the same tokens.
Result<std::vector<engine::Token>> MakePrompt(const engine::Model& model, int n) {
  engine::Tokenizer tok(model);
  std::string text;
  std::vector<engine::Token> out;
  while (static_cast<int>(out.size()) < n) {
    text +=
        "The old lighthouse keeper climbed the stairs each evening, counting the steps and listening to the "
        "sea. ";
    auto t = tok.Encode(text, /*add_special=*/true, /*parse_special=*/false);
    if (!t) return t.error();
    out = *t;
    if (text.size() > 1000000) return MakeError(ErrorCode::kInternal, "the tokenizer produced no tokens");
  }
  out.resize(n);
  return out;
}

engine::GenerateRequest Request(const std::vector<engine::Token>& prompt, int gen, int seq) {
  engine::GenerateRequest r;
  r.prompt = prompt;
  r.max_tokens = gen;
  r.sampling.temperature = 0;  // greedy: deterministic, and comparable across KV types
  r.ignore_eos = true;
  r.seq = seq;
  return r;
}

double Agreement(const std::vector<engine::Token>& ref, const std::vector<engine::Token>& got) {
  if (ref.empty()) return 1;
  size_t same = 0;
  while (same < ref.size() && same < got.size() && ref[same] == got[same]) ++same;
  return static_cast<double>(same) / ref.size();
}

}  // namespace

std::string ObjectiveDescription(Workload w) {
  switch (w) {
    case Workload::kChat:
      return "chat: (prompt + generated tokens) / time to answer, tok/s (ranks by time to answer)";
    case Workload::kBatch:
      return "batch: prefill + decode throughput over all sequences, tok/s";
    case Workload::kServer:
      return "server: aggregate generated tok/s over the concurrent sequences (per-stream floor applies)";
  }
  return "";
}

Measurer::Measurer(std::string model_path, WorkloadSpec spec)
    : path_(std::move(model_path)),
      spec_(spec),
      guard_(IsolationOptions{spec.isolate_with, path_, spec.prompt_tokens}),
      main_cpus_(CurrentThreadCpus()) {}

Measurer::~Measurer() {
  session_.reset();
  SetCurrentThreadCpus(main_cpus_);
}

Status Measurer::Prepare(const Config& c) {
  if (session_ && session_key_ == c.Key()) return {};
  session_.reset();
  session_key_.clear();
  SetCurrentThreadCpus(main_cpus_);  // ggml pinned the main thread for the previous trial
  if (!model_ || !model_config_.SameModel(c)) {
    model_.reset();  // free the old weights before loading the new layout
    auto m = engine::Model::Load(path_, c.ToLoadOptions());
    if (!m) return m.error();
    model_ = *m;
    model_config_ = c;
    if (prompt_.empty()) {
      auto p = MakePrompt(*model_, spec_.prompt_tokens);
      if (!p) return p.error();
      prompt_ = *p;
    }
  }
  // spec_.n_ctx holds every concurrent sequence; fewer slots need fewer cells.
  const uint32_t per_seq = spec_.n_ctx / std::max(1, spec_.concurrency);
  const uint32_t slots = std::min(std::max(1, c.n_parallel), std::max(1, spec_.concurrency));
  engine::SessionOptions so = c.ToSessionOptions((per_seq * slots + 255) / 256 * 256);
  so.memory_budget_bytes = spec_.memory_budget;
  auto s = engine::Session::Create(model_, so);
  if (!s) return s.error();
  session_ = std::move(*s);
  session_key_ = c.Key();
  // Warm-up: fault in the weights, spin up the pools, size the compute buffers.
  std::vector<engine::Token> head(prompt_.begin(),
                                  prompt_.begin() + std::min<size_t>(prompt_.size(), c.n_ubatch));
  auto w = engine::Generate(*session_, Request(head, 4, 0));
  if (!w) {
    session_.reset();
    session_key_.clear();
    return w.error();
  }
  return {};
}

Result<Sample> Measurer::RunSingle() {
  auto t0 = Clock::now();
  auto r = engine::Generate(*session_, Request(prompt_, spec_.gen_tokens, 0));
  if (!r) return r.error();
  Sample s;
  s.seconds = Since(t0);
  double answer = r->ttft_seconds + r->gen_seconds;
  s.ttft_s = r->ttft_seconds;
  s.prefill_tps = r->prompt_tps();
  s.decode_tps = r->gen_tps();
  s.score = answer > 0 ? (r->n_prompt + r->tokens.size()) / answer : 0;
  s.score_seconds = answer;
  if (reference_.empty() && session_->options().kv_type_k == "f16") reference_ = r->tokens;
  if (session_->options().kv_type_k != "f16") s.quality = Agreement(reference_, r->tokens);
  return s;
}

// All `concurrency` requests, served by the session's slots: in waves of
// n_parallel when there are fewer slots than requests (as a server queues them).
Result<Sample> Measurer::RunParallel() {
  const int slots = std::max(1, static_cast<int>(session_->options().n_seq_max));
  auto t0 = Clock::now();
  double decode_s = 0, prefill_s = 0, ttft_sum = 0, stream_tps_sum = 0;
  size_t prompt_tok = 0, gen_tok = 0, after_first = 0, streams = 0;
  std::vector<engine::Token> first;
  for (int done = 0; done < spec_.concurrency;) {
    const int n = std::min(slots, spec_.concurrency - done);
    std::vector<engine::GenerateRequest> reqs;
    for (int i = 0; i < n; ++i) reqs.push_back(Request(prompt_, spec_.gen_tokens, i));
    const double queued = Since(t0);  // this wave's requests waited for the previous waves
    auto r = engine::GenerateParallel(*session_, reqs);
    if (!r) return r.error();
    double wall = 0, prefilled = 0;
    size_t wave_after_first = 0;
    for (const engine::GenerateResult& g : *r) {
      wall = std::max(wall, g.gen_seconds);  // GenerateParallel's gen_seconds run from its start
      prefilled = std::max(prefilled, g.ttft_seconds);
      ttft_sum += queued + g.ttft_seconds;
      prompt_tok += g.n_prompt;
      gen_tok += g.tokens.size();
      wave_after_first += g.tokens.size() - 1;
    }
    if (first.empty()) first = (*r)[0].tokens;
    decode_s += wall - prefilled;
    prefill_s += prefilled;
    after_first += wave_after_first;
    if (wall > prefilled) stream_tps_sum += static_cast<double>(wave_after_first) / (wall - prefilled);
    streams += n;
    done += n;
  }
  Sample s;
  s.seconds = Since(t0);
  s.ttft_s = ttft_sum / spec_.concurrency;
  s.prefill_tps = prefill_s > 0 ? prompt_tok / prefill_s : 0;
  s.decode_tps = streams > 0 ? stream_tps_sum / streams : 0;  // per stream
  if (spec_.workload == Workload::kBatch) {
    s.score = s.seconds > 0 ? (prompt_tok + gen_tok) / s.seconds : 0;
    s.score_seconds = s.seconds;
  } else {
    s.score = decode_s > 0 ? after_first / decode_s : 0;
    s.score_seconds = decode_s;
    if (spec_.min_stream_tps > 0 && s.decode_tps < spec_.min_stream_tps) {
      return MakeError(ErrorCode::kUnsupported, "each stream decodes at " + std::to_string(s.decode_tps) +
                                                    " tok/s, below the floor of " +
                                                    std::to_string(spec_.min_stream_tps));
    }
  }
  if (reference_.empty() && session_->options().kv_type_k == "f16") reference_ = first;
  if (session_->options().kv_type_k != "f16") s.quality = Agreement(reference_, first);
  return s;
}

Result<Sample> Measurer::RunWorkload() {
  return spec_.workload == Workload::kChat ? RunSingle() : RunParallel();
}

Result<Sample> Measurer::RunOnce(const Config& c) {
  // A tiny model repeats the workload many times per repetition: the score is
  // total work over total time (runs weighted by their time), not a mean of
  // ratios, which a run with a near-zero denominator would swamp.
  Sample sum;
  sum.quality = 1;
  int n = 0;
  double weighted = 0, weight = 0;
  auto t0 = Clock::now();
  do {
    auto s = RunWorkload();
    if (!s) return s.error();
    sum.score += s->score;
    weighted += s->score * s->score_seconds;
    weight += s->score_seconds;
    sum.ttft_s += s->ttft_s;
    sum.prefill_tps += s->prefill_tps;
    sum.decode_tps += s->decode_tps;
    sum.quality = std::min(sum.quality, s->quality);
    ++n;
  } while (Since(t0) < spec_.min_rep_seconds && n < 1000);
  Sample s = sum;
  s.score = weight > 0 ? weighted / weight : s.score / n;
  s.ttft_s /= n;
  s.prefill_tps /= n;
  s.decode_tps /= n;
  s.seconds = Since(t0);
  if (!c.cpus.empty()) {
    // The pools' threads are alive (sleeping or polling) while the session lives.
    auto threads = ReadThreadAffinities();
    std::vector<int> placed = c.cpus;
    placed.insert(placed.end(), c.cpus_batch.begin(), c.cpus_batch.end());
    s.affinity =
        threads && PlacementTookEffect(*threads, placed, std::max(c.threads, c.threads_batch)) ? 1 : 0;
  }
  return s;
}

Result<std::vector<Sample>> Measurer::Measure(const Config& c, int reps) {
  std::vector<Sample> out;
  if (Status safe = guard_.Check(c); !safe) return safe.error();
  Status st = Prepare(c);
  if (st) {
    for (int i = 0; i < reps; ++i) {
      auto s = RunOnce(c);
      if (!s) {
        st = s.error();
        break;
      }
      out.push_back(*s);
    }
  }
  SetCurrentThreadCpus(main_cpus_);
  if (!st) {
    session_.reset();
    session_key_.clear();
    return st.error();
  }
  return out;
}

}  // namespace hone::tune
