#include "quant/quantize_job.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/imatrix.h"
#include "quant/files.h"
#include "util/progress.h"

namespace hone::quant {
namespace fs = std::filesystem;

namespace {

// What an output was made from; stored beside it as NAME.gguf.hone.json.
nlohmann::json InputsKey(const std::string& src_hash, const std::string& type,
                         const std::string& imatrix_hash) {
  return {{"source_hash", src_hash}, {"type", type}, {"imatrix_hash", imatrix_hash}};
}

bool MatchesExisting(const std::string& path, const nlohmann::json& key) {
  if (!fs::exists(path)) return false;
  auto j = nlohmann::json::parse(ReadText(path + ".hone.json"), nullptr, false);
  return !j.is_discarded() && j.value("inputs", nlohmann::json()) == key;
}

}  // namespace

Result<std::vector<QuantizeOutcome>> QuantizeAll(const std::string& src, const QuantizeJobOptions& opt,
                                                 const std::function<void(const QuantizeOutcome&)>& on_done) {
  auto gguf = engine::ReadGguf(src);
  if (!gguf) return gguf.error();
  if (opt.types.empty())
    return MakeError(ErrorCode::kInvalidArgument, "no types given (--types q8_0,q4_k_m,...)");
  engine::ImatrixData imatrix;
  std::string imatrix_hash;
  if (!opt.imatrix.empty()) {
    auto im = engine::ReadImatrix(opt.imatrix);
    if (!im) return im.error();
    imatrix = std::move(*im);
    auto h = HashFile(opt.imatrix);
    if (!h) return h.error();
    imatrix_hash = *h;
  }
  auto supported = engine::SupportedQuantTypes(*gguf, !imatrix.empty());
  std::vector<engine::QuantType> types;
  for (const auto& name : opt.types) {
    auto t = engine::ParseQuantType(name);
    if (!t) return t.error();
    if (std::none_of(supported.begin(), supported.end(), [&](const auto& s) { return s.name == t->name; })) {
      std::string list;
      for (const auto& s : supported) list += (list.empty() ? "" : ", ") + s.name;
      return MakeError(ErrorCode::kUnsupported,
                       src + " cannot take " + t->name +
                           (t->needs_imatrix && imatrix.empty() ? " without --imatrix" : "") +
                           "; the types it can take: " +
                           (list.empty() ? "none (its weights are already quantized)" : list));
    }
    types.push_back(*t);
  }
  auto src_hash = HashFile(src);
  if (!src_hash) return src_hash.error();
  if (opt.out_dir.empty()) {
    // Beside the source is hone's choice, not the user's: not into a read-only folder.
    if (Status s = CheckDefaultOutputDir(fs::path(src).parent_path().string(), "--out-dir"); !s)
      return s.error();
  } else {
    std::error_code ec;
    fs::create_directories(opt.out_dir, ec);
    if (ec) return MakeError(ErrorCode::kIo, "cannot create " + opt.out_dir + ": " + ec.message());
  }

  std::vector<QuantizeOutcome> out;
  for (const auto& t : types) {
    QuantizeOutcome o;
    o.type = t.name;
    o.path = QuantizedName(src, t.name, opt.out_dir);
    const nlohmann::json key = InputsKey(*src_hash, t.name, imatrix_hash);
    if (!opt.force && MatchesExisting(o.path, key)) {
      auto d = engine::DescribeQuantized(o.path, t);
      if (!d) return d.error();
      o.skipped = true;
      o.result = *d;
    } else {
      engine::QuantizeRequest req{
          src, o.path + ".part", t, opt.threads, imatrix.empty() ? nullptr : &imatrix, opt.imatrix};
      ProgressBar bar("quantize " + t.name, 1000);
      auto r = engine::Quantize(
          req, opt.progress ? [&bar](double f) { bar.UpdateFraction(f); } : std::function<void(double)>());
      if (!r) return r.error();
      bar.Finish();
      std::error_code ec;
      fs::rename(req.dst, o.path, ec);  // only a finished file gets the final name
      if (ec) return MakeError(ErrorCode::kIo, "cannot rename " + req.dst + ": " + ec.message());
      o.result = *r;
      nlohmann::json side = {
          {"inputs", key}, {"source", src}, {"imatrix", opt.imatrix}, {"seconds", r->seconds}};
      if (Status s = WriteTextAtomic(o.path + ".hone.json", side.dump(2)); !s.ok()) return s.error();
    }
    if (on_done) on_done(o);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace hone::quant
