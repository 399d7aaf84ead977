// Summary statistics for repeated measurements: mean, spread and a 95%
// confidence interval (Student's t), used by run, tune and the benchmarks.
#pragma once

#include <vector>

namespace hone {

struct Summary {
  int n = 0;
  double mean = 0;
  double stddev = 0;  // sample standard deviation (n-1)
  double ci95 = 0;    // half-width of the 95% confidence interval of the mean
  double min = 0;
  double max = 0;
  double median = 0;
  double cv() const { return mean != 0 ? stddev / mean : 0; }  // coefficient of variation
};

Summary Summarize(const std::vector<double>& samples);

// Two-sided 95% critical value of Student's t with `dof` degrees of freedom.
double TCritical95(int dof);

}  // namespace hone
