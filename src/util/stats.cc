#include "util/stats.h"

#include <algorithm>
#include <cmath>

namespace hone {

double TCritical95(int dof) {
  static const double kTable[] = {0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                                  2.306, 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                                  2.120, 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
                                  2.064, 2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof <= 0) return 0;
  if (dof <= 30) return kTable[dof];
  return 1.96 + 2.4 / dof;  // close to the table beyond 30, converging to the normal 1.96
}

Summary Summarize(const std::vector<double>& samples) {
  Summary s;
  s.n = static_cast<int>(samples.size());
  if (s.n == 0) return s;
  double sum = 0;
  for (double x : samples) sum += x;
  s.mean = sum / s.n;
  double ss = 0;
  for (double x : samples) ss += (x - s.mean) * (x - s.mean);
  s.stddev = s.n > 1 ? std::sqrt(ss / (s.n - 1)) : 0;
  s.ci95 = s.n > 1 ? TCritical95(s.n - 1) * s.stddev / std::sqrt(s.n) : 0;
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  s.min = sorted.front();
  s.max = sorted.back();
  s.median = s.n % 2 ? sorted[s.n / 2] : 0.5 * (sorted[s.n / 2 - 1] + sorted[s.n / 2]);
  return s;
}

}  // namespace hone
