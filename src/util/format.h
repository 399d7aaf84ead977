// Human-readable numbers for terminal output.
#pragma once

#include <cstdint>
#include <string>

namespace hone {

std::string FormatBytes(uint64_t bytes);  // "1.50 GiB"
std::string FormatCount(uint64_t n);      // "494.03 M"

}  // namespace hone
