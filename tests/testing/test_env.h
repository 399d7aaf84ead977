// Paths and helpers shared by all tests: where ../shared is, a scratch folder,
// the hone binary, and a synth model made once per test run and reused.
#pragma once

#include <string>

namespace hone::testing {

std::string SharedDir();                            // ../shared (or $HONE_SHARED)
std::string SharedModel(const std::string& file);   // SharedDir()/models/file
std::string SharedCorpus(const std::string& file);  // SharedDir()/corpora/file
std::string TempDir();                              // a per-build scratch folder, created on demand
std::string TempPath(const std::string& name);
std::string SourceDir();
std::string HoneBinary();

// Runs a shell command, returns its exit code and captures stdout+stderr.
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
CommandResult RunCommand(const std::string& command);

// A tiny synth model (the "tiny" shape with the Qwen2 tokenizer), generated
// with `hone synth` on first use and cached in TempDir().
std::string TinySynthModel();

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& data);

}  // namespace hone::testing
