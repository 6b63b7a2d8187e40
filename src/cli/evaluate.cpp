#include "evaluate.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "pert/error.hpp"

namespace pert::cli {

void EvalFlags::add_to(CLI::App& app) {
  app.add_option("-f,--file", text_file, "Text file to evaluate")->required()->check(CLI::ExistingFile);
  app.add_option("--mode", mode, "chunks: non-overlapping windows, every token scored (ALiBi paper); "
                                 "sliding: windows moved by --stride, the last stride tokens scored (YaRN paper)")
      ->check(CLI::IsMember({"chunks", "sliding"}))
      ->capture_default_str();
  app.add_option("--stride", stride, "sliding: tokens the window moves and scores (default: half the context)")
      ->check(int_in(0));
  app.add_option("--chunks", max_windows, "Evaluate at most this many windows (0: all)")
      ->check(int_in(0))
      ->capture_default_str();
  app.add_option("--buckets", buckets, "Equal-width position buckets of the NLL-by-position curve")
      ->check(int_in(1, 1 << 20))
      ->capture_default_str();
  app.add_flag("--split-docs", split_docs,
               "Documents are separated by blank lines; each is encoded on its own with BOS before it "
               "(as the family was trained)");
}

PerplexityOptions EvalFlags::options(int n_ctx, int bos) const {
  PerplexityOptions o;
  o.n_ctx = n_ctx;
  o.mode = mode == "sliding" ? PerplexityMode::Sliding : PerplexityMode::Chunks;
  o.stride = stride;
  o.max_windows = max_windows;
  o.n_buckets = buckets;
  o.bos = bos;
  return o;
}

nlohmann::json EvalFlags::settings() const {
  return {{"text", text_file}, {"mode", mode},         {"stride", stride},
          {"chunks", max_windows}, {"buckets", buckets}, {"split_docs", split_docs}};
}

PerplexityResult run_perplexity(const Model& model, const std::vector<int>& tokens, const PerplexityOptions& options,
                                const std::string& label) {
  Progress bar(label, "windows");
  const PerplexityResult r = evaluate_perplexity(model, tokens, options, [&](int done, int total) {
    bar.update(done, total);
  });
  bar.finish();
  return r;
}

nlohmann::json result_json(const PerplexityResult& r) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const PositionBucket& b : r.buckets)
    buckets.push_back({{"first", b.first}, {"last", b.last}, {"tokens", b.tokens},
                       {"nll", b.tokens ? nlohmann::json(b.nll) : nlohmann::json()}});
  return {{"ppl", r.ppl},         {"ppl_stderr", r.ppl_stderr},
          {"nll", r.nll},         {"tokens", r.tokens},
          {"windows", r.windows}, {"stride", r.stride},
          {"seconds", r.seconds}, {"tokens_per_second", double(r.tokens) / std::max(r.seconds, 1e-9)},
          {"nll_by_position", buckets}};
}

std::string ppl_text(double ppl, double stderr_) {
  char s[96];
  std::snprintf(s, sizeof s, "PPL = %.4f ± %.5f", ppl, stderr_);
  return s;
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  const std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (path == "-") {
    std::cout << text << std::flush;
    return;
  }
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!(out << text) || !out.flush()) throw IoError(tmp.string() + ": cannot write");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw IoError(path.string() + ": cannot write (" + ec.message() + ")");
}

}  // namespace pert::cli
