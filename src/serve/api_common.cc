#include "serve/api_common.h"

#include <atomic>
#include <chrono>

namespace hone::serve {

std::optional<json> ParseBody(const std::string& body, ApiError* err) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    *err = BadRequest("the request body is not valid JSON");
    return std::nullopt;
  }
  if (!j.is_object()) {
    *err = BadRequest("the request body must be a JSON object");
    return std::nullopt;
  }
  return j;
}

namespace {
bool Absent(const json& j, const char* key) { return !j.contains(key) || j[key].is_null(); }
void WrongType(const char* key, const char* want, ApiError* err) {
  *err = BadRequest(std::string("'") + key + "' must be " + want);
}
}  // namespace

std::optional<double> GetNumber(const json& j, const char* key, ApiError* err) {
  if (Absent(j, key)) return std::nullopt;
  if (!j[key].is_number()) return WrongType(key, "a number", err), std::nullopt;
  return j[key].get<double>();
}

std::optional<int64_t> GetInt(const json& j, const char* key, ApiError* err) {
  if (Absent(j, key)) return std::nullopt;
  if (!j[key].is_number_integer()) return WrongType(key, "an integer", err), std::nullopt;
  return j[key].get<int64_t>();
}

std::optional<bool> GetBool(const json& j, const char* key, ApiError* err) {
  if (Absent(j, key)) return std::nullopt;
  if (!j[key].is_boolean()) return WrongType(key, "true or false", err), std::nullopt;
  return j[key].get<bool>();
}

std::optional<std::string> GetString(const json& j, const char* key, ApiError* err) {
  if (Absent(j, key)) return std::nullopt;
  if (!j[key].is_string()) return WrongType(key, "a string", err), std::nullopt;
  return j[key].get<std::string>();
}

std::optional<std::vector<std::string>> GetStrings(const json& j, const char* key, ApiError* err) {
  if (Absent(j, key)) return std::nullopt;
  const json& v = j[key];
  if (v.is_string()) return std::vector<std::string>{v.get<std::string>()};
  if (!v.is_array()) return WrongType(key, "a string or an array of strings", err), std::nullopt;
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) return WrongType(key, "a string or an array of strings", err), std::nullopt;
    out.push_back(e.get<std::string>());
  }
  return out;
}

void GetSampling(const json& j, engine::SamplingOptions* s, ApiError* err) {
  if (auto v = GetNumber(j, "temperature", err)) s->temperature = static_cast<float>(*v);
  if (auto v = GetNumber(j, "top_p", err)) s->top_p = static_cast<float>(*v);
  if (auto v = GetInt(j, "top_k", err)) s->top_k = static_cast<int>(*v);
  if (auto v = GetNumber(j, "min_p", err)) s->min_p = static_cast<float>(*v);
  if (auto v = GetInt(j, "seed", err)) s->seed = static_cast<uint32_t>(*v);
  if (auto v = GetNumber(j, "repeat_penalty", err)) s->repeat_penalty = static_cast<float>(*v);
  if (auto v = GetInt(j, "repeat_last_n", err)) s->repeat_last_n = static_cast<int>(*v);
  if (auto v = GetNumber(j, "presence_penalty", err)) s->presence_penalty = static_cast<float>(*v);
  if (auto v = GetNumber(j, "frequency_penalty", err)) s->frequency_penalty = static_cast<float>(*v);
}

std::optional<double> GetKeepAlive(const json& j, ApiError* err) {
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

bool PumpJob(Running& run, size_t i, const ChunkWriter& write,
             const std::function<std::string(const std::string&)>& frame) {
  Job& job = *run.jobs[i];
  for (;;) {
    bool done = false;
    std::string text = job.Take(std::chrono::milliseconds(100), &done);
    // With no text yet (queued, or a long prompt prefilling) ask the kernel
    // whether the client is still there: writes alone would not tell.
    const bool gone = text.empty() ? run.client_gone() || !write(std::string()) : !write(frame(text));
    if (gone) {
      // Client gone: stop the sequence and wait the one step it takes, so the
      // log line reports how far it got.
      job.Cancel();
      job.WaitAll();
      return false;
    }
    if (done) return true;
  }
}

std::string WaitForJob(Running& run, size_t i) {
  Job& job = *run.jobs[i];
  std::string text;
  for (;;) {
    bool done = false;
    text += job.Take(std::chrono::milliseconds(100), &done);
    if (done) return text;
    if (run.client_gone()) {
      job.Cancel();
      return text + job.WaitAll();
    }
  }
}

HttpResponse ClientClosed(RequestLog log) {
  HttpResponse res;
  res.status = 499;
  res.body = R"({"error":"client closed the request"})";
  res.log = std::move(log);
  return res;
}

void LogJob(const Running& run, const JobResult& r, RequestLog* log) {
  log->model = run.model;
  log->prompt_tokens += r.prompt_tokens;
  log->completion_tokens += r.completion_tokens;
  if (log->ttft_ms < 0 && r.timings.first_token != Clock::time_point{}) {
    log->ttft_ms =
        std::chrono::duration<double, std::milli>(r.timings.first_token - r.timings.enqueued).count();
  }
  if (log->queue_ms < 0) log->queue_ms = r.timings.queue_seconds() * 1000;
  log->finish = FinishName(r.finish);
  if (!r.error.empty()) log->error = r.error;
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

std::string NewId(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  uint64_t n = ++counter ^ (static_cast<uint64_t>(UnixNow()) << 20);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s-%012llx", prefix, static_cast<unsigned long long>(n));
  return buf;
}

}  // namespace hone::serve
