// Tuned profiles: the winning run parameters for one machine and one model
// file, saved as TOML in the profile folder ($HONE_PROFILE_DIR, else
// ~/.config/hone/profiles) under <hardware fingerprint>-<model hash>.toml.
// `hone run` (and later `hone serve`) look one up with FindProfile and apply
// it with ApplyProfile; flags given on the command line still win.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/session.h"
#include "tune/config.h"
#include "util/result.h"

namespace hone::tune {

// `hone tune --spec`'s choice: the speculation mode measured fastest for the
// workload (or "none"), and what it measured.
struct SpecChoice {
  std::string mode = "none";       // as `--spec` takes it
  std::string draft;               // the draft model file, for draft-simple
  int ngram = 0;                   // --spec-ngram; 0: llama.cpp's default
  int max_draft = 64;              // --spec-max
  double speedup = 1;              // decode tokens/s over no speculation (mean of paired runs)
  double acceptance = 0;           // share of drafts kept
  std::vector<double> cost_curve;  // t(k+1)/t(1) for k = 0, 1, 2, ...
  bool measured = false;           // the profile holds a [speculation] table
};

struct Profile {
  int version = 1;
  std::string fingerprint;  // hw::Fingerprint of the machine it was tuned on
  std::string model_hash;   // ModelHash of the file
  std::string model_path;   // informational: where the file was when tuned
  std::string workload;     // chat, batch, server
  std::string created;      // UTC, ISO 8601
  int prompt_tokens = 0;
  int gen_tokens = 0;
  int concurrency = 1;
  Config config;
  std::string objective;  // what the scores measure
  double best_score = 0;
  double default_score = 0;
  double speedup = 1;  // best / default (paired), and its 95% CI half-width
  double speedup_ci95 = 0;
  std::string llama_server_flags;
  std::string llama_cli_flags;
  SpecChoice spec;
  std::string path;  // where it was loaded from (not stored)
};

// The model file's content key (util/file_hash.h: ModelFileHash).
// Errors: kNotFound, kIo.
Result<std::string> ModelHash(const std::string& path);

std::string ProfileDir();
std::string ProfilePath(const std::string& fingerprint, const std::string& model_hash);

// The run parameters as JSON (`hone tune --json`); the profile's [params]
// table is made from it.
nlohmann::json ConfigJson(const Config& c);
std::string ProfileToToml(const Profile& p);
// Errors: kCorrupt (not valid TOML or a field has the wrong type/value).
Result<Profile> ProfileFromToml(const std::string& text);
Status SaveProfile(const Profile& p, const std::string& path);
Result<Profile> LoadProfile(const std::string& path);

// The profile for this machine and this model file, if one was tuned.
// Errors only when a matching profile exists but cannot be read.
Result<std::optional<Profile>> FindProfile(const std::string& model_path);

// Writes the profile's run parameters into the options (context size and the
// number of sequences are left as the caller set them).
void ApplyProfile(const Profile& p, engine::SessionOptions* session, engine::LoadOptions* load);

}  // namespace hone::tune
