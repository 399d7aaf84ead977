// `hone inspect MODEL`: metadata, tensor types and the RAM a context needs,
// read from the GGUF header alone (no weights are loaded).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/memory_estimate.h"
#include "engine/model.h"
#include "util/format.h"

namespace hone::cli {
namespace {

struct InspectArgs {
  std::string model;
  int ctx = 4096;
  int ubatch = 512;
  int parallel = 1;
  std::string kv_type = "f16";
  bool flash_attn = false;
  bool json = false;
};

}  // namespace

namespace {

Runner AddInspectCommand(CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a model's metadata, tensor types and memory needs");
  cmd->add_option("model", a->model, "GGUF model file")->required();
  cmd->add_option("-c,--ctx", a->ctx, "Context size for the memory estimate")->capture_default_str();
  cmd->add_option("-u,--ubatch", a->ubatch, "Physical batch size for the estimate")->capture_default_str();
  cmd->add_option("--parallel", a->parallel, "Parallel sequences")->capture_default_str();
  cmd->add_option("--kv-type", a->kv_type, "KV cache type")->capture_default_str();
  cmd->add_flag("--flash-attn", a->flash_attn, "Estimate with flash attention on");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  return [a]() {
    auto g = engine::ReadGguf(a->model);
    if (!g) return Fail(g.error().ToString());
    auto info = engine::InspectModel(a->model);
    if (!info) return Fail(info.error().ToString());
    if (a->ctx <= 0) return Fail("--ctx must be positive", 2);
    engine::MemoryRequest req{static_cast<uint32_t>(a->ctx), static_cast<uint32_t>(a->ubatch),
                              static_cast<uint32_t>(a->parallel), a->kv_type, a->flash_attn};
    auto mem = engine::EstimateMemory(*g, req);
    if (!mem) return Fail(mem.error().ToString());
    const engine::ModelInfo& m = *info;
    if (a->json) {
      nlohmann::json j;
      j["path"] = m.path;
      j["name"] = m.name;
      j["architecture"] = m.architecture;
      j["file_type"] = m.file_type;
      j["n_params"] = m.n_params;
      j["file_bytes"] = m.file_bytes;
      j["bits_per_weight"] = m.bits_per_weight;
      j["n_ctx_train"] = m.n_ctx_train;
      j["n_embd"] = m.n_embd;
      j["n_layer"] = m.n_layer;
      j["n_head"] = m.n_head;
      j["n_head_kv"] = m.n_head_kv;
      j["n_vocab"] = m.n_vocab;
      j["synthetic"] = m.synthetic;
      j["chat_template"] = m.chat_template;
      for (auto& [type, s] : m.type_histogram) {
        j["tensor_types"][type] = {{"tensors", s.tensors}, {"elements", s.elements}, {"bytes", s.bytes}};
      }
      j["memory"] = {{"ctx", a->ctx},           {"kv_type", a->kv_type},
                     {"weights", mem->weights}, {"kv_cache", mem->kv_cache},
                     {"compute", mem->compute}, {"output", mem->output},
                     {"total", mem->total()}};
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    std::printf("Model        %s\n", m.name.c_str());
    std::printf("File         %s (%s)\n", m.path.c_str(), FormatBytes(m.file_bytes).c_str());
    std::printf("Architecture %s%s\n", m.architecture.c_str(), m.synthetic ? " (synthetic weights)" : "");
    std::printf("File type    %s, %.2f bits per weight\n", m.file_type.c_str(), m.bits_per_weight);
    std::printf("Parameters   %s (%llu)\n", FormatCount(m.n_params).c_str(), (unsigned long long)m.n_params);
    std::printf("Shape        n_embd %d, %d layers, %d heads, %d KV heads, vocab %d, trained ctx %d\n",
                m.n_embd, m.n_layer, m.n_head, m.n_head_kv, m.n_vocab, m.n_ctx_train);
    std::printf("Chat         %s\n", m.chat_template.empty() ? "no template" : "has a chat template");
    std::printf("Tensor types\n");
    for (auto& [type, s] : m.type_histogram) {
      std::printf("  %-8s %4d tensors %12s  %5.1f%% of weights\n", type.c_str(), s.tensors,
                  FormatBytes(s.bytes).c_str(), m.tensor_bytes ? 100.0 * s.bytes / m.tensor_bytes : 0.0);
    }
    std::printf("Memory at ctx %d (KV %s%s, ubatch %d)\n", a->ctx, a->kv_type.c_str(),
                a->flash_attn ? ", flash attention" : "", a->ubatch);
    std::printf("  weights  %s\n  KV cache %s\n  compute  %s\n  output   %s\n  total    %s\n",
                FormatBytes(mem->weights).c_str(), FormatBytes(mem->kv_cache).c_str(),
                FormatBytes(mem->compute).c_str(), FormatBytes(mem->output).c_str(),
                FormatBytes(mem->total()).c_str());
    return 0;
  };
}

const CommandRegistrar kRegistrar(20, &AddInspectCommand);

}  // namespace

}  // namespace hone::cli
