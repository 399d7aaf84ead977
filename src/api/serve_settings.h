// All of `hone serve`'s settings: the engine's (serve::ServeConfig) and the
// HTTP edge's (HttpConfig), from a TOML file, then HONE_* variables, then
// flags. One table (AllSettings) serves the three sources and --help.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "api/http_config.h"
#include "serve/config.h"

namespace hone::api {

struct ServeSettings {
  serve::ServeConfig serve;
  HttpConfig http;
};

// The engine's settings, then the HTTP edge's.
const std::vector<Setting<ServeSettings>>& AllSettings();

// TOML file: the settings as top-level keys (name with '_'), plus
// model = [...] files and an [aliases] table.
Status ApplyToml(ServeSettings& c, const std::string& path);
// HONE_* variables from `getenv`.
Status ApplyEnv(ServeSettings& c, const std::function<const char*(const char*)>& getenv);

}  // namespace hone::api
