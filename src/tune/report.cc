#include "tune/report.h"

#include <cstdio>
#include <sstream>

#include "engine/memory_estimate.h"

namespace hone::tune {

uint64_t DecodeBytesPerToken(const engine::GgufFile& file, int ctx_tokens, const std::string& kv_type) {
  bool has_output = false;
  uint64_t embd = 0, total = 0;
  for (const engine::TensorInfo& t : file.tensors) {
    total += t.n_bytes;
    if (t.name == "output.weight") has_output = true;
    if (t.name == "token_embd.weight") embd = t.n_bytes;
  }
  uint64_t bytes = has_output ? total - embd : total;
  engine::MemoryRequest req;
  req.n_ctx = static_cast<uint32_t>(std::max(1, ctx_tokens));
  req.kv_type = kv_type;
  if (auto est = engine::EstimateMemory(file, req)) bytes += est->kv_cache;
  return bytes;
}

Roofline DecodeRoofline(uint64_t bytes_per_token, double bandwidth_gbps, double decode_tps) {
  Roofline r;
  r.bytes_per_token = bytes_per_token;
  r.bandwidth_gbps = bandwidth_gbps;
  if (bytes_per_token > 0 && bandwidth_gbps > 0) {
    r.max_tps = bandwidth_gbps * 1e9 / static_cast<double>(bytes_per_token);
    r.fraction = decode_tps / r.max_tps;
  }
  return r;
}

std::string TrialTable(const SearchResult& r) {
  std::ostringstream out;
  char line[512];
  std::snprintf(line, sizeof(line), "%4s  %-13s %-70s %4s %18s %6s %9s %9s %9s %5s %4s %7s  %s\n", "id",
                "stage", "configuration", "reps", "score ± 95% CI", "cv%", "ttft ms", "pp tok/s", "tg tok/s",
                "qual", "pin", "time s", "status");
  out << line;
  for (const Trial& t : r.trials) {
    std::string status = !t.error.empty() ? "failed: " + t.error : t.dropped ? "dropped" : "";
    if (t.config == r.best && t.stage != "drift" && t.stage != "final" && t.error.empty()) status = "best";
    double pin = -1;
    for (const Sample& s : t.samples) pin = std::max(pin, static_cast<double>(s.affinity));
    const char* pin_text = pin < 0 ? "-" : pin > 0 ? "ok" : "NO";
    std::snprintf(line, sizeof(line),
                  "%4d  %-13s %-70s %4zu %10.2f ± %-6.2f %6.1f %9.1f %9.1f %9.2f %5.2f %4s %7.1f  %s\n", t.id,
                  t.stage.c_str(), t.config.Key().c_str(), t.samples.size(), t.score.mean, t.score.ci95,
                  t.score.cv() * 100, t.mean(&Sample::ttft_s) * 1000, t.mean(&Sample::prefill_tps),
                  t.mean(&Sample::decode_tps), t.samples.empty() ? 0.0 : t.mean(&Sample::quality), pin_text,
                  t.seconds, status.c_str());
    out << line;
  }
  return out.str();
}

}  // namespace hone::tune
