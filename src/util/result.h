// Errors are values: every fallible call in hone returns Result<T> (or Status),
// never throws across module boundaries and never aborts.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace hone {

enum class ErrorCode {
  kInvalidArgument,  // the caller asked for something malformed
  kNotFound,         // a file or named thing does not exist
  kCorrupt,          // a file exists but is damaged or not what it claims
  kUnsupported,      // valid input that this build cannot handle
  kOutOfMemory,      // the request does not fit in memory
  kIo,               // the OS refused a read or write
  kAborted,          // cancelled by the caller
  kInternal,         // llama.cpp or hone failed in a way the caller cannot fix
  // Refusals a server answers with; a caller may retry (see Error::retry_after_s).
  kBusy,         // at capacity now (a full queue): retry shortly
  kUnavailable,  // cannot serve now (a model loading, a server draining)
  kRateLimited,  // this caller sent too much; retry after retry_after_s
  kUpstream,     // a backend behind this one failed
  kTimeout,      // the request ran past its deadline
  kPermissionDenied,  // this caller's key may not do that (an admin's may)
};

const char* ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code;
  std::string message;
  // > 0: seconds after which a retry may succeed (kBusy, kUnavailable,
  // kRateLimited); 0: no advice. An HTTP edge turns it into Retry-After.
  int retry_after_s = 0;
  // A backend behind this one refused the request itself (a 4xx other than
  // 401, 403 and 429): the status it answered, which a gateway passes on as
  // it is (404, 413, 422...). 0: none. A fact about the upstream, not an
  // HTTP mapping of this error: kInvalidArgument or kNotFound say what it means.
  int upstream_status = 0;

  std::string ToString() const { return std::string(ErrorCodeName(code)) + ": " + message; }
};

inline Error MakeError(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

// Result<T> holds either a value or an Error. Check ok() before value().
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Status is a Result with no value: OK or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design
  static Status Ok() { return Status(); }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_{ErrorCode::kInternal, ""};
  bool ok_ = true;
};

}  // namespace hone
