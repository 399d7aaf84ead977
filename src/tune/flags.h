// The llama.cpp command-line flags equivalent to a tuned Config, so that users
// of plain llama-server / llama-cli gain from the tune too.
#pragma once

#include <string>
#include <vector>

#include "tune/config.h"

namespace hone::tune {

enum class LlamaTool { kServer, kCli };

// ggml's CPU mask syntax for -C/--cpu-mask: hex, lowest CPU in the lowest bit.
std::string CpuMaskHex(const std::vector<int>& cpus);

// e.g. "-t 4 -tb 8 -C 0xff --cpu-strict 1 --poll 0 -b 2048 -ub 256 -fa on -ctk q8_0 -ctv q8_0 --no-mmap -nr
// -np 4". Only flags that differ from llama.cpp's defaults are listed, except -t/-tb (their default depends
// on the machine). n_ctx > 0 adds -c.
std::string LlamaFlags(const Config& c, LlamaTool tool, int n_ctx = 0);

}  // namespace hone::tune
