// The calendar and the money of the spend ledger: budget periods are calendar
// days and months in the ledger's time zone ([spend] timezone, set
// process-wide), and amounts are integer micro-units of the price currency.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.h"

namespace hone::route {

// Calendar keys in the ledger's time zone.
struct PeriodKeys {
  std::string day, month;  // "2026-12-01", "2026-12"
  double seconds_to_day_end = 0, seconds_to_month_end = 0;
};
PeriodKeys PeriodsAt(double unix_s);
// Sets the process's time zone for PeriodsAt (before any thread starts).
// An unknown zone is an error naming it.
Status SetLedgerTimeZone(const std::string& zone);

inline double Money(int64_t micro) { return static_cast<double>(micro) / 1e6; }
std::string FormatMoney(int64_t micro);  // "12.345678" -> "12.35" style, 2+ decimals

}  // namespace hone::route
