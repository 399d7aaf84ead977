#include "backend/backend.h"

namespace hone::backend {

Usage& Usage::operator+=(const Usage& o) {
  prompt_tokens += o.prompt_tokens;
  cached_tokens += o.cached_tokens;
  completion_tokens += o.completion_tokens;
  draft_tokens += o.draft_tokens;
  accepted_tokens += o.accepted_tokens;
  estimated = estimated || o.estimated;
  return *this;
}

const char* FinishReasonName(FinishReason f) {
  switch (f) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kToolCalls:
      return "tool_calls";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kTimeout:
      return "timeout";
    case FinishReason::kError:
      return "error";
  }
  return "?";
}

}  // namespace hone::backend
