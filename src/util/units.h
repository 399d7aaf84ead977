// The one parser for each kind of quantity a user types: durations
// (keep_alive, --budget, timeouts in routes.toml) and sizes (--max-body,
// --memory-limit, --cache-ram, --max-ram, sysfs cache sizes). Each accepts the
// union of what the commands that use it accepted before; a caller that allows
// only part of the range (a budget must be more than 0) checks the value.
#pragma once

#include <cstdint>
#include <string_view>

#include "util/result.h"

namespace hone {

// Seconds from "90", "1.5", "250ms", "30s", "5m", "2h", "1h30m", "1m30.5s" or
// "-1" (Ollama's keep_alive: forever). Units are ms, s, m and h; a number
// without a unit is seconds and must stand alone ("1h30" is refused as
// ambiguous). A leading '-' negates the whole. Surrounding spaces are ignored.
// Errors: kInvalidArgument, naming the text and the accepted forms.
Result<double> ParseDuration(std::string_view text);

// Bytes from "4096", "48K", "512M", "1.5G", "2T", with an optional "B" or
// "iB" after the letter ("512MiB", "8GB"), any case. Every multiple is binary
// (K = 1024), as sysfs and the memory tools people compare with print them.
// Errors: kInvalidArgument (not a size, negative, or past 2^64).
Result<uint64_t> ParseSize(std::string_view text);

}  // namespace hone
