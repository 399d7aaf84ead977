#include "engine/drafter.h"

#include <common.h>
#include <speculative.h>

#include <algorithm>

namespace hone::engine {

std::vector<std::string> Drafter::DraftModes() {
  // The n-gram drafters that need no files and no second model.
  return {"ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod"};
}

Result<std::unique_ptr<Drafter>> Drafter::Create(const std::string& mode, int n_seq, int ngram) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= mode.size()) {
    const size_t comma = mode.find(',', start);
    names.push_back(mode.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const auto known = DraftModes();
  for (const auto& n : names) {
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return MakeError(ErrorCode::kInvalidArgument,
                       "unknown speculation mode '" + n + "' (none, or one of: " + list + ")");
    }
  }
  common_params_speculative params;
  params.types = common_speculative_types_from_names(names);
  if (ngram > 0) {
    if (ngram > 64) return MakeError(ErrorCode::kInvalidArgument, "the n-gram size must be 1..64");
    const auto n = static_cast<uint16_t>(ngram);
    params.ngram_simple.size_n = params.ngram_map_k.size_n = params.ngram_map_k4v.size_n = n;
    params.ngram_mod.n_match = ngram;
  }
  common_speculative* spec = common_speculative_init(params, static_cast<uint32_t>(std::max(1, n_seq)));
  if (!spec) return MakeError(ErrorCode::kInternal, "llama.cpp could not set up speculation '" + mode + "'");
  std::unique_ptr<Drafter> d(new Drafter());
  d->mode_ = mode;
  d->spec_ = spec;
  d->drafted_.assign(static_cast<size_t>(std::max(1, n_seq)), false);
  return d;
}

Drafter::~Drafter() {
  if (spec_) common_speculative_free(spec_);
}

void Drafter::Begin(int seq, const std::vector<Token>& prompt) {
  drafted_[static_cast<size_t>(seq)] = false;
  common_speculative_begin(spec_, seq, prompt);
}

std::vector<Token> Drafter::Draft(int seq, const std::vector<Token>& history, Token last, int n_max) {
  std::vector<Token> out;
  if (n_max <= 0) return out;
  auto& dp = common_speculative_get_draft_params(spec_, seq);
  dp.drafting = true;
  dp.n_max = n_max;
  dp.n_past = static_cast<llama_pos>(history.size());
  dp.id_last = last;
  dp.prompt = &history;
  dp.result = &out;
  // Drafts for every sequence marked drafting: one at a time here, since the
  // n-gram drafters are lookups in the sequence's own history.
  common_speculative_draft(spec_);
  dp.prompt = nullptr;
  dp.result = nullptr;
  if (static_cast<int>(out.size()) > n_max) out.resize(static_cast<size_t>(n_max));
  drafted_[static_cast<size_t>(seq)] = !out.empty();
  return out;
}

void Drafter::Accept(int seq, int n_accepted) {
  if (!drafted_[static_cast<size_t>(seq)]) return;
  drafted_[static_cast<size_t>(seq)] = false;
  common_speculative_accept(spec_, seq, static_cast<uint16_t>(std::max(0, n_accepted)));
}

}  // namespace hone::engine
