#include "quant/bench.h"

#include <algorithm>
#include <filesystem>

#include "engine/model.h"
#include "engine/tokenizer.h"
#include "quant/files.h"
#include "quant/measure.h"
#include "quant/report.h"

namespace hone::quant {
namespace fs = std::filesystem;

int ModelRow::tasks_passed() const {
  return static_cast<int>(
      std::count_if(tasks.begin(), tasks.end(), [](const TaskResult& t) { return t.pass; }));
}

namespace {

Result<std::vector<std::string>> ExpandModels(const BenchOptions& opt) {
  std::vector<std::string> out = opt.models;
  if (!opt.dir.empty()) {
    if (!fs::is_directory(opt.dir)) return MakeError(ErrorCode::kNotFound, "no such folder: " + opt.dir);
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(opt.dir)) {
      if (e.is_regular_file() && e.path().extension() == ".gguf") found.push_back(e.path().string());
    }
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  if (out.empty()) return MakeError(ErrorCode::kInvalidArgument, "no models: give MODEL files or --dir DIR");
  return out;
}

// The reference: --ref, else the model with the most bits per weight.
std::string PickReference(const BenchOptions& opt, const std::vector<std::string>& models) {
  if (!opt.ref.empty()) return opt.ref;
  std::string best;
  double best_bpw = -1;
  for (const auto& m : models) {
    auto g = engine::ReadGguf(m);
    if (g && g->bits_per_weight() > best_bpw) {
      best_bpw = g->bits_per_weight();
      best = m;
    }
  }
  return best;
}

// Everything a measurement depends on besides the model file itself.
std::string SettingsKey(const BenchOptions& opt, const std::string& corpus_hash, const std::string& ref_hash,
                        const std::string& eval_hash) {
  // v2: flash attention's auto became off (engine/session.cc), which changes speeds.
  nlohmann::json k = {{"v", 2},
                      {"flash_attn", engine::FlashAttnName(opt.flash_attn)},
                      {"ctx", opt.ctx},
                      {"chunks", opt.chunks},
                      {"threads", opt.threads},
                      {"speed", opt.speed},
                      {"profile", opt.use_profile},
                      {"prompt_tokens", opt.prompt_tokens},
                      {"gen_tokens", opt.gen_tokens},
                      {"reps", opt.reps},
                      {"corpus", corpus_hash},
                      {"ref", ref_hash},
                      {"eval", eval_hash}};
  if (!opt.spec.empty()) {  // absent otherwise: rows cached before --spec existed stay valid
    k["spec"] = opt.spec;
    auto draft_hash = opt.draft.empty() ? Result<std::string>(std::string()) : HashFile(opt.draft);
    k["draft"] = draft_hash ? *draft_hash : opt.draft;
    k["spec_prompts"] = opt.spec_prompts;
  }
  return k.dump();
}

std::string CachePath(const BenchOptions& opt, const std::string& file_hash, const std::string& settings) {
  return (fs::path(opt.cache_dir) / (file_hash + "-" + HashString(settings) + ".json")).string();
}

// Validates the corpus up front (missing, empty, shorter than two windows) with
// the reference's tokenizer, so a bad corpus stops the run with one clear error.
Result<std::vector<engine::Token>> TokenizeCorpus(const BenchOptions& opt, const std::string& ref) {
  if (!fs::is_regular_file(opt.corpus))
    return MakeError(ErrorCode::kNotFound, "corpus not found: " + opt.corpus);
  if (fs::file_size(opt.corpus) == 0)
    return MakeError(ErrorCode::kInvalidArgument, "corpus " + opt.corpus + " is empty");
  if (ref.empty())
    return MakeError(ErrorCode::kInvalidArgument, "no readable model to tokenize the corpus with");
  auto model = engine::Model::Load(ref);
  if (!model) return MakeError(model.error().code, "reference " + ref + ": " + model.error().message);
  engine::Tokenizer tok(**model);
  return LoadCorpus(opt.corpus, tok, opt.ctx);
}

}  // namespace

Result<BenchResult> RunBench(const BenchOptions& opt) {
  auto models = ExpandModels(opt);
  if (!models) return models.error();
  if (opt.ctx < 8) return MakeError(ErrorCode::kInvalidArgument, "--ctx must be at least 8");
  std::vector<EvalItem> tasks;
  std::string eval_hash, corpus_hash, ref_hash;
  if (!opt.eval.empty()) {
    auto t = LoadEvalSuite(opt.eval);
    if (!t) return t.error();
    tasks = std::move(*t);
    eval_hash = HashString(ReadText(opt.eval));
  }
  BenchResult out;
  out.options = opt;
  out.ref_path = PickReference(opt, *models);
  if (!opt.ref.empty() && std::find(models->begin(), models->end(), opt.ref) == models->end()) {
    models->insert(models->begin(), opt.ref);
  }
  std::vector<engine::Token> corpus;
  if (!opt.corpus.empty()) {
    auto c = TokenizeCorpus(opt, out.ref_path);
    if (!c) return c.error();
    corpus = std::move(*c);
    corpus_hash = HashString(ReadText(opt.corpus));
    if (auto h = HashFile(out.ref_path)) ref_hash = *h;
  }
  const std::string settings = SettingsKey(opt, corpus_hash, ref_hash, eval_hash);

  // Cached rows first; the reference must be re-measured whenever some other
  // model needs its log-probabilities.
  std::vector<ModelRow> rows(models->size());
  std::vector<bool> done(models->size(), false);
  bool need_ref = false;
  for (size_t i = 0; i < models->size(); ++i) {
    const std::string& m = (*models)[i];
    if (opt.cache_dir.empty()) {
      need_ref |= m != out.ref_path;
      continue;
    }
    auto h = HashFile(m);
    if (h) {
      auto j = nlohmann::json::parse(ReadText(CachePath(opt, *h, settings)), nullptr, false);
      if (!j.is_discarded() && j.is_object()) {
        rows[i] = RowFromJson(j);
        rows[i].path = m;
        rows[i].cached = true;
        done[i] = true;
        continue;
      }
    }
    need_ref |= m != out.ref_path;
  }
  Reference ref;
  bool have_ref = false;
  auto measure = [&](size_t i, bool as_ref) {
    MeasureInputs in;
    in.opt = &opt;
    in.corpus = corpus.empty() ? nullptr : &corpus;
    in.ref = have_ref ? &ref : nullptr;
    in.make_ref = as_ref ? &ref : nullptr;
    in.tasks = tasks.empty() ? nullptr : &tasks;
    if (!opt.quiet) std::fprintf(stderr, "[bench] %s\n", (*models)[i].c_str());
    rows[i] = MeasureModel((*models)[i], in);
    rows[i].is_ref = as_ref;
    if (as_ref && rows[i].ok && rows[i].has_ppl) {
      have_ref = true;
      rows[i].has_kld = true;
      rows[i].kld = KldStats{0, 0, 0, 0, 1.0, static_cast<int>(ref.positions())};
    }
    done[i] = true;
    if (!opt.cache_dir.empty() && rows[i].ok) {
      std::error_code ec;
      fs::create_directories(opt.cache_dir, ec);
      if (auto h = HashFile((*models)[i]))
        (void)WriteTextAtomic(CachePath(opt, *h, settings), RowToJson(rows[i]).dump(1));
    }
  };
  for (size_t i = 0; i < models->size(); ++i) {
    if ((*models)[i] == out.ref_path && (need_ref || !done[i]) && !corpus.empty()) measure(i, true);
  }
  for (size_t i = 0; i < models->size(); ++i) {
    if ((*models)[i] == out.ref_path) rows[i].is_ref = true;
    if (!done[i]) measure(i, false);
  }
  out.rows = std::move(rows);
  return out;
}

}  // namespace hone::quant
