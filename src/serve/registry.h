// The models a server may serve: built once at start from --models DIR and
// -m FILE, named by file stem, plus aliases from the config. Requests name
// models from here and never by path. Immutable after Build (thread-safe).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "util/result.h"

namespace hone::serve {

struct RegistryEntry {
  std::string name;  // file stem, e.g. "qwen2.5-0.5b.Q4_K_M"
  std::string path;
  uint64_t file_bytes = 0;
  std::vector<std::string> aliases;
};

class Registry {
 public:
  // dir: every *.gguf in it (not recursive); files: extra model files.
  // aliases: alias -> model name (or file stem). Errors: kNotFound (missing dir
  // or file), kInvalidArgument (duplicate name, alias to an unknown model).
  static Result<Registry> Build(const std::string& dir, const std::vector<std::string>& files,
                                const std::map<std::string, std::string>& aliases);

  // Accepts a name, an alias, or either with Ollama's ":latest" tag.
  // Errors: kInvalidArgument for something that looks like a path, kNotFound.
  Result<const RegistryEntry*> Resolve(const std::string& name) const;
  const std::vector<RegistryEntry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

 private:
  Status Add(const std::string& path);
  std::vector<RegistryEntry> entries_;
  std::map<std::string, size_t> by_name_;  // names and aliases
};

}  // namespace hone::serve
