#include "quant/measure.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "engine/generator.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "tune/profile.h"
#include "tune/spec_choice.h"
#include "util/stats.h"

namespace hone::quant {
namespace {

// VmHWM (peak RSS) of this process in bytes; writing "5" to clear_refs resets
// it to the current RSS, so each model's peak is measured on its own.
uint64_t ReadStatusKb(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string k;
  while (f >> k) {
    if (k == key + ":") {
      uint64_t kb = 0;
      f >> kb;
      return kb * 1024;
    }
    std::string rest;
    std::getline(f, rest);
  }
  return 0;
}

void ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

// A prompt of exactly `n` tokens for this model (its own tokenizer).
std::vector<engine::Token> SpeedPrompt(const engine::Tokenizer& tok, int n) {
  std::string text;
  std::vector<engine::Token> t;
  while (true) {
    text +=
        "Once upon a time, in a small town by the sea, there lived a girl who loved to read books about "
        "stars. ";
    auto r = tok.Encode(text, true, false);
    if (!r || r->size() >= static_cast<size_t>(n) || text.size() > 100000) {
      if (r) t = *r;
      break;
    }
  }
  if (t.size() > static_cast<size_t>(n)) t.resize(n);
  return t;
}

Status MeasureSpeed(engine::Session& s, const engine::Tokenizer& tok, const BenchOptions& opt,
                    ModelRow& row) {
  engine::GenerateRequest req;
  req.prompt = SpeedPrompt(tok, opt.prompt_tokens);
  req.max_tokens = opt.gen_tokens;
  req.ignore_eos = true;
  req.sampling.temperature = 0;
  std::vector<double> pp, tg, ttft;
  for (int rep = 0; rep <= opt.reps; ++rep) {  // rep 0 warms caches and is dropped
    s.ClearSequence(-1);
    auto r = engine::Generate(s, req);
    if (!r) return r.error();
    if (rep == 0) continue;
    pp.push_back(r->prompt_tps());
    tg.push_back(r->gen_tps());
    ttft.push_back(r->ttft_seconds * 1000);
  }
  Summary a = Summarize(pp), b = Summarize(tg), c = Summarize(ttft);
  row.prefill_tps = a.mean;
  row.prefill_ci = a.ci95;
  row.decode_tps = b.mean;
  row.decode_ci = b.ci95;
  row.ttft_ms = c.mean;
  return Status::Ok();
}

// Speculation on this model's type: a failure (a draft of another
// vocabulary) is the row's spec_error, never the row's failure.
void MeasureSpec(engine::Session& s, const engine::LoadOptions& lo, const BenchOptions& opt, ModelRow& row) {
  row.has_spec = true;
  row.spec_mode = opt.spec;
  auto option = tune::ParseSpecMode(opt.spec, !opt.draft.empty());
  if (option && option->mode == "draft-simple") {
    if (Status st = tune::CheckDraft(row.path, opt.draft); !st) option = st.error();
  }
  tune::SpecTuneRequest req;
  req.draft = opt.draft;
  req.prompts = opt.spec_prompts;
  req.gen_tokens = opt.gen_tokens;
  req.reps = opt.reps;
  auto r =
      option ? tune::MeasureSpecOption(s, lo, req, *option) : Result<tune::SpecBenchResult>(option.error());
  if (!r) {
    row.spec_error = r.error().message;
    return;
  }
  row.spec_tps = r->option.tps.mean;
  row.spec_speedup = r->option.speedup.mean;
  row.spec_speedup_ci = r->option.speedup.ci95;
  row.spec_acceptance = r->option.acceptance;
  row.spec_generations = r->generations;
  row.spec_differing = r->differing;
}

Status RunTasks(engine::Session& s, const engine::Tokenizer& tok, const std::vector<EvalItem>& items,
                ModelRow& row) {
  const bool chat = !s.model().info().chat_template.empty();
  for (const auto& it : items) {
    std::string text = it.prompt;
    if (chat) {
      auto r = tok.ApplyChatTemplate({{"user", it.prompt}}, true);
      if (r) text = *r;
    }
    auto prompt = tok.Encode(text, /*add_special=*/true, /*parse_special=*/chat);
    if (!prompt) return prompt.error();
    engine::GenerateRequest req;
    req.prompt = *prompt;
    req.max_tokens = it.max_tokens;
    req.sampling.temperature = 0;  // greedy: the same answer every run
    s.ClearSequence(-1);
    auto g = engine::Generate(s, req);
    TaskResult t{it.id, it.kind, it.lang, false, "", ""};
    if (!g) {
      t.detail = g.error().ToString();
    } else {
      t.answer = g->text;
      CheckOutcome o = RunCheck(it.check, g->text);
      t.pass = o.pass;
      t.detail = o.detail;
    }
    row.tasks.push_back(std::move(t));
  }
  return Status::Ok();
}

}  // namespace

double PageCacheResidency(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return -1;
  struct stat st;
  double share = -1;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    void* p = mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      const size_t page = sysconf(_SC_PAGESIZE);
      const size_t pages = (st.st_size + page - 1) / page;
      std::vector<unsigned char> v(pages);
      if (mincore(p, st.st_size, v.data()) == 0) {
        share =
            static_cast<double>(std::count_if(v.begin(), v.end(), [](unsigned char c) { return c & 1; })) /
            pages;
      }
      munmap(p, st.st_size);
    }
  }
  close(fd);
  return share;
}

ModelRow MeasureModel(const std::string& path, const MeasureInputs& in) {
  const BenchOptions& opt = *in.opt;
  ModelRow row;
  row.path = path;
  auto fail = [&](const Error& e) {
    row.ok = false;
    row.error = e.ToString();
    return row;
  };
  auto info = engine::InspectModel(path);
  if (!info) return fail(info.error());
  row.name = info->name;
  row.type = info->file_type;
  row.file_bytes = info->file_bytes;
  row.bpw = info->bits_per_weight;
  row.page_cache_warm = PageCacheResidency(path);
  // A profile from `hone tune` for this machine and file sets the run
  // parameters (threads, batch, pinning, load mode), unless --threads was given.
  engine::LoadOptions lo;
  engine::SessionOptions so;
  so.threads = opt.threads;
  if (opt.threads <= 0 && opt.use_profile) {
    if (auto prof = tune::FindProfile(path); prof && prof->has_value()) {
      tune::ApplyProfile(**prof, &so, &lo);
      row.profile = (*prof)->path;
    }
  }
  ResetPeakRss();
  auto model = engine::Model::Load(path, lo);
  if (!model) return fail(model.error());
  row.load_s = (*model)->load_seconds();
  row.amx = (*model)->amx_weights();
  engine::Tokenizer tok(**model);

  if (opt.flash_attn != engine::FlashAttn::kAuto) so.flash_attn = opt.flash_attn;  // over a profile's
  so.n_ctx = std::max(opt.ctx, opt.prompt_tokens + opt.gen_tokens + 8);
  // --spec: room for a prompt, the answer and drafts past it.
  if (!opt.spec.empty()) so.n_ctx = std::max<uint32_t>(so.n_ctx, 256 + opt.gen_tokens + 17);
  if (row.profile.empty()) so.n_batch = std::max<uint32_t>(so.n_ctx, 512);
  auto session = engine::Session::Create(*model, so);
  if (!session) return fail(session.error());
  if (opt.speed) {
    if (Status s = MeasureSpeed(**session, tok, opt, row); !s.ok()) return fail(s.error());
  }
  if (!opt.spec.empty()) MeasureSpec(**session, lo, opt, row);
  if (in.corpus) {
    PplOptions po{opt.ctx, opt.chunks};
    auto r = Perplexity(**session, *in.corpus, po, in.make_ref, in.ref);
    if (!r) return fail(r.error());
    row.has_ppl = true;
    row.ppl = r->ppl;
    row.ppl_err = r->ppl_error;
    row.has_kld = r->has_kld;
    row.kld = r->kld;
  }
  if (in.tasks) {
    if (Status s = RunTasks(**session, tok, *in.tasks, row); !s.ok()) return fail(s.error());
  }
  row.peak_rss = ReadStatusKb("VmHWM");
  return row;
}

}  // namespace hone::quant
