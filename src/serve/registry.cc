#include "serve/registry.h"

#include <algorithm>
#include <filesystem>

namespace hone::serve {
namespace fs = std::filesystem;

Status Registry::Add(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return MakeError(ErrorCode::kNotFound, "model file not found: " + path);
  RegistryEntry e;
  e.path = fs::absolute(path, ec).string();
  e.name = fs::path(path).stem().string();
  e.file_bytes = fs::file_size(path, ec);
  if (by_name_.count(e.name)) {
    // The same file given twice (dir and -m) is fine; two files with one name are not.
    if (entries_[by_name_[e.name]].path == e.path) return Status::Ok();
    return MakeError(ErrorCode::kInvalidArgument, "two models are named '" + e.name + "': " +
                                                      entries_[by_name_[e.name]].path + " and " + e.path);
  }
  by_name_[e.name] = entries_.size();
  entries_.push_back(std::move(e));
  return Status::Ok();
}

Result<Registry> Registry::Build(const std::string& dir, const std::vector<std::string>& files,
                                 const std::map<std::string, std::string>& aliases) {
  Registry r;
  if (!dir.empty()) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return MakeError(ErrorCode::kNotFound, "models folder not found: " + dir);
    std::vector<std::string> found;
    for (const auto& f : fs::directory_iterator(dir, ec)) {
      if (f.path().extension() == ".gguf" && f.is_regular_file()) found.push_back(f.path().string());
    }
    std::sort(found.begin(), found.end());
    for (const auto& f : found) {
      if (Status s = r.Add(f); !s) return s.error();
    }
  }
  for (const auto& f : files) {
    if (Status s = r.Add(f); !s) return s.error();
  }
  for (const auto& [alias, target] : aliases) {
    auto it = r.by_name_.find(target);
    if (it == r.by_name_.end()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "alias '" + alias + "' names an unknown model '" + target + "'");
    }
    if (r.by_name_.count(alias) && r.by_name_[alias] != it->second) {
      return MakeError(ErrorCode::kInvalidArgument, "alias '" + alias + "' is already a model name");
    }
    r.by_name_[alias] = it->second;
    r.entries_[it->second].aliases.push_back(alias);
  }
  return r;
}

Result<const RegistryEntry*> Registry::Resolve(const std::string& name) const {
  if (name.empty()) return MakeError(ErrorCode::kInvalidArgument, "no model was named");
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos ||
      name.find("..") != std::string::npos) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'" + name + "' looks like a path; name a served model instead");
  }
  auto it = by_name_.find(name);
  if (it == by_name_.end() && name.size() > 7 && name.compare(name.size() - 7, 7, ":latest") == 0) {
    it = by_name_.find(name.substr(0, name.size() - 7));
  }
  if (it == by_name_.end()) return MakeError(ErrorCode::kNotFound, "model '" + name + "' is not served here");
  return &entries_[it->second];
}

}  // namespace hone::serve
