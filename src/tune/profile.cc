#include "tune/profile.h"

#include <toml++/toml.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "hw/probe.h"
#include "util/file_hash.h"

namespace hone::tune {

Result<std::string> ModelHash(const std::string& path) { return ModelFileHash(path); }

std::string ProfileDir() {
  if (const char* d = std::getenv("HONE_PROFILE_DIR"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.config/hone/profiles";
}

std::string ProfilePath(const std::string& fingerprint, const std::string& model_hash) {
  return ProfileDir() + "/" + fingerprint + "-" + model_hash + ".toml";
}

nlohmann::json ConfigJson(const Config& c) {
  return {{"threads", c.threads},
          {"threads_batch", c.threads_batch},
          {"placement", c.placement},
          {"cpus", c.cpus},
          {"placement_batch", c.placement_batch},
          {"cpus_batch", c.cpus_batch},
          {"strict_cpu", c.strict_cpu},
          {"poll", c.poll},
          {"n_batch", c.n_batch},
          {"n_ubatch", c.n_ubatch},
          {"flash_attn", engine::FlashAttnName(c.flash_attn)},
          {"kv_type", c.kv_type},
          {"load_mode", engine::LoadModeName(c.load_mode)},
          {"repack", c.repack},
          {"amx", c.amx},
          {"n_parallel", c.n_parallel}};
}

namespace {

// The profile's [params]: ConfigJson's fields, so the file and `hone tune
// --json` can never list different parameters.
toml::table ParamsTable(const Config& c) {
  toml::table t;
  const nlohmann::json fields = ConfigJson(c);  // named: items() of a temporary would dangle
  for (const auto& [key, v] : fields.items()) {
    if (v.is_boolean()) {
      t.insert(key, v.get<bool>());
    } else if (v.is_number_integer()) {
      t.insert(key, v.get<int64_t>());
    } else if (v.is_string()) {
      t.insert(key, v.get<std::string>());
    } else if (v.is_array()) {
      toml::array a;
      for (const auto& x : v) a.push_back(x.get<int64_t>());
      t.insert(key, std::move(a));
    }
  }
  return t;
}

}  // namespace

std::string ProfileToToml(const Profile& p) {
  toml::table t{
      {"profile", toml::table{{"version", p.version},
                              {"fingerprint", p.fingerprint},
                              {"model_hash", p.model_hash},
                              {"model_path", p.model_path},
                              {"workload", p.workload},
                              {"created", p.created},
                              {"prompt_tokens", p.prompt_tokens},
                              {"gen_tokens", p.gen_tokens},
                              {"concurrency", p.concurrency}}},
      {"params", ParamsTable(p.config)},
      {"result", toml::table{{"objective", p.objective},
                             {"best_score", p.best_score},
                             {"default_score", p.default_score},
                             {"speedup", p.speedup},
                             {"speedup_ci95", p.speedup_ci95}}},
      {"llama_cpp", toml::table{{"llama_server", p.llama_server_flags}, {"llama_cli", p.llama_cli_flags}}},
  };
  if (p.spec.measured) {
    toml::array curve;
    for (double x : p.spec.cost_curve) curve.push_back(x);
    t.insert("speculation", toml::table{{"mode", p.spec.mode},
                                        {"draft", p.spec.draft},
                                        {"ngram", p.spec.ngram},
                                        {"max_draft", p.spec.max_draft},
                                        {"speedup", p.spec.speedup},
                                        {"acceptance", p.spec.acceptance},
                                        {"cost_curve", std::move(curve)}});
  }
  std::ostringstream out;
  out << "# hone tune profile: run parameters measured fastest on this machine for this model file.\n"
      << t << "\n";
  return out.str();
}

namespace {

template <class T>
Status Need(const toml::table& t, const char* section, const char* key, T* out) {
  auto v = t[section][key].value<T>();
  if (!v)
    return MakeError(ErrorCode::kCorrupt, std::string("profile: missing or mistyped ") + section + "." + key);
  *out = *v;
  return {};
}

// The [speculation] table `hone tune` writes: which drafter won and what it measured.
Result<SpecChoice> SpecFromToml(const toml::table& sp) {
  SpecChoice spec;
  spec.measured = true;
  spec.mode = sp["mode"].value_or(std::string("none"));
  spec.draft = sp["draft"].value_or(std::string());
  spec.ngram = static_cast<int>(sp["ngram"].value_or(int64_t{0}));
  spec.max_draft = static_cast<int>(sp["max_draft"].value_or(int64_t{64}));
  spec.speedup = sp["speedup"].value_or(1.0);
  spec.acceptance = sp["acceptance"].value_or(0.0);
  if (const toml::array* a = sp["cost_curve"].as_array())
    for (const toml::node& n : *a) spec.cost_curve.push_back(n.value_or(0.0));
  if (spec.ngram < 0 || spec.ngram > 64 || spec.max_draft < 1)
    return MakeError(ErrorCode::kCorrupt, "profile: speculation.ngram or max_draft out of range");
  return spec;
}

// toml++ reports parse errors by exception or by value, depending on how it
// was configured; exceptions must not leave this module either way.
Result<toml::table> ParseProfileText(const std::string& text) {
#if TOML_EXCEPTIONS
  try {
    return toml::parse(text);
  } catch (const toml::parse_error& e) {
    std::ostringstream why;
    why << e.description() << " at line " << e.source().begin.line;
    return MakeError(ErrorCode::kCorrupt, "profile is not valid TOML: " + why.str());
  }
#else
  toml::parse_result parsed = toml::parse(text);
  if (!parsed) {
    std::ostringstream why;
    why << parsed.error().description() << " at line " << parsed.error().source().begin.line;
    return MakeError(ErrorCode::kCorrupt, "profile is not valid TOML: " + why.str());
  }
  return std::move(parsed).table();
#endif
}

}  // namespace

Result<Profile> ProfileFromToml(const std::string& text) {
  auto parsed = ParseProfileText(text);
  if (!parsed) return parsed.error();
  toml::table t = std::move(*parsed);
  Profile p;
  Config& c = p.config;
  std::string fa, load;
  int64_t i64[9];
  for (Status s : {Need(t, "profile", "version", &i64[0]), Need(t, "profile", "fingerprint", &p.fingerprint),
                   Need(t, "profile", "model_hash", &p.model_hash),
                   Need(t, "profile", "workload", &p.workload), Need(t, "params", "threads", &i64[1]),
                   Need(t, "params", "threads_batch", &i64[2]), Need(t, "params", "placement", &c.placement),
                   Need(t, "params", "strict_cpu", &c.strict_cpu), Need(t, "params", "poll", &i64[3]),
                   Need(t, "params", "n_batch", &i64[4]), Need(t, "params", "n_ubatch", &i64[5]),
                   Need(t, "params", "flash_attn", &fa), Need(t, "params", "kv_type", &c.kv_type),
                   Need(t, "params", "load_mode", &load), Need(t, "params", "repack", &c.repack)}) {
    if (!s) return s.error();
  }
  p.version = static_cast<int>(i64[0]);
  c.threads = static_cast<int>(i64[1]);
  c.threads_batch = static_cast<int>(i64[2]);
  c.poll = static_cast<int>(i64[3]);
  c.n_batch = static_cast<int>(i64[4]);
  c.n_ubatch = static_cast<int>(i64[5]);
  c.n_parallel = static_cast<int>(t["params"]["n_parallel"].value_or(int64_t{1}));
  c.amx = t["params"]["amx"].value_or(true);  // profiles from before AMX was searched: the default
  if (c.threads < 1 || c.threads_batch < 1 || c.n_batch < 1 || c.n_ubatch < 1 || c.poll < 0 || c.poll > 100) {
    return MakeError(ErrorCode::kCorrupt, "profile: threads, batch sizes or poll out of range");
  }
  // Profiles from before prefill had its own set have no cpus_batch: the same set.
  for (auto [key, out] : {std::pair{"cpus", &c.cpus}, std::pair{"cpus_batch", &c.cpus_batch}}) {
    if (const toml::array* a = t["params"][key].as_array()) {
      for (const toml::node& n : *a) {
        auto v = n.value<int64_t>();
        if (!v || *v < 0)
          return MakeError(ErrorCode::kCorrupt, std::string("profile: params.") + key + " must be CPU ids");
        out->push_back(static_cast<int>(*v));
      }
    }
  }
  c.placement_batch = t["params"]["placement_batch"].value_or(std::string());
  auto f = engine::ParseFlashAttn(fa);
  if (!f) return MakeError(ErrorCode::kCorrupt, "profile: " + f.error().message);
  c.flash_attn = *f;
  auto m = engine::ParseLoadMode(load);
  if (!m) return MakeError(ErrorCode::kCorrupt, "profile: " + m.error().message);
  c.load_mode = *m;
  p.model_path = t["profile"]["model_path"].value_or(std::string());
  p.created = t["profile"]["created"].value_or(std::string());
  p.prompt_tokens = static_cast<int>(t["profile"]["prompt_tokens"].value_or(int64_t{0}));
  p.gen_tokens = static_cast<int>(t["profile"]["gen_tokens"].value_or(int64_t{0}));
  p.concurrency = static_cast<int>(t["profile"]["concurrency"].value_or(int64_t{1}));
  p.objective = t["result"]["objective"].value_or(std::string());
  p.best_score = t["result"]["best_score"].value_or(0.0);
  p.default_score = t["result"]["default_score"].value_or(0.0);
  p.speedup = t["result"]["speedup"].value_or(1.0);
  p.speedup_ci95 = t["result"]["speedup_ci95"].value_or(0.0);
  p.llama_server_flags = t["llama_cpp"]["llama_server"].value_or(std::string());
  p.llama_cli_flags = t["llama_cpp"]["llama_cli"].value_or(std::string());
  if (const toml::table* sp = t["speculation"].as_table()) {
    auto spec = SpecFromToml(*sp);
    if (!spec) return spec.error();
    p.spec = *spec;
  }
  return p;
}

Status SaveProfile(const Profile& p, const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec)
    return MakeError(ErrorCode::kIo, "cannot create the profile folder for " + path + ": " + ec.message());
  // Write then rename, so a reader never sees half a profile.
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << ProfileToToml(p);
    if (!f) return MakeError(ErrorCode::kIo, "cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return MakeError(ErrorCode::kIo, "cannot write " + path + ": " + ec.message());
  return {};
}

Result<Profile> LoadProfile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return MakeError(ErrorCode::kNotFound, "no profile at " + path);
  std::stringstream text;
  text << f.rdbuf();
  auto p = ProfileFromToml(text.str());
  if (!p) return MakeError(p.error().code, path + ": " + p.error().message);
  p->path = path;
  return p;
}

Result<std::optional<Profile>> FindProfile(const std::string& model_path) {
  hw::ProbeOptions po;
  po.measure_bandwidth = false;
  auto machine = hw::Probe(po);
  if (!machine) return machine.error();
  auto hash = ModelHash(model_path);
  if (!hash) return hash.error();
  std::string fp = hw::Fingerprint(*machine);
  std::string path = ProfilePath(fp, *hash);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<Profile>();
  auto p = LoadProfile(path);
  if (!p) return p.error();
  if (p->fingerprint != fp || p->model_hash != *hash) {
    return MakeError(ErrorCode::kCorrupt, path + " names another machine or model file");
  }
  return std::optional<Profile>(*p);
}

void ApplyProfile(const Profile& p, engine::SessionOptions* s, engine::LoadOptions* l) {
  const Config& c = p.config;
  if (s) {
    s->threads = c.threads;
    s->threads_batch = c.threads_batch;
    s->cpus = c.cpus;
    s->cpus_batch = c.cpus_batch;
    s->strict_cpu = c.strict_cpu;
    s->poll = c.poll;
    s->n_batch = static_cast<uint32_t>(c.n_batch);
    s->n_ubatch = static_cast<uint32_t>(c.n_ubatch);
    s->flash_attn = c.flash_attn;
    s->kv_type_k = s->kv_type_v = c.kv_type;
  }
  if (l) {
    l->mode = c.load_mode;
    l->repack = c.repack;
    l->amx = c.amx;
  }
}

}  // namespace hone::tune
