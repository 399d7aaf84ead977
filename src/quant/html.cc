// The self-contained HTML report: inline CSS and SVG, no scripts, no network.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "quant/report.h"
#include "util/format.h"

namespace hone::quant {
namespace {

std::string Esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string Num(double v, int prec = 3) {
  std::ostringstream o;
  o.precision(prec);
  o << v;
  return o.str();
}

struct Point {
  double x, y;
  std::string label;
  bool highlight;
};

// A scatter plot with axes, ticks and labels; log_y for KLD-like values.
std::string Scatter(const std::string& title, const std::string& xl, const std::string& yl,
                    const std::vector<Point>& pts, bool log_y) {
  const int W = 560, H = 340, L = 70, R = 20, T = 36, B = 50;
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' viewBox='0 0 " << W
    << " " << H << "' role='img'><title>" << Esc(title) << "</title>";
  s << "<text x='" << W / 2 << "' y='20' text-anchor='middle' class='t'>" << Esc(title) << "</text>";
  if (pts.empty()) return s.str() + "<text x='50%' y='50%' text-anchor='middle'>no data</text></svg>";
  auto fy = [&](double y) { return log_y ? std::log10(std::max(y, 1e-7)) : y; };
  double x0 = pts[0].x, x1 = pts[0].x, y0 = fy(pts[0].y), y1 = y0;
  for (const auto& p : pts) {
    x0 = std::min(x0, p.x), x1 = std::max(x1, p.x);
    y0 = std::min(y0, fy(p.y)), y1 = std::max(y1, fy(p.y));
  }
  if (x1 - x0 < 1e-12) x0 -= 1, x1 += 1;
  if (y1 - y0 < 1e-12) y0 -= 1, y1 += 1;
  const double px = (x1 - x0) * 0.08, py = (y1 - y0) * 0.1;
  x0 -= px, x1 += px, y0 -= py, y1 += py;
  auto X = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto Y = [&](double y) { return H - B - (fy(y) - y0) / (y1 - y0) * (H - T - B); };
  for (int i = 0; i <= 4; ++i) {
    double xv = x0 + (x1 - x0) * i / 4, yv = y0 + (y1 - y0) * i / 4;
    double ylab = log_y ? std::pow(10, yv) : yv;
    s << "<text x='" << X(xv) << "' y='" << H - B + 16 << "' text-anchor='middle' class='k'>" << Num(xv)
      << "</text>";
    double yy = H - B - (yv - y0) / (y1 - y0) * (H - T - B);
    s << "<text x='" << L - 6 << "' y='" << yy + 4 << "' text-anchor='end' class='k'>" << Num(ylab, 2)
      << "</text>";
    s << "<line x1='" << L << "' y1='" << yy << "' x2='" << W - R << "' y2='" << yy << "' class='g'/>";
  }
  // Axes after the grid so the grid does not paint over them.
  s << "<line x1='" << L << "' y1='" << H - B << "' x2='" << W - R << "' y2='" << H - B << "' class='ax'/>";
  s << "<line x1='" << L << "' y1='" << T << "' x2='" << L << "' y2='" << H - B << "' class='ax'/>";
  s << "<text x='" << (L + W - R) / 2 << "' y='" << H - 10 << "' text-anchor='middle' class='k'>" << Esc(xl)
    << "</text>";
  s << "<text x='16' y='" << (T + H - B) / 2 << "' text-anchor='middle' class='k' transform='rotate(-90 16 "
    << (T + H - B) / 2 << ")'>" << Esc(yl) << (log_y ? " (log)" : "") << "</text>";
  // The frontier as a line through its points, ordered by x.
  std::vector<Point> f;
  for (const auto& p : pts)
    if (p.highlight) f.push_back(p);
  std::sort(f.begin(), f.end(), [](const Point& a, const Point& b) { return a.x < b.x; });
  if (f.size() > 1) {
    s << "<polyline class='fr' points='";
    for (const auto& p : f) s << X(p.x) << "," << Y(p.y) << " ";
    s << "'/>";
  }
  for (const auto& p : pts) {
    s << "<circle cx='" << X(p.x) << "' cy='" << Y(p.y) << "' r='5' class='" << (p.highlight ? "ph" : "p")
      << "'><title>" << Esc(p.label) << "</title></circle>";
    s << "<text x='" << X(p.x) + 7 << "' y='" << Y(p.y) - 6 << "' class='l'>" << Esc(p.label) << "</text>";
  }
  s << "</svg>";
  return s.str();
}

}  // namespace

std::string HtmlReport(const BenchResult& b, const std::vector<size_t>& frontier, const Recommendation& rec) {
  std::vector<Point> speed, quality;
  bool kld = true;
  for (const auto& r : b.rows) kld &= !r.ok || r.has_kld;
  for (size_t i = 0; i < b.rows.size(); ++i) {
    const ModelRow& r = b.rows[i];
    if (!r.ok) continue;
    bool on = std::find(frontier.begin(), frontier.end(), i) != frontier.end();
    const double mib = r.file_bytes / 1048576.0;
    if (r.decode_tps > 0) speed.push_back({mib, r.decode_tps, RowLabel(r), on});
    if (kld && r.has_kld && !r.is_ref)
      quality.push_back({r.bpw, r.kld.mean, RowLabel(r), on});
    else if (!kld && r.has_ppl)
      quality.push_back({r.bpw, r.ppl, RowLabel(r), on});
  }
  std::ostringstream h;
  h << "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>hone bench report</title><style>"
       "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;font-size:"
       "13px}"
       "td,th{border:1px solid #ccc;padding:4px "
       "8px;text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}"
       ".charts{display:flex;flex-wrap:wrap;gap:1em}svg{border:1px solid #ddd;background:#fff}"
       ".t{font-weight:600;font-size:14px}.k{font-size:11px;fill:#555}.l{font-size:11px}.ax{stroke:#333}"
       ".g{stroke:#eee}.p{fill:#8aa}.ph{fill:#d62}.fr{fill:none;stroke:#d62;stroke-dasharray:4 3}"
       ".rec{background:#eef7ee;border:1px solid #9c9;padding:.8em;margin:1em 0}</style></head><body>";
  h << "<h1>hone bench</h1><p>" << Esc(b.machine) << "</p><p>reference: " << Esc(b.ref_path)
    << "; corpus: " << Esc(b.options.corpus.empty() ? "none" : b.options.corpus) << " (ctx " << b.options.ctx
    << "); tasks: " << Esc(b.options.eval.empty() ? "none" : b.options.eval) << "</p>";
  h << "<div class='rec'><b>Recommendation:</b> " << Esc(rec.reason) << "</div>";
  h << "<div class='charts'>"
    << Scatter("Decode speed vs size", "file size (MiB)", "decode tok/s", speed, false)
    << Scatter(kld ? "Divergence from the reference vs bits per weight" : "Perplexity vs bits per weight",
               "bits per weight", kld ? "mean KLD" : "perplexity", quality, kld)
    << "</div><p>Orange points are on the Pareto frontier (speed, quality, size).</p>";
  h << "<table><tr><th>model</th><th>size</th><th>bpw</th><th>load s</th><th>prefill tok/s</th><th>decode "
       "tok/s</th>"
       "<th>TTFT ms</th><th>PPL</th><th>mean KLD</th><th>p99 KLD</th><th>top-1</th><th>tasks</th><th>peak "
       "RSS</th>"
       "<th>frontier</th></tr>";
  for (size_t i = 0; i < b.rows.size(); ++i) {
    const ModelRow& r = b.rows[i];
    h << "<tr><td>" << Esc(RowLabel(r)) << (r.is_ref ? " (ref)" : "") << "</td>";
    if (!r.ok) {
      h << "<td colspan='13' style='text-align:left;color:#b00'>failed: " << Esc(r.error) << "</td></tr>";
      continue;
    }
    h << "<td>" << FormatBytes(r.file_bytes) << "</td><td>" << Num(r.bpw) << "</td><td>" << Num(r.load_s)
      << "</td><td>" << Num(r.prefill_tps, 4) << " ± " << Num(r.prefill_ci, 2) << "</td><td>"
      << Num(r.decode_tps, 4) << " ± " << Num(r.decode_ci, 2) << "</td><td>" << Num(r.ttft_ms, 4)
      << "</td><td>" << (r.has_ppl ? Num(r.ppl, 5) + " ± " + Num(r.ppl_err, 2) : "-") << "</td><td>"
      << (r.has_kld ? Num(r.kld.mean, 4) : "-") << "</td><td>" << (r.has_kld ? Num(r.kld.p99, 4) : "-")
      << "</td><td>" << (r.has_kld ? Num(100 * r.kld.same_top1, 4) + "%" : "-") << "</td><td>"
      << (r.tasks.empty() ? "-" : std::to_string(r.tasks_passed()) + "/" + std::to_string(r.tasks.size()))
      << "</td><td>" << (r.peak_rss ? FormatBytes(r.peak_rss) : "-") << "</td><td>"
      << (std::find(frontier.begin(), frontier.end(), i) != frontier.end() ? "✓" : "") << "</td></tr>";
  }
  h << "</table></body></html>\n";
  return h.str();
}

}  // namespace hone::quant
