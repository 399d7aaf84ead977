#include "util/format.h"

#include <cstdio>

namespace hone {

std::string FormatBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

std::string FormatCount(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ULL)
    std::snprintf(buf, sizeof buf, "%.2f B", n / 1e9);
  else if (n >= 1000000ULL)
    std::snprintf(buf, sizeof buf, "%.2f M", n / 1e6);
  else if (n >= 1000ULL)
    std::snprintf(buf, sizeof buf, "%.2f K", n / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
  return buf;
}

}  // namespace hone
