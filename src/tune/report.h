// Human-readable output of a tune: the trial table and the memory-bandwidth
// roofline of decode speed.
#pragma once

#include <string>

#include "engine/gguf_file.h"
#include "tune/search.h"

namespace hone::tune {

// Bytes one decode step reads per sequence: every weight tensor (the token
// embedding table only when it doubles as the output matrix: otherwise a single
// row is read) plus the K and V cache up to `ctx_tokens` positions.
uint64_t DecodeBytesPerToken(const engine::GgufFile& file, int ctx_tokens, const std::string& kv_type);

struct Roofline {
  uint64_t bytes_per_token = 0;
  double bandwidth_gbps = 0;
  double max_tps = 0;   // bandwidth / bytes per token
  double fraction = 0;  // measured decode tok/s / max_tps
};
Roofline DecodeRoofline(uint64_t bytes_per_token, double bandwidth_gbps, double decode_tps);

// One row per trial: id, stage, the config, reps, score mean ± CI, CV, TTFT,
// prefill and decode speed, quality, placement check, measuring time, status.
std::string TrialTable(const SearchResult& r);

}  // namespace hone::tune
