#include "util/result.h"

namespace hone {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kCorrupt:
      return "corrupt";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kOutOfMemory:
      return "out of memory";
    case ErrorCode::kIo:
      return "i/o error";
    case ErrorCode::kAborted:
      return "aborted";
    case ErrorCode::kInternal:
      return "internal error";
    case ErrorCode::kBusy:
      return "busy";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kRateLimited:
      return "rate limited";
    case ErrorCode::kUpstream:
      return "upstream failure";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kPermissionDenied:
      return "permission denied";
  }
  return "error";
}

}  // namespace hone
