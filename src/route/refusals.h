// How the router reads a refusal, written once: whether another target could
// do better, and whether the refusal says anything about the target that gave
// it (a canary arm is judged only by refusals that do).
#pragma once

#include "util/result.h"

namespace hone::route {

// The request itself is wrong or names nothing: every target would refuse it
// the same way, so the route stops trying.
inline bool SameOnEveryTarget(const Error& e) {
  return e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kNotFound;
}

// The request's own fault or choice (bad, unknown, over its budget, its
// client gone): no verdict on the target or arm that refused it.
inline bool RequestsOwnRefusal(const Error& e) {
  return SameOnEveryTarget(e) || e.code == ErrorCode::kAborted || e.code == ErrorCode::kRateLimited;
}

}  // namespace hone::route
