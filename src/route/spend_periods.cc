#include "route/spend_periods.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace hone::route {
namespace {

std::string Strftime(const std::tm& tm, const char* fmt) {
  char buf[32];
  return std::string(buf, std::strftime(buf, sizeof buf, fmt, &tm));
}

}  // namespace

PeriodKeys PeriodsAt(double unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  localtime_r(&t, &tm);
  PeriodKeys k;
  k.day = Strftime(tm, "%Y-%m-%d");
  k.month = Strftime(tm, "%Y-%m");
  std::tm next_day = tm;
  next_day.tm_mday += 1;
  next_day.tm_hour = next_day.tm_min = next_day.tm_sec = 0;
  next_day.tm_isdst = -1;
  std::tm next_month = tm;
  next_month.tm_mon += 1;
  next_month.tm_mday = 1;
  next_month.tm_hour = next_month.tm_min = next_month.tm_sec = 0;
  next_month.tm_isdst = -1;
  k.seconds_to_day_end = static_cast<double>(std::mktime(&next_day)) - unix_s;
  k.seconds_to_month_end = static_cast<double>(std::mktime(&next_month)) - unix_s;
  return k;
}

Status SetLedgerTimeZone(const std::string& zone) {
  if (zone != "UTC" && zone != "Etc/UTC") {
    struct stat st {};
    const std::string file = "/usr/share/zoneinfo/" + zone;
    if (zone.find("..") != std::string::npos || stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return MakeError(ErrorCode::kInvalidArgument,
                       "[spend] timezone '" + zone + "' is not a known zone (none at " + file + ")");
  }
  setenv("TZ", zone == "UTC" ? "UTC0" : zone.c_str(), 1);
  tzset();
  return Status::Ok();
}

std::string FormatMoney(int64_t micro) {
  char buf[48];
  const double v = Money(micro);
  // Cents where that is exact enough; more digits for tiny amounts.
  std::snprintf(buf, sizeof buf, std::fabs(v) >= 1 || micro == 0 ? "%.2f" : "%.4f", v);
  return buf;
}

}  // namespace hone::route
