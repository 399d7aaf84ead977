#include "quant/report.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/quantizer.h"
#include "quant/files.h"
#include "quant/perplexity.h"

namespace hone::quant {
namespace {

ModelRow Row(const std::string& label, double tps, double kld, uint64_t bytes) {
  ModelRow r;
  r.path = "/m/x." + label + ".gguf";
  r.decode_tps = tps;
  r.has_kld = true;
  r.kld.mean = kld;
  r.file_bytes = bytes;
  r.has_ppl = true;
  r.ppl = 5 + kld;
  return r;
}

TEST(Report, FrontierDropsDominatedAndFailedRows) {
  std::vector<ModelRow> rows = {Row("F16", 10, 0, 1000), Row("Q8_0", 20, 0.001, 500),
                                Row("Q4_K_M", 30, 0.01, 300),
                                Row("Q4_0", 25, 0.02, 320)};  // slower, worse and bigger than Q4_K_M
  ModelRow failed = Row("BAD", 100, 0, 1);
  failed.ok = false;
  rows.push_back(failed);
  auto f = ParetoFrontier(rows);
  EXPECT_EQ(f, (std::vector<size_t>{0, 1, 2}));
}

TEST(Report, RecommendHonoursConstraints) {
  std::vector<ModelRow> rows = {Row("F16", 10, 0, 1000), Row("Q8_0", 20, 0.001, 500),
                                Row("Q4_K_M", 30, 0.008, 300), Row("Q2_K", 40, 0.2, 200)};
  Recommendation d = Recommend(rows, {});
  EXPECT_EQ(d.index, 2) << d.reason;  // default bar: KLD <= 0.01 excludes Q2_K
  EXPECT_NE(d.reason.find("Q2_K has KLD"), std::string::npos) << d.reason;
  Constraints strict;
  strict.max_kld = 0.005;
  EXPECT_EQ(Recommend(rows, strict).index, 1);
  Constraints ram;
  ram.max_kld = 1;
  ram.max_ram = 250;
  EXPECT_EQ(Recommend(rows, ram).index, 3);
  ram.max_ram = 10;
  EXPECT_EQ(Recommend(rows, ram).index, -1);
}

TEST(Report, RecommendTieGoesToSmallerFile) {
  std::vector<ModelRow> rows = {Row("Q5_K_M", 30.0, 0.001, 400), Row("Q4_K_M", 29.8, 0.002, 300)};
  EXPECT_EQ(Recommend(rows, {}).index, 1);
}

TEST(Report, JsonRoundTripAndFormats) {
  BenchResult b;
  b.rows = {Row("F16", 10, 0, 1000), Row("Q4_K_M", 30, 0.01, 300)};
  b.rows[1].tasks.push_back({"t1", "code", "en", true, "compiles", "int x;"});
  ModelRow back = RowFromJson(RowToJson(b.rows[1]));
  EXPECT_EQ(back.tasks_passed(), 1);
  EXPECT_DOUBLE_EQ(back.kld.mean, 0.01);
  auto f = ParetoFrontier(b.rows);
  auto rec = Recommend(b.rows, {});
  std::string html = HtmlReport(b, f, rec);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);  // nothing fetched
  EXPECT_NE(MarkdownReport(b, f, rec).find("| Q4_K_M |"), std::string::npos);
  EXPECT_NE(CsvReport(b, f).find("\"Q4_K_M\""), std::string::npos);
  EXPECT_EQ(JsonReport(b, f, rec)["recommendation"]["label"], "Q4_K_M");
}

TEST(Perplexity, LogSoftmaxAndKldSummary) {
  std::vector<float> logits = {1, 2, 3, 4};
  std::vector<double> lp;
  LogSoftmax(logits.data(), 4, lp);
  double sum = 0;
  for (double v : lp) sum += std::exp(v);
  EXPECT_NEAR(sum, 1.0, 1e-12);
  std::vector<double> k(100);
  for (int i = 0; i < 100; ++i) k[i] = i;
  KldStats s = SummarizeKld(k, 90);
  EXPECT_DOUBLE_EQ(s.mean, 49.5);
  EXPECT_DOUBLE_EQ(s.p99, 98);
  EXPECT_DOUBLE_EQ(s.max, 99);
  EXPECT_DOUBLE_EQ(s.same_top1, 0.9);
}

TEST(Quantizer, TypeNamesAndOutputNames) {
  EXPECT_EQ(engine::ParseQuantType("q4_k")->name, "Q4_K_M");
  EXPECT_EQ(engine::ParseQuantType("iq4_xs")->name, "IQ4_XS");
  EXPECT_FALSE(engine::ParseQuantType("q9_k").ok());
  EXPECT_EQ(QuantizedName("/a/qwen2.5-0.5b.f16.gguf", "Q4_K_M", ""), "/a/qwen2.5-0.5b.Q4_K_M.gguf");
  EXPECT_EQ(QuantizedName("/a/stories260K.gguf", "Q8_0", "/out"), "/out/stories260K.Q8_0.gguf");
}

}  // namespace
}  // namespace hone::quant
