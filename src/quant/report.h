// What `hone bench` concludes and how it says it: the Pareto frontier, a
// recommendation under constraints, and the table in five formats.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "quant/bench.h"

namespace hone::quant {

nlohmann::json RowToJson(const ModelRow& r);
ModelRow RowFromJson(const nlohmann::json& j);

// Indices of rows not dominated on (decode speed up, quality up, size down).
// Quality is mean KLD when every row has it, else perplexity, else pass rate.
std::vector<size_t> ParetoFrontier(const std::vector<ModelRow>& rows);

struct Constraints {
  uint64_t max_ram = 0;       // bytes; compared with peak RSS (file size when not measured); 0 = none
  double max_kld = -1;        // < 0: none
  double min_pass_rate = -1;  // < 0: none
};

struct Recommendation {
  int index = -1;  // into rows; -1 when nothing fits
  std::string reason;
};

// The fastest decoder among rows meeting the constraints (ties: smaller file).
// With no quality constraint given, mean KLD <= 0.01 is used when KLD is known.
Recommendation Recommend(const std::vector<ModelRow>& rows, const Constraints& c);

std::string TerminalTable(const BenchResult& b, const std::vector<size_t>& frontier);
std::string MarkdownReport(const BenchResult& b, const std::vector<size_t>& frontier,
                           const Recommendation& rec);
std::string CsvReport(const BenchResult& b, const std::vector<size_t>& frontier);
nlohmann::json JsonReport(const BenchResult& b, const std::vector<size_t>& frontier,
                          const Recommendation& rec);
// Self-contained: inline CSS and SVG charts, nothing fetched.
std::string HtmlReport(const BenchResult& b, const std::vector<size_t>& frontier, const Recommendation& rec);

// Short display label: the type from the file name ("Q4_K_M") or llama.cpp's.
std::string RowLabel(const ModelRow& r);

}  // namespace hone::quant
