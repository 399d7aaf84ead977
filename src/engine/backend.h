// One-time llama.cpp/ggml initialisation and log routing. Only src/engine
// talks to llama.cpp; everything else sees hone types.
#pragma once

#include <string>

#include "util/result.h"

namespace hone::engine {

// Initialises the backend once per process (thread-safe, idempotent) and routes
// llama.cpp's log through hone: silent unless SetVerbose(true) or $HONE_VERBOSE.
void EnsureBackend();

void SetVerbose(bool verbose);

// The most recent error/warning lines llama.cpp logged on this thread, joined;
// used to explain a failed load in hone's own error message.
std::string TakeRecentLlamaErrors();

// llama.cpp's build/system string, e.g. "CPU : SSE3 = 1 | AVX2 = 1 | ...".
std::string SystemInfo();
std::string LlamaVersion();  // the pinned commit this binary was built against

// Whether this CPU has every instruction set the linked llama.cpp was compiled
// for (scripts/build-llama.sh records it; a native build on an AVX-512 or AMX
// host must not run on a CPU without them, where ggml would die of SIGILL).
// kUnsupported names the missing ones and the fix. Checks only hone's own
// code: it runs before anything in libggml-cpu does.
Status CheckCpuRunsThisBuild();
// The build's cache key, e.g. "native-sapphirerapids-1a2b3c4d5e6f" (empty for
// a llama.cpp that hone did not build), and its ISA macros.
std::string LlamaBuildKey();
std::string LlamaBuildIsa();

// Whether ggml's CPU backend runs graphs on OpenMP threads (the default
// build). Thread placement still applies then, but the poll level does not:
// OpenMP's own barriers spin instead of ggml's pool.
bool UsesOpenMp();

}  // namespace hone::engine
