// `hone run MODEL -p PROMPT`: load, generate, stream to stdout, report speed.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "engine/generator.h"
#include "engine/tokenizer.h"
#include "hw/probe.h"
#include "tune/profile.h"

namespace hone::cli {
namespace {

struct RunArgs {
  std::string model;
  std::string prompt;
  std::string system;
  bool chat = false;
  int n_predict = 128;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool json = false;
  bool quiet = false;
  bool no_profile = false;
  std::string spec = "auto";  // auto: the tuned profile's choice, else none
  std::string draft;
  int spec_max = 64;
  int spec_ngram = 0;
  EngineFlags engine;
  SamplingFlags sampling;
};

// A profile from `hone tune` for this machine and model file fills in the
// run parameters; flags given on the command line still win.
Status ApplyTunedProfile(RunArgs& a, engine::SessionOptions* session, engine::LoadOptions* load) {
  auto profile = tune::FindProfile(a.model);
  if (!profile) {
    if (profile.error().code != ErrorCode::kNotFound)
      std::fprintf(stderr, "[hone] ignoring the tuned profile: %s\n", profile.error().ToString().c_str());
    return {};
  }
  if (!profile->has_value()) return {};
  tune::ApplyProfile(**profile, session, load);
  const tune::SpecChoice& sc = (*profile)->spec;
  if (a.spec == "auto" && sc.measured && sc.mode != "none") {
    a.spec = sc.mode;
    if (a.draft.empty()) a.draft = sc.draft;
    if (a.spec_ngram == 0) a.spec_ngram = sc.ngram;
    a.spec_max = sc.max_draft;
  }
  if (Status s = a.engine.ReapplyExplicit(session, load); !s) return s;
  std::fprintf(stderr, "[hone] using tuned profile %s\n", (*profile)->path.c_str());
  return {};
}

// The prompt's tokens: the text as is, or (--chat) rendered with the model's
// chat template. BOS as the vocabulary wants it: the chat library strips a
// template's own leading BOS for exactly that (as llama-server tokenizes).
Result<std::vector<engine::Token>> PromptTokens(const RunArgs& a, const engine::Model& model) {
  engine::Tokenizer tok(model);
  std::string text = a.prompt;
  bool rendered = false;
  if (a.chat) {
    std::vector<engine::ChatMessage> msgs;
    if (!a.system.empty()) msgs.push_back({"system", a.system});
    msgs.push_back({"user", a.prompt});
    auto r = tok.ApplyChatTemplate(msgs, true);
    if (!r) return r.error();
    text = *r;
    rendered = true;
  }
  return tok.Encode(text, /*add_special=*/true, /*parse_special=*/rendered);
}

// The drafter for --spec and --draft (null for none): a draft model gets
// its own context, one sequence, as long as the target's.
Result<std::unique_ptr<engine::Drafter>> MakeDrafter(const RunArgs& a, const engine::Session& target,
                                                     const engine::LoadOptions& load, bool quiet) {
  std::string mode = a.spec == "auto" ? (a.draft.empty() ? "none" : "draft-simple") : a.spec;
  if (mode == "none") return std::unique_ptr<engine::Drafter>();
  engine::DrafterOptions d;
  d.mode = mode;
  d.ngram = a.spec_ngram;
  d.max_draft = a.spec_max;
  d.target = &target;
  if (Status s = engine::Drafter::CheckMode(mode, !a.draft.empty()); !s) return s.error();
  if (!a.draft.empty()) {
    auto model = LoadModelWithProgress(a.draft, load, quiet);
    if (!model) return MakeError(model.error().code, "the draft model: " + model.error().message);
    engine::SessionOptions so = target.options();
    so.kv_type_k = so.kv_type_v = "f16";
    auto session = engine::Session::Create(*model, so);
    if (!session) return MakeError(session.error().code, "the draft model: " + session.error().message);
    d.draft_session = std::move(*session);
  }
  return engine::Drafter::Create(std::move(d));
}

void PrintJson(const RunArgs& a, const engine::Model& model, const engine::Session& session,
               const engine::GenerateResult& r, const std::string& spec) {
  const engine::SessionOptions& so = session.options();
  nlohmann::json j = {{"model", a.model},
                      {"text", r.text},
                      {"stop_reason", engine::StopReasonName(r.stop_reason)},
                      {"prompt_tokens", r.n_prompt},
                      {"generated_tokens", r.tokens.size()},
                      {"load_seconds", model.load_seconds()},
                      {"prompt_seconds", r.prompt_seconds},
                      {"ttft_seconds", r.ttft_seconds},
                      {"gen_seconds", r.gen_seconds},
                      {"prompt_tps", r.prompt_tps()},
                      {"gen_tps", r.gen_tps()},
                      {"spec", spec},
                      {"draft_tokens", r.draft_tokens},
                      {"accepted_tokens", r.accepted_tokens},
                      {"threads", so.threads},
                      {"threads_batch", so.threads_batch},
                      {"n_ubatch", so.n_ubatch},
                      {"poll", so.poll},
                      {"strict_cpu", so.strict_cpu},
                      {"cpus", so.cpus},
                      {"cpus_batch", so.cpus_batch},
                      {"flash_attn", engine::FlashAttnName(so.flash_attn)},
                      {"repack", model.load_options().repack},
                      {"amx_weights", model.amx_weights()}};
  std::printf("%s\n", j.dump(2).c_str());
}

int Run(RunArgs a) {
  auto load_opts = a.engine.ToLoadOptions();
  if (!load_opts) return Fail(load_opts.error().ToString(), 2);
  auto session_opts = a.engine.ToSessionOptions();
  if (!session_opts) return Fail(session_opts.error().ToString(), 2);
  if (!a.no_profile) {
    if (Status s = ApplyTunedProfile(a, &*session_opts, &*load_opts); !s)
      return Fail(s.error().ToString(), 2);
  }

  auto model = LoadModelWithProgress(a.model, *load_opts, a.quiet || a.json);
  if (!model) return Fail(model.error().ToString());
  // Refuse a context that cannot fit before llama.cpp tries to allocate it.
  hw::ProbeOptions probe;
  probe.measure_bandwidth = false;
  if (auto machine = hw::Probe(probe)) session_opts->memory_budget_bytes = machine->usable_memory_bytes();
  auto session = engine::Session::Create(*model, *session_opts);
  if (!session) return Fail(session.error().ToString());

  auto drafter = MakeDrafter(a, **session, *load_opts, a.quiet || a.json);
  if (!drafter) return Fail("spec: " + drafter.error().ToString(), 2);
  const std::string spec = *drafter ? (*drafter)->mode() : "none";

  auto prompt = PromptTokens(a, **model);
  if (!prompt) return Fail(prompt.error().ToString());

  engine::GenerateRequest req;
  req.prompt = *prompt;
  req.max_tokens = a.n_predict;
  req.sampling = a.sampling.ToOptions();
  req.stop = a.stop;
  req.ignore_eos = a.ignore_eos;
  req.drafter = drafter->get();
  req.spec_max = a.spec_max;

  if (!a.json && !a.chat) {
    std::fputs(a.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  auto on_text = [&](std::string_view piece) {
    if (!a.json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  auto result = engine::Generate(**session, req, on_text);
  if (!result) return Fail(result.error().ToString());
  const engine::GenerateResult& r = *result;
  const engine::SessionOptions& so = (*session)->options();
  if (a.json) {
    PrintJson(a, **model, **session, r, spec);
    return 0;
  }
  std::printf("\n");
  std::fprintf(stderr,
               "\n[hone] load %.2f s | prompt %d tok, %.1f tok/s | generated %zu tok, %.1f tok/s | "
               "TTFT %.0f ms | threads %d/%d | stop: %s\n",
               (*model)->load_seconds(), r.n_prompt, r.prompt_tps(), r.tokens.size(), r.gen_tps(),
               r.ttft_seconds * 1000, so.threads, so.threads_batch, engine::StopReasonName(r.stop_reason));
  if (*drafter)
    std::fprintf(stderr, "[hone] speculation %s: %d of %d drafts kept\n", spec.c_str(), r.accepted_tokens,
                 r.draft_tokens);
  return 0;
}

}  // namespace

namespace {

Runner AddRunCommand(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt, streaming to stdout, with timings");
  cmd->add_option("model", a->model, "GGUF model file")->required();
  cmd->add_option("-p,--prompt", a->prompt, "Prompt text")->required();
  cmd->add_flag("--chat", a->chat, "Wrap the prompt in the model's chat template");
  cmd->add_option("--system", a->system, "System message (with --chat)");
  cmd->add_option("-n,--n-predict", a->n_predict, "Tokens to generate (-1 = until end)")
      ->capture_default_str();
  cmd->add_option("--stop", a->stop, "Stop string (repeatable)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "Keep generating past end-of-sequence (benchmarks)");
  cmd->add_flag("--json", a->json, "Print one JSON object with text and timings instead of streaming");
  cmd->add_flag("-q,--quiet", a->quiet, "No progress bar");
  cmd->add_flag("--no-profile", a->no_profile,
                "Ignore the profile `hone tune` saved for this machine and model");
  cmd->add_option("--spec", a->spec,
                  "Speculative decoding: auto (the tuned profile's choice), none, ngram-simple, ngram-map-k, "
                  "ngram-map-k4v, ngram-mod, draft-simple (with --draft) or a list")
      ->capture_default_str();
  cmd->add_option("--draft", a->draft,
                  "Draft model (GGUF with the target's vocabulary) for speculative decoding");
  cmd->add_option("--spec-max", a->spec_max, "Most draft tokens per step")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--spec-ngram", a->spec_ngram, "Tokens the n-gram lookup matches (0 = llama.cpp's default)")
      ->check(CLI::Range(0, 64));
  a->engine.Register(cmd);
  a->sampling.Register(cmd);
  return [a]() { return Run(*a); };
}

const CommandRegistrar kRegistrar(30, &AddRunCommand);

}  // namespace

}  // namespace hone::cli
