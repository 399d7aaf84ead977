#include "quant/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "util/format.h"

namespace hone::quant {
namespace {

std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

enum class QualityAxis { kKld, kPpl, kPass, kNone };

QualityAxis Axis(const std::vector<ModelRow>& rows) {
  bool any = false, kld = true, ppl = true, pass = true;
  for (const auto& r : rows) {
    if (!r.ok) continue;
    any = true;
    kld &= r.has_kld;
    ppl &= r.has_ppl;
    pass &= !r.tasks.empty();
  }
  if (!any) return QualityAxis::kNone;
  return kld ? QualityAxis::kKld : ppl ? QualityAxis::kPpl : pass ? QualityAxis::kPass : QualityAxis::kNone;
}

// Higher is better on every axis.
double Quality(const ModelRow& r, QualityAxis a) {
  switch (a) {
    case QualityAxis::kKld:
      return -r.kld.mean;
    case QualityAxis::kPpl:
      return -r.ppl;
    case QualityAxis::kPass:
      return r.pass_rate();
    case QualityAxis::kNone:
      return 0;
  }
  return 0;
}

std::string KldCell(const ModelRow& r) { return r.has_kld ? Fmt("%.6f", r.kld.mean) : "-"; }
std::string PplCell(const ModelRow& r) {
  return r.has_ppl ? Fmt("%.4f", r.ppl) + " ± " + Fmt("%.4f", r.ppl_err) : "-";
}
std::string TasksCell(const ModelRow& r) {
  return r.tasks.empty() ? "-" : std::to_string(r.tasks_passed()) + "/" + std::to_string(r.tasks.size());
}
std::string SpeedCell(double v, double ci) { return v > 0 ? Fmt("%.1f", v) + " ± " + Fmt("%.1f", ci) : "-"; }

bool OnFrontier(const std::vector<size_t>& f, size_t i) {
  return std::find(f.begin(), f.end(), i) != f.end();
}

}  // namespace

std::string RowLabel(const ModelRow& r) {
  // "name.Q4_K_M.gguf" -> "Q4_K_M"; otherwise the file name without .gguf.
  std::string stem = std::filesystem::path(r.path).stem().string();
  auto dot = stem.rfind('.');
  std::string tag = dot == std::string::npos ? "" : stem.substr(dot + 1);
  bool looks_like_type = !tag.empty() && (tag[0] == 'Q' || tag[0] == 'q' || tag[0] == 'I' || tag[0] == 'F' ||
                                          tag[0] == 'f' || tag[0] == 'B' || tag[0] == 'b');
  return looks_like_type ? tag : stem;
}

nlohmann::json RowToJson(const ModelRow& r) {
  nlohmann::json tasks = nlohmann::json::array();
  for (const auto& t : r.tasks) {
    tasks.push_back({{"id", t.id},
                     {"kind", t.kind},
                     {"lang", t.lang},
                     {"pass", t.pass},
                     {"detail", t.detail},
                     {"answer", t.answer}});
  }
  nlohmann::json j = {{"path", r.path},
                      {"label", RowLabel(r)},
                      {"name", r.name},
                      {"type", r.type},
                      {"ok", r.ok},
                      {"error", r.error},
                      {"is_ref", r.is_ref},
                      {"cached", r.cached},
                      {"profile", r.profile},
                      {"file_bytes", r.file_bytes},
                      {"bpw", r.bpw},
                      {"load_s", r.load_s},
                      {"page_cache_warm", r.page_cache_warm},
                      {"amx", r.amx},
                      {"peak_rss", r.peak_rss},
                      {"prefill_tps", r.prefill_tps},
                      {"prefill_ci", r.prefill_ci},
                      {"decode_tps", r.decode_tps},
                      {"decode_ci", r.decode_ci},
                      {"ttft_ms", r.ttft_ms},
                      {"has_ppl", r.has_ppl},
                      {"ppl", r.ppl},
                      {"ppl_err", r.ppl_err},
                      {"has_kld", r.has_kld},
                      {"tasks", tasks}};
  if (r.has_spec) {
    j["spec"] = {{"mode", r.spec_mode},
                 {"error", r.spec_error},
                 {"tps", r.spec_tps},
                 {"speedup", r.spec_speedup},
                 {"speedup_ci", r.spec_speedup_ci},
                 {"acceptance", r.spec_acceptance},
                 {"generations", r.spec_generations},
                 {"differing", r.spec_differing}};
  }
  j["kld"] = {{"mean", r.kld.mean}, {"median", r.kld.median},       {"p99", r.kld.p99},
              {"max", r.kld.max},   {"same_top1", r.kld.same_top1}, {"positions", r.kld.positions}};
  return j;
}

ModelRow RowFromJson(const nlohmann::json& j) {
  ModelRow r;
  r.path = j.value("path", "");
  r.name = j.value("name", "");
  r.type = j.value("type", "");
  r.ok = j.value("ok", false);
  r.error = j.value("error", "");
  r.is_ref = j.value("is_ref", false);
  r.profile = j.value("profile", "");
  r.file_bytes = j.value("file_bytes", uint64_t{0});
  r.bpw = j.value("bpw", 0.0);
  r.load_s = j.value("load_s", 0.0);
  r.page_cache_warm = j.value("page_cache_warm", -1.0);
  r.amx = j.value("amx", false);
  r.peak_rss = j.value("peak_rss", uint64_t{0});
  r.prefill_tps = j.value("prefill_tps", 0.0);
  r.prefill_ci = j.value("prefill_ci", 0.0);
  r.decode_tps = j.value("decode_tps", 0.0);
  r.decode_ci = j.value("decode_ci", 0.0);
  r.ttft_ms = j.value("ttft_ms", 0.0);
  r.has_ppl = j.value("has_ppl", false);
  r.ppl = j.value("ppl", 0.0);
  r.ppl_err = j.value("ppl_err", 0.0);
  r.has_kld = j.value("has_kld", false);
  if (j.contains("kld")) {
    const auto& k = j["kld"];
    r.kld = {k.value("mean", 0.0), k.value("median", 0.0),    k.value("p99", 0.0),
             k.value("max", 0.0),  k.value("same_top1", 0.0), k.value("positions", 0)};
  }
  if (j.contains("spec") && j["spec"].is_object()) {
    const auto& sp = j["spec"];
    r.has_spec = true;
    r.spec_mode = sp.value("mode", "");
    r.spec_error = sp.value("error", "");
    r.spec_tps = sp.value("tps", 0.0);
    r.spec_speedup = sp.value("speedup", 0.0);
    r.spec_speedup_ci = sp.value("speedup_ci", 0.0);
    r.spec_acceptance = sp.value("acceptance", 0.0);
    r.spec_generations = sp.value("generations", 0);
    r.spec_differing = sp.value("differing", 0);
  }
  for (const auto& t : j.value("tasks", nlohmann::json::array())) {
    r.tasks.push_back({t.value("id", ""), t.value("kind", ""), t.value("lang", ""), t.value("pass", false),
                       t.value("detail", ""), t.value("answer", "")});
  }
  return r;
}

std::vector<size_t> ParetoFrontier(const std::vector<ModelRow>& rows) {
  const QualityAxis a = Axis(rows);
  std::vector<size_t> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].ok) continue;
    bool dominated = false;
    for (size_t k = 0; k < rows.size() && !dominated; ++k) {
      if (k == i || !rows[k].ok) continue;
      const ModelRow &x = rows[i], &y = rows[k];
      const double qx = Quality(x, a), qy = Quality(y, a);
      bool ge = y.decode_tps >= x.decode_tps && qy >= qx && y.file_bytes <= x.file_bytes;
      bool gt = y.decode_tps > x.decode_tps || qy > qx || y.file_bytes < x.file_bytes;
      dominated = ge && gt;
    }
    if (!dominated) out.push_back(i);
  }
  return out;
}

Recommendation Recommend(const std::vector<ModelRow>& rows, const Constraints& c_in) {
  Constraints c = c_in;
  std::string defaults;
  const bool all_kld = Axis(rows) == QualityAxis::kKld;
  if (c.max_kld < 0 && c.min_pass_rate < 0 && all_kld) {
    c.max_kld = 0.01;
    defaults = " (default quality bar: mean KLD <= 0.01; set --max-kld or --min-pass-rate)";
  }
  Recommendation rec;
  std::vector<std::string> excluded;
  for (size_t i = 0; i < rows.size(); ++i) {
    const ModelRow& r = rows[i];
    if (!r.ok) continue;
    const uint64_t ram = r.peak_rss ? r.peak_rss : r.file_bytes;
    if (c.max_ram && ram > c.max_ram) {
      excluded.push_back(RowLabel(r) + " needs " + FormatBytes(ram));
      continue;
    }
    if (c.max_kld >= 0 && (!r.has_kld || r.kld.mean > c.max_kld)) {
      excluded.push_back(RowLabel(r) + (r.has_kld ? " has KLD " + Fmt("%.4f", r.kld.mean) : " has no KLD"));
      continue;
    }
    if (c.min_pass_rate >= 0 && (r.tasks.empty() || r.pass_rate() < c.min_pass_rate)) {
      excluded.push_back(RowLabel(r) + " passes " + TasksCell(r) + " tasks");
      continue;
    }
    if (rec.index < 0) {
      rec.index = static_cast<int>(i);
      continue;
    }
    const ModelRow& b = rows[rec.index];
    bool faster = r.decode_tps > b.decode_tps * 1.02;  // within 2%: a tie, prefer the smaller file
    bool tie = !faster && r.decode_tps >= b.decode_tps * 0.98;
    if (faster || (tie && r.file_bytes < b.file_bytes)) rec.index = static_cast<int>(i);
  }
  const bool speed_known = rec.index >= 0 && rows[rec.index].decode_tps > 0;
  std::ostringstream why;
  if (rec.index < 0) {
    why << "no model meets the constraints" << defaults;
  } else {
    const ModelRow& b = rows[rec.index];
    if (speed_known) {
      why << RowLabel(b) << ": the fastest decode (" << Fmt("%.1f", b.decode_tps)
          << " tok/s, ties within 2% go to"
          << " the smaller file) at " << FormatBytes(b.file_bytes);
    } else {
      why << RowLabel(b) << ": the smallest file (" << FormatBytes(b.file_bytes) << "; speed not measured)";
    }
    if (b.has_kld)
      why << ", mean KLD " << Fmt("%.6f", b.kld.mean) << ", top-1 agreement "
          << Fmt("%.1f%%", 100 * b.kld.same_top1);
    if (b.has_ppl) why << ", PPL " << Fmt("%.4f", b.ppl);
    why << ", among models meeting the constraints" << defaults;
  }
  if (!excluded.empty()) {
    why << ". Excluded: ";
    for (size_t i = 0; i < excluded.size(); ++i) why << (i ? "; " : "") << excluded[i];
  }
  rec.reason = why.str();
  return rec;
}

namespace {

// One line per model measured with --spec: how speculation does on its type.
std::string SpecSection(const std::vector<ModelRow>& rows, bool markdown) {
  std::ostringstream o;
  bool any = false;
  for (const ModelRow& r : rows) {
    if (!r.ok || !r.has_spec) continue;
    if (!any) {
      o << (markdown ? "\n**Speculative decoding** (`--spec " : "\nSpeculative decoding (--spec ")
        << r.spec_mode << (markdown ? "`" : "")
        << ", greedy, paired with none; identical: greedy tokens equal none's):\n";
      if (markdown)
        o << "\n| model | decode tok/s | speedup over none | drafts kept | identical "
             "|\n|---|---|---|---|---|\n";
      any = true;
    }
    std::string cells[4];
    if (!r.spec_error.empty()) {
      cells[0] = "failed: " + r.spec_error;
    } else {
      cells[0] = Fmt("%.1f", r.spec_tps);
      cells[1] = Fmt("%.2f", r.spec_speedup) + " ± " + Fmt("%.2f", r.spec_speedup_ci);
      cells[2] = Fmt("%.1f%%", 100 * r.spec_acceptance);
      cells[3] =
          std::to_string(r.spec_generations - r.spec_differing) + "/" + std::to_string(r.spec_generations);
    }
    if (markdown) {
      o << "| " << RowLabel(r) << " | " << cells[0] << " | " << cells[1] << " | " << cells[2] << " | "
        << cells[3] << " |\n";
    } else {
      char line[512];
      std::snprintf(line, sizeof line, "   %-14s %10s tok/s  speedup %-12s kept %-7s identical %s\n",
                    RowLabel(r).c_str(), cells[0].c_str(), cells[1].c_str(), cells[2].c_str(),
                    cells[3].c_str());
      o << line;
    }
  }
  return o.str();
}

}  // namespace

std::string TerminalTable(const BenchResult& b, const std::vector<size_t>& frontier) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-2s %-14s %10s %6s %7s %14s %14s %8s %18s %10s %7s %6s %9s\n", "",
                "model", "size", "bpw", "load s", "prefill tok/s", "decode tok/s", "TTFT ms", "PPL",
                "mean KLD", "top-1", "tasks", "peak RSS");
  o << line;
  for (size_t i = 0; i < b.rows.size(); ++i) {
    const ModelRow& r = b.rows[i];
    std::string mark = std::string(OnFrontier(frontier, i) ? "*" : " ") + (r.is_ref ? "R" : " ");
    if (!r.ok) {
      std::snprintf(line, sizeof line, "%-2s %-14s FAILED: %s\n", mark.c_str(), RowLabel(r).c_str(),
                    r.error.c_str());
      o << line;
      continue;
    }
    std::snprintf(line, sizeof line, "%-2s %-14s %10s %6.2f %7.2f %14s %14s %8.0f %18s %10s %7s %6s %9s\n",
                  mark.c_str(), RowLabel(r).c_str(), FormatBytes(r.file_bytes).c_str(), r.bpw, r.load_s,
                  SpeedCell(r.prefill_tps, r.prefill_ci).c_str(),
                  SpeedCell(r.decode_tps, r.decode_ci).c_str(), r.ttft_ms, PplCell(r).c_str(),
                  KldCell(r).c_str(), r.has_kld ? Fmt("%.1f%%", 100 * r.kld.same_top1).c_str() : "-",
                  TasksCell(r).c_str(), r.peak_rss ? FormatBytes(r.peak_rss).c_str() : "-");
    o << line;
  }
  o << "* = on the Pareto frontier (speed, quality, size); R = reference for KLD\n";
  o << SpecSection(b.rows, false);
  return o.str();
}

std::string MarkdownReport(const BenchResult& b, const std::vector<size_t>& frontier,
                           const Recommendation& rec) {
  std::ostringstream o;
  o << "| model | size | bpw | load s (page cache) | prefill tok/s | decode tok/s | TTFT ms | PPL | mean KLD "
       "| "
       "median / p99 / max KLD | top-1 | tasks | peak RSS | frontier |\n";
  o << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < b.rows.size(); ++i) {
    const ModelRow& r = b.rows[i];
    std::string label = RowLabel(r) + (r.is_ref ? " (ref)" : "") + (r.amx ? " [AMX]" : "");
    if (!r.ok) {
      o << "| " << label << " | failed: " << r.error << " |||||||||||||\n";
      continue;
    }
    o << "| " << label << " | " << FormatBytes(r.file_bytes) << " | " << Fmt("%.2f", r.bpw) << " | "
      << Fmt("%.2f", r.load_s)
      << (r.page_cache_warm >= 0.99 ? " (warm)"
          : r.page_cache_warm >= 0  ? " (cold)"
                                    : "")
      << " | " << SpeedCell(r.prefill_tps, r.prefill_ci) << " | " << SpeedCell(r.decode_tps, r.decode_ci)
      << " | " << Fmt("%.0f", r.ttft_ms) << " | " << PplCell(r) << " | " << KldCell(r) << " | "
      << (r.has_kld
              ? Fmt("%.6f", r.kld.median) + " / " + Fmt("%.5f", r.kld.p99) + " / " + Fmt("%.4f", r.kld.max)
              : "-")
      << " | " << (r.has_kld ? Fmt("%.2f%%", 100 * r.kld.same_top1) : "-") << " | " << TasksCell(r) << " | "
      << (r.peak_rss ? FormatBytes(r.peak_rss) : "-") << " | " << (OnFrontier(frontier, i) ? "✓" : "")
      << " |\n";
  }
  if (std::any_of(b.rows.begin(), b.rows.end(), [](const ModelRow& r) { return r.amx; })) {
    o << "\n[AMX]: weights ran on Intel AMX kernels (Q4_0/Q4_1/Q8_0/Q4_K/Q5_K/Q6_K/IQ4_XS). On such CPUs "
         "the speed ranking can differ from AVX2 machines (Q8_0 and Q4_0 prefill fastest): the "
         "recommendation uses the speeds measured here.\n";
  }
  o << SpecSection(b.rows, true);
  o << "\n**Recommendation:** " << rec.reason << "\n";
  return o.str();
}

std::string CsvReport(const BenchResult& b, const std::vector<size_t>& frontier) {
  std::ostringstream o;
  o << "label,path,ok,error,is_ref,file_bytes,bpw,load_s,page_cache_warm,peak_rss,prefill_tps,prefill_ci,"
       "decode_tps,"
       "decode_ci,ttft_ms,ppl,ppl_err,kld_mean,kld_median,kld_p99,kld_max,same_top1,tasks_passed,tasks_total,"
       "frontier\n";
  auto q = [](std::string s) {
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  };
  for (size_t i = 0; i < b.rows.size(); ++i) {
    const ModelRow& r = b.rows[i];
    o << q(RowLabel(r)) << "," << q(r.path) << "," << r.ok << "," << q(r.error) << "," << r.is_ref << ","
      << r.file_bytes << "," << r.bpw << "," << r.load_s << "," << r.page_cache_warm << "," << r.peak_rss
      << "," << r.prefill_tps << "," << r.prefill_ci << "," << r.decode_tps << "," << r.decode_ci << ","
      << r.ttft_ms << "," << (r.has_ppl ? std::to_string(r.ppl) : "") << ","
      << (r.has_ppl ? std::to_string(r.ppl_err) : "") << "," << (r.has_kld ? Fmt("%.8f", r.kld.mean) : "")
      << "," << (r.has_kld ? Fmt("%.8f", r.kld.median) : "") << ","
      << (r.has_kld ? Fmt("%.8f", r.kld.p99) : "") << "," << (r.has_kld ? Fmt("%.8f", r.kld.max) : "") << ","
      << (r.has_kld ? Fmt("%.6f", r.kld.same_top1) : "") << "," << r.tasks_passed() << "," << r.tasks.size()
      << "," << OnFrontier(frontier, i) << "\n";
  }
  return o.str();
}

nlohmann::json JsonReport(const BenchResult& b, const std::vector<size_t>& frontier,
                          const Recommendation& rec) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < b.rows.size(); ++i) {
    auto j = RowToJson(b.rows[i]);
    j["frontier"] = OnFrontier(frontier, i);
    rows.push_back(j);
  }
  const BenchOptions& o = b.options;
  return {{"machine", b.machine},
          {"reference", b.ref_path},
          {"settings",
           {{"ctx", o.ctx},
            {"chunks", o.chunks},
            {"corpus", o.corpus},
            {"eval", o.eval},
            {"threads", o.threads},
            {"prompt_tokens", o.prompt_tokens},
            {"gen_tokens", o.gen_tokens},
            {"reps", o.reps},
            {"spec", o.spec},
            {"draft", o.draft}}},
          {"rows", rows},
          {"recommendation",
           {{"label", rec.index >= 0 ? RowLabel(b.rows[rec.index]) : ""},
            {"path", rec.index >= 0 ? b.rows[rec.index].path : ""},
            {"reason", rec.reason}}}};
}

}  // namespace hone::quant
