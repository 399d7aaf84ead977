#include "api/json_fields.h"

#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <chrono>
#include <cstdio>

#include "util/units.h"

namespace hone::api {

Error BadRequest(const std::string& message) { return MakeError(ErrorCode::kInvalidArgument, message); }

namespace {
// Thrown from the parser's callback to stop at a limit.
struct LimitExceeded {
  std::string why;
};
}  // namespace

Result<json> ParseBody(const std::string& body) {
  // Checked while parsing, before anything is built: code downstream recurses
  // over nesting (schemas into grammars, the template engine), and an ordered
  // object inserts each key in linear time.
  std::vector<size_t> keys;  // per open object or array
  json::parser_callback_t limits = [&keys](int depth, json::parse_event_t event, json&) {
    using E = json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      if (depth >= kMaxJsonDepth) {
        throw LimitExceeded{"the request body nests deeper than " + std::to_string(kMaxJsonDepth) +
                            " levels"};
      }
      keys.push_back(0);
    } else if (event == E::key) {
      if (++keys.back() > kMaxJsonObjectKeys) {
        throw LimitExceeded{"an object in the request body has more than " +
                            std::to_string(kMaxJsonObjectKeys) + " keys"};
      }
    } else if ((event == E::object_end || event == E::array_end) && !keys.empty()) {
      keys.pop_back();
    }
    return true;
  };
  json j;
  try {
    j = json::parse(body, limits, /*allow_exceptions=*/false);
  } catch (const LimitExceeded& e) {
    return BadRequest(e.why);
  }
  if (j.is_discarded()) return BadRequest("the request body is not valid JSON");
  if (!j.is_object()) return BadRequest("the request body must be a JSON object");
  return j;
}

std::string StringOr(const json& j, const char* key, const std::string& otherwise) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return otherwise;
  return j[key].get<std::string>();
}

bool BoolOr(const json& j, const char* key, bool otherwise) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_boolean()) return otherwise;
  return j[key].get<bool>();
}

namespace {
bool Absent(const json& j, const char* key) { return !j.contains(key) || j[key].is_null(); }
void WrongType(const char* key, const char* want, Status* err) {
  *err = BadRequest(std::string("'") + key + "' must be " + want);
}
}  // namespace

std::optional<double> GetNumber(const json& j, const char* key, Status* err) {
  if (Absent(j, key)) return std::nullopt;
  if (!j[key].is_number()) return WrongType(key, "a number", err), std::nullopt;
  const double v = j[key].get<double>();
  if (!std::isfinite(v)) return WrongType(key, "a finite number", err), std::nullopt;  // 1e999
  return v;
}

std::optional<int> GetInt32(const json& j, const char* key, Status* err) {
  auto v = GetInt(j, key, err);
  if (!v) return std::nullopt;
  if (*v < INT32_MIN || *v > INT32_MAX) return WrongType(key, "an integer of at most 2147483647", err), std::nullopt;
  return static_cast<int>(*v);
}

std::optional<int64_t> GetInt(const json& j, const char* key, Status* err) {
  if (Absent(j, key)) return std::nullopt;
  // Above 2^63 nlohmann keeps an unsigned value that int64 cannot hold.
  if (!j[key].is_number_integer() || (j[key].is_number_unsigned() && j[key].get<uint64_t>() > INT64_MAX))
    return WrongType(key, "an integer", err), std::nullopt;
  return j[key].get<int64_t>();
}

std::optional<bool> GetBool(const json& j, const char* key, Status* err) {
  if (Absent(j, key)) return std::nullopt;
  if (!j[key].is_boolean()) return WrongType(key, "true or false", err), std::nullopt;
  return j[key].get<bool>();
}

std::optional<std::string> GetString(const json& j, const char* key, Status* err) {
  if (Absent(j, key)) return std::nullopt;
  if (!j[key].is_string()) return WrongType(key, "a string", err), std::nullopt;
  return j[key].get<std::string>();
}

std::optional<std::string> GetStringAt(const json& j, const std::string& path, const char* key, Status* err) {
  if (Absent(j, key)) return std::nullopt;
  if (!j[key].is_string()) {
    *err = BadRequest("'" + path + "." + key + "' must be a string");
    return std::nullopt;
  }
  return j[key].get<std::string>();
}

std::string Indexed(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

Result<std::string> RequireString(const json& j, const char* key, const char* missing) {
  Status err;
  auto v = GetString(j, key, &err);
  if (!err.ok()) return err.error();
  if (!v) return BadRequest(missing);
  return *v;
}

std::optional<std::vector<std::string>> GetStrings(const json& j, const char* key, Status* err) {
  if (Absent(j, key)) return std::nullopt;
  const json& v = j[key];
  if (v.is_string()) return std::vector<std::string>{v.get<std::string>()};
  if (!v.is_array()) return WrongType(key, "a string or an array of strings", err), std::nullopt;
  const size_t most = MaxEntries(key);
  if (v.size() > most) {
    *err = BadRequest(std::string("'") + key + "' has " + std::to_string(v.size()) + " entries; at most " +
                      std::to_string(most) + " are allowed");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      *err = BadRequest("'" + Indexed(key, i) + "' must be a string");
      return std::nullopt;
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

size_t MaxEntries(const std::string& key) {
  // Stop strings are matched against every token on the scheduler thread;
  // each prompt is a job of its own.
  if (key == "stop" || key == "stop_sequences") return kMaxStopStrings;
  if (key == "prompt") return kMaxPrompts;
  if (key == "input") return kMaxEmbeddingInputs;
  return SIZE_MAX;
}

void GetSampling(const json& j, backend::Sampling* s, Status* err) {
  if (auto v = GetNumber(j, "temperature", err)) s->temperature = static_cast<float>(*v);
  if (auto v = GetNumber(j, "top_p", err)) s->top_p = static_cast<float>(*v);
  if (auto v = GetInt32(j, "top_k", err)) s->top_k = *v;
  if (auto v = GetNumber(j, "min_p", err)) s->min_p = static_cast<float>(*v);
  if (auto v = GetInt(j, "seed", err)) {
    if (*v < -1 || *v > UINT32_MAX) {
      *err = BadRequest("'seed' must be within [0, 4294967295] (or -1: random)");
    } else {
      s->seed = *v == -1 ? 0xFFFFFFFFu : static_cast<uint32_t>(*v);
    }
  }
  if (auto v = GetNumber(j, "repeat_penalty", err)) s->repeat_penalty = static_cast<float>(*v);
  if (auto v = GetInt32(j, "repeat_last_n", err)) s->repeat_last_n = *v;
  if (auto v = GetNumber(j, "presence_penalty", err)) s->presence_penalty = static_cast<float>(*v);
  if (auto v = GetNumber(j, "frequency_penalty", err)) s->frequency_penalty = static_cast<float>(*v);
}

std::optional<double> GetKeepAlive(const json& j, Status* err) {
  if (Absent(j, "keep_alive")) return std::nullopt;
  const json& v = j["keep_alive"];
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    auto d = ParseDuration(v.get<std::string>());
    if (d) return *d;
    *err = BadRequest(d.error().message);
    return std::nullopt;
  }
  WrongType("keep_alive", "a duration such as \"5m\" or a number of seconds", err);
  return std::nullopt;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string Base64(const void* data, size_t n) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = p[i] << 16 | (i + 1 < n ? p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    out += kAlphabet[v >> 18 & 63];
    out += kAlphabet[v >> 12 & 63];
    out += i + 1 < n ? kAlphabet[v >> 6 & 63] : '=';
    out += i + 2 < n ? kAlphabet[v & 63] : '=';
  }
  return out;
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string NewId(const char* prefix, char sep) {
  static std::atomic<uint64_t> counter{0};
  uint64_t n = ++counter ^ (static_cast<uint64_t>(UnixNow()) << 20);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%c%012llx", prefix, sep, static_cast<unsigned long long>(n));
  return buf;
}

}  // namespace hone::api
