#include "cli/engine_flags.h"

#include "hw/sysfs.h"
#include "util/progress.h"

namespace hone::cli {

void EngineFlags::Register(CLI::App* cmd) {
  cmd_ = cmd;
  cmd->add_option("-c,--ctx", ctx, "Context size in tokens (0 = the model's training context)")
      ->capture_default_str();
  cmd->add_option("-b,--batch", batch, "Logical batch size (tokens per decode call)")->capture_default_str();
  cmd->add_option("-u,--ubatch", ubatch, "Physical batch size (tokens per graph)")->capture_default_str();
  cmd->add_option("-t,--threads", threads, "Threads for decode (0 = physical cores)")->capture_default_str();
  cmd->add_option("--threads-batch", threads_batch, "Threads for prefill (0 = same as --threads)")
      ->capture_default_str();
  cmd->add_option("--flash-attn", flash_attn, "Flash attention: auto, on or off")->capture_default_str();
  cmd->add_option("--kv-type", kv_type, "KV cache type: f16, q8_0, ...")->capture_default_str();
  cmd->add_option("--load-mode", load_mode, "mmap, no-mmap, mlock or mmap+mlock")->capture_default_str();
  cmd->add_flag("--no-repack", no_repack, "Keep weights in file layout (no CPU repacking, no AMX)");
  cmd->add_flag("--no-amx", no_amx,
                "Repack weights for AVX-512/AVX2 but not for Intel AMX (also HONE_AMX=off; see `hone info`)");
  cmd->add_option("--cpus", cpus, "Pin threads to these CPUs, e.g. 0-7 or 0,2,4,6");
  cmd->add_option(
      "--cpus-batch", cpus_batch,
      "Pin prefill's threads to these CPUs instead (e.g. decode on the fast cores, prefill on all)");
  cmd->add_flag("--cpu-strict", cpu_strict, "One thread per --cpus CPU, in order (strict placement)");
  cmd->add_option("--poll", poll, "Thread polling level 0-100")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
}

Result<engine::LoadOptions> EngineFlags::ToLoadOptions() const {
  engine::LoadOptions o;
  auto mode = engine::ParseLoadMode(load_mode);
  if (!mode) return mode.error();
  o.mode = *mode;
  o.repack = !no_repack;
  o.amx = !no_amx;
  return o;
}

Result<engine::SessionOptions> EngineFlags::ToSessionOptions() const {
  engine::SessionOptions o;
  if (ctx < 0 || batch <= 0 || ubatch <= 0 || threads < 0 || threads_batch < 0) {
    return MakeError(ErrorCode::kInvalidArgument, "context, batch sizes and threads must not be negative");
  }
  o.n_ctx = ctx;
  o.n_batch = batch;
  o.n_ubatch = ubatch;
  o.threads = threads;
  o.threads_batch = threads_batch;
  auto fa = engine::ParseFlashAttn(flash_attn);
  if (!fa) return fa.error();
  o.flash_attn = *fa;
  o.kv_type_k = o.kv_type_v = kv_type;
  o.poll = poll;
  if (!cpus.empty()) {
    auto list = hw::ParseCpuList(cpus);
    if (!list)
      return MakeError(ErrorCode::kInvalidArgument,
                       "--cpus: " + list.error().message + " (expected e.g. 0-3,8)");
    o.cpus = *list;
  }
  if (!cpus_batch.empty()) {
    auto list = hw::ParseCpuList(cpus_batch);
    if (!list)
      return MakeError(ErrorCode::kInvalidArgument,
                       "--cpus-batch: " + list.error().message + " (expected e.g. 0-7)");
    o.cpus_batch = *list;
  }
  o.strict_cpu = cpu_strict && !o.cpus.empty();
  return o;
}

bool EngineFlags::Given(const std::string& flag) const {
  if (!cmd_) return false;
  try {
    return cmd_->get_option(flag)->count() > 0;
  } catch (const CLI::Error&) {
    return false;
  }
}

Status EngineFlags::ReapplyExplicit(engine::SessionOptions* s, engine::LoadOptions* l) const {
  auto so = ToSessionOptions();
  if (!so) return so.error();
  auto lo = ToLoadOptions();
  if (!lo) return lo.error();
  if (Given("--batch")) s->n_batch = so->n_batch;
  if (Given("--ubatch")) s->n_ubatch = so->n_ubatch;
  if (Given("--threads")) s->threads = so->threads;
  if (Given("--threads-batch")) s->threads_batch = so->threads_batch;
  // Explicit decode threads without prefill threads mean "the same", as without a profile.
  if (Given("--threads") && !Given("--threads-batch")) s->threads_batch = so->threads_batch;
  if (Given("--flash-attn")) s->flash_attn = so->flash_attn;
  if (Given("--kv-type")) s->kv_type_k = s->kv_type_v = so->kv_type_k;
  if (Given("--cpus")) {
    s->cpus = so->cpus;
    s->strict_cpu = so->strict_cpu;
    s->cpus_batch.clear();  // an explicit set without --cpus-batch serves both phases
  }
  if (Given("--cpus-batch")) s->cpus_batch = so->cpus_batch;
  if (Given("--cpu-strict")) s->strict_cpu = so->strict_cpu;
  if (Given("--poll")) s->poll = so->poll;
  if (Given("--load-mode")) l->mode = lo->mode;
  if (Given("--no-repack")) l->repack = lo->repack;
  if (Given("--no-amx")) l->amx = lo->amx;
  return {};
}

void SamplingFlags::Register(CLI::App* cmd) {
  cmd->add_option("--temp", temp, "Temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", top_k, "Top-k (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", top_p, "Top-p (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", min_p, "Min-p (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", repeat_penalty, "Repetition penalty (1 = off)")->capture_default_str();
  cmd->add_option("--repeat-last-n", repeat_last_n, "Tokens the penalty looks back over")
      ->capture_default_str();
  cmd->add_option("--seed", seed, "RNG seed (-1 = random)")->capture_default_str();
}

engine::SamplingOptions SamplingFlags::ToOptions() const {
  engine::SamplingOptions o;
  o.temperature = temp;
  o.top_k = top_k;
  o.top_p = top_p;
  o.min_p = min_p;
  o.repeat_penalty = repeat_penalty;
  o.repeat_last_n = repeat_last_n;
  o.seed = seed < 0 ? 0xFFFFFFFFu : static_cast<uint32_t>(seed);
  return o;
}

Result<std::shared_ptr<engine::Model>> LoadModelWithProgress(const std::string& path,
                                                             const engine::LoadOptions& options, bool quiet) {
  engine::LoadOptions o = options;
  auto bar = std::make_shared<ProgressBar>("loading", 1000);
  if (!quiet) {
    o.on_progress = [bar](float f) {
      bar->UpdateFraction(f);
      return true;
    };
  }
  auto model = engine::Model::Load(path, o);
  if (model && !quiet) bar->Finish();
  return model;
}

}  // namespace hone::cli
