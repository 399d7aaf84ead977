// What a model needs in memory under serve's options, and what to say when it
// does not fit: on a board with a few GB the useful answer is which
// quantization to make, not only that this one fails.
#pragma once

#include <cstdint>
#include <string>

#include "engine/memory_estimate.h"
#include "serve/registry.h"
#include "serve/scheduler.h"

namespace hone::serve {

// The KV cells, batch and cache types a model's sessions will take.
engine::MemoryRequest MemoryRequestFor(const SchedulerOptions& s);

// The refusal's tail: ". A Q4_K_M of it would need about N MiB and fit (...)",
// or why no smaller quantization would. `have` is the bytes free, `need` what
// the load asked for (the model and, if any, its draft model, which keeps its
// size). Names no path: the message goes to API clients. Empty when the file
// cannot be read.
std::string FitAdvice(const RegistryEntry& e, const SchedulerOptions& s, uint64_t have, uint64_t need);

}  // namespace hone::serve
