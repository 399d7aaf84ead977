#include "engine/drafter.h"

#include <common.h>
#include <llama.h>
#include <speculative.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "engine/batch_decoder.h"

namespace hone::engine {
namespace {

constexpr const char* kDraftModel = "draft-simple";

std::vector<std::string> SplitModes(const std::string& mode) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= mode.size()) {
    const size_t comma = mode.find(',', start);
    std::string n = mode.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    names.push_back(n == "draft" ? kDraftModel : n);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return names;
}

// The mode list with a draft model named, or an error saying what is wrong.
Result<std::vector<std::string>> ResolveModes(const std::string& mode, bool has_draft) {
  if (mode.empty() || mode == "none") {
    if (has_draft) return std::vector<std::string>{kDraftModel};
    return MakeError(ErrorCode::kInvalidArgument, "no speculation mode");
  }
  auto names = SplitModes(mode);
  const auto known = Drafter::DraftModes();
  bool wants_draft = false;
  for (const auto& n : names) {
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return MakeError(ErrorCode::kInvalidArgument,
                       "unknown speculation mode '" + n + "' (none, auto, or one of: " + list + ")");
    }
    wants_draft = wants_draft || n == kDraftModel;
  }
  if (wants_draft && !has_draft)
    return MakeError(ErrorCode::kInvalidArgument,
                     "speculation mode draft-simple needs a draft model (--draft MODEL)");
  if (has_draft && !wants_draft) names.push_back(kDraftModel);  // --draft given: it drafts after the n-grams
  return names;
}

common_params_speculative SpecParams(const DrafterOptions& o, const std::vector<std::string>& names) {
  common_params_speculative params;
  params.types = common_speculative_types_from_names(names);
  if (o.ngram > 0) {
    const auto n = static_cast<uint16_t>(o.ngram);
    params.ngram_simple.size_n = params.ngram_map_k.size_n = params.ngram_map_k4v.size_n = n;
    params.ngram_mod.n_match = o.ngram;
  }
  if (o.draft_session) {
    params.draft.ctx_dft = o.draft_session->raw();
    params.draft.ctx_tgt = o.target ? o.target->raw() : o.draft_session->raw();
    params.draft.n_max = std::max(1, o.max_draft);
  }
  return params;
}

}  // namespace

std::string VocabularyMismatch(const Model& target, const Model& draft) {
  const llama_vocab* t = target.vocab();
  const llama_vocab* d = draft.vocab();
  if (llama_vocab_type(t) != llama_vocab_type(d)) return "the tokenizer types differ";
  if (llama_vocab_get_add_bos(t) != llama_vocab_get_add_bos(d) ||
      (llama_vocab_get_add_bos(t) && llama_vocab_bos(t) != llama_vocab_bos(d)))
    return "the beginning-of-text tokens differ";
  if (llama_vocab_get_add_eos(t) != llama_vocab_get_add_eos(d) ||
      (llama_vocab_get_add_eos(t) && llama_vocab_eos(t) != llama_vocab_eos(d)))
    return "the end-of-text tokens differ";
  const int nt = llama_vocab_n_tokens(t), nd = llama_vocab_n_tokens(d);
  // llama.cpp's own rule (common/speculative.cpp): sizes within 128 (padding),
  // and the same text for every token both have from id 5 on.
  if (std::abs(nt - nd) > 128)
    return "the vocabularies have " + std::to_string(nt) + " and " + std::to_string(nd) + " tokens";
  for (int i = 5; i < std::min(nt, nd); ++i) {
    if (std::strcmp(llama_vocab_get_text(t, i), llama_vocab_get_text(d, i)) != 0)
      return "token " + std::to_string(i) + " differs ('" + llama_vocab_get_text(t, i) + "' vs '" +
             llama_vocab_get_text(d, i) + "')";
  }
  return "";
}

std::vector<std::string> Drafter::DraftModes() {
  // The n-gram drafters need no files; draft-simple needs --draft MODEL.
  return {"ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", kDraftModel};
}

Status Drafter::CheckMode(const std::string& mode, bool has_draft_model) {
  if (mode == "auto" || mode == "none") return Status::Ok();
  if (auto r = ResolveModes(mode, has_draft_model); !r) return r.error();
  return Status::Ok();
}

Result<std::unique_ptr<Drafter>> Drafter::Create(DrafterOptions o) {
  auto names = ResolveModes(o.mode, o.draft_session != nullptr);
  if (!names) return names.error();
  if (o.ngram < 0 || o.ngram > 64)
    return MakeError(ErrorCode::kInvalidArgument, "the n-gram size must be 1..64");
  const int n_seq = std::max(1, o.n_seq);
  if (o.draft_session) {
    if (o.target) {
      if (std::string why = VocabularyMismatch(o.target->model(), o.draft_session->model()); !why.empty())
        return MakeError(ErrorCode::kInvalidArgument,
                         "the draft model " + o.draft_session->model().info().path + " cannot draft for " +
                             o.target->model().info().path + ": " + why);
    }
    if (static_cast<int>(o.draft_session->options().n_seq_max) != n_seq)
      return MakeError(ErrorCode::kInvalidArgument, "the draft model's context needs one sequence per slot");
  }
  common_params_speculative params = SpecParams(o, *names);
  common_speculative* spec = nullptr;
  try {
    spec = common_speculative_init(params, static_cast<uint32_t>(n_seq));
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("llama.cpp refused the speculation: ") + e.what());
  }
  if (!spec)
    return MakeError(ErrorCode::kInternal, "llama.cpp could not set up speculation '" + o.mode + "'");
  std::unique_ptr<Drafter> d(new Drafter());
  for (const auto& n : *names) d->mode_ += (d->mode_.empty() ? "" : ",") + n;
  d->spec_ = spec;
  d->draft_ = std::move(o.draft_session);
  d->asked_.resize(static_cast<size_t>(n_seq));
  d->drafted_.assign(static_cast<size_t>(n_seq), false);
  d->proposed_.assign(static_cast<size_t>(n_seq), 0);
  d->draft_kv_.resize(static_cast<size_t>(n_seq));
  return d;
}

Drafter::~Drafter() {
  if (spec_) common_speculative_free(spec_);
}

void Drafter::Begin(int seq, const std::vector<Token>& prompt) {
  drafted_[static_cast<size_t>(seq)] = false;
  common_speculative_begin(spec_, seq, prompt);
}

void Drafter::Ask(int seq, const std::vector<Token>& history, Token last, int n_max) {
  Asked& a = asked_[static_cast<size_t>(seq)];
  a.out.clear();
  a.asked = n_max > 0;
  if (!a.asked) return;
  a.history = &history;
  a.last = last;
  a.n_max = n_max;
}

void Drafter::CatchUpDraftModel() {
  BatchDecoder batch(*draft_, static_cast<int>(draft_->n_batch()));
  for (size_t seq = 0; seq < asked_.size(); ++seq) {
    Asked& a = asked_[seq];
    if (!a.asked) continue;
    std::vector<Token>& kv = draft_kv_[seq];
    size_t same = 0;
    while (same < kv.size() && same < a.history->size() && kv[same] == (*a.history)[same]) ++same;
    if (same < kv.size()) {
      if (!draft_->TruncateSequence(static_cast<int>(seq), static_cast<int>(same))) {
        draft_->ClearSequence(static_cast<int>(seq));
        same = 0;
      }
      kv.resize(same);
    }
    const size_t room = static_cast<size_t>(batch.capacity() - batch.size());
    const size_t take = std::min({a.history->size() - same, static_cast<size_t>(kCatchUpPerStep), room});
    for (size_t i = same; i < same + take; ++i)
      batch.Add(static_cast<int>(seq), (*a.history)[i], static_cast<int>(i), false);
    kv.insert(kv.end(), a.history->begin() + static_cast<long>(same),
              a.history->begin() + static_cast<long>(same + take));
    if (kv.size() < a.history->size()) a.asked = false;  // still behind: no draft this time
  }
  if (!batch.Decode()) {  // the draft model's KV is unknown now: start it again
    for (size_t seq = 0; seq < asked_.size(); ++seq) {
      draft_->ClearSequence(static_cast<int>(seq));
      draft_kv_[seq].clear();
      asked_[seq].asked = false;
    }
  }
}

void Drafter::NoteDraftModelKv(int seq) {
  const Asked& a = asked_[static_cast<size_t>(seq)];
  std::vector<Token>& kv = draft_kv_[static_cast<size_t>(seq)];
  // draft-simple decodes `last` and every draft but its final one; an
  // n-gram drafter that answered first decodes nothing. The KV says which.
  const int held = draft_->SequenceLength(seq);
  const size_t base = kv.size();  // the history: the catch-up made it so
  kv.push_back(a.last);
  kv.insert(kv.end(), a.out.begin(), a.out.end());
  if (held < static_cast<int>(base) || held > static_cast<int>(kv.size())) {
    draft_->ClearSequence(seq);  // not what was expected: start again
    kv.clear();
    return;
  }
  kv.resize(static_cast<size_t>(held));
}

void Drafter::DraftAsked() {
  if (draft_) CatchUpDraftModel();
  bool any = false;
  for (size_t seq = 0; seq < asked_.size(); ++seq) {
    Asked& a = asked_[seq];
    if (!a.asked) continue;
    auto& dp = common_speculative_get_draft_params(spec_, static_cast<llama_seq_id>(seq));
    dp.drafting = true;
    dp.n_max = a.n_max;
    dp.n_past = static_cast<llama_pos>(a.history->size());
    dp.id_last = a.last;
    dp.prompt = a.history;
    dp.result = &a.out;
    any = true;
  }
  if (!any) return;
  common_speculative_draft(spec_);
  for (size_t seq = 0; seq < asked_.size(); ++seq) {
    Asked& a = asked_[seq];
    if (!a.asked) continue;
    auto& dp = common_speculative_get_draft_params(spec_, static_cast<llama_seq_id>(seq));
    dp.drafting = false;
    dp.prompt = nullptr;
    dp.result = nullptr;
    if (static_cast<int>(a.out.size()) > a.n_max) a.out.resize(static_cast<size_t>(a.n_max));
    if (draft_) NoteDraftModelKv(static_cast<int>(seq));
  }
}

std::vector<Token> Drafter::Take(int seq) {
  Asked& a = asked_[static_cast<size_t>(seq)];
  std::vector<Token> out = a.asked ? std::move(a.out) : std::vector<Token>{};
  a.asked = false;
  a.out.clear();
  drafted_[static_cast<size_t>(seq)] = !out.empty();
  proposed_[static_cast<size_t>(seq)] = static_cast<int>(out.size());
  return out;
}

std::vector<Token> Drafter::Draft(int seq, const std::vector<Token>& history, Token last, int n_max) {
  Ask(seq, history, last, n_max);
  DraftAsked();
  return Take(seq);
}

void Drafter::Accept(int seq, int n_accepted) {
  if (!drafted_[static_cast<size_t>(seq)]) return;
  drafted_[static_cast<size_t>(seq)] = false;
  common_speculative_accept(spec_, seq, static_cast<uint16_t>(std::max(0, n_accepted)));
}

void Drafter::Accept(int seq, int used, int kept) {
  const int proposed = proposed_[static_cast<size_t>(seq)];
  if (used <= 0) {
    drafted_[static_cast<size_t>(seq)] = false;
    return;
  }
  // ngram-mod compares what is reported with the draft it made before any
  // trim (up to its n_max, 64): report the share kept of what was checked on
  // that scale. Other drafters take the count as it is.
  if (mode_.find("ngram-mod") != std::string::npos) {
    constexpr int kModMax = 64;
    Accept(seq, kept >= used ? std::max(proposed, kModMax) : kept * std::max(proposed, kModMax) / used);
    return;
  }
  Accept(seq, kept >= used && used < proposed ? proposed : kept);
}

}  // namespace hone::engine
