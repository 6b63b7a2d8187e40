#include "evaluate.hpp"

#include <cmath>
#include <cstdio>

#include "pert/error.hpp"

namespace pert::cli {

void EvalFlags::add_to(CLI::App& app) {
  app.add_option("-f,--file", text_file, "Text file to evaluate")->required()->check(CLI::ExistingFile);
  app.add_option("--mode", mode, "chunks: non-overlapping windows, every token scored (ALiBi paper); "
                                 "sliding: windows moved by --stride, the last stride tokens scored (YaRN paper); "
                                 "llama: as llama-perplexity, chunks of the text tokenized once, BOS in place of "
                                 "each chunk's first token, its second half scored")
      ->check(CLI::IsMember({"chunks", "sliding", "llama"}))
      ->capture_default_str();
  CLI::Option* stride_flag =
      app.add_option("--stride", stride, "With --mode sliding: tokens the window moves and scores (default: half the context)")
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
  app.parse_complete_callback([this, stride_flag] {
    if (stride_flag->count() > 0 && mode != "sliding")  // not ignored silently: chunks and llama have no stride
      throw CLI::ValidationError("--stride", "only with --mode sliding (the mode is " + mode + ")");
    if (split_docs && mode == "llama")
      throw CLI::ValidationError("--split-docs",
                                 "not with --mode llama, which tokenizes the whole text once, as llama-perplexity");
  });
}

int EvalFlags::bos(const Tokenizer& tokenizer, int config_bos) const {
  if (mode != "llama") return config_bos;
  if (!tokenizer.suffix_special().empty())  // llama-perplexity asserts that the vocab adds no EOS
    throw Error("--mode llama: the tokenizer adds " + tokenizer.piece(tokenizer.suffix_special().front()) +
                " after a text, which llama-perplexity refuses");
  return tokenizer.prefix_special().empty() ? -1 : tokenizer.prefix_special().front();
}

std::vector<int> EvalFlags::tokenize(const Tokenizer& tokenizer, int bos) const {
  if (mode == "llama") return tokenize_file_llama(tokenizer, text_file);
  return tokenize_file(tokenizer, text_file, bos, split_docs);
}

PerplexityOptions EvalFlags::options(int n_ctx, int bos) const {
  PerplexityOptions o;
  o.n_ctx = n_ctx;
  o.mode = mode == "sliding" ? PerplexityMode::Sliding
           : mode == "llama" ? PerplexityMode::Llama
                             : PerplexityMode::Chunks;
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
                                const std::string& label, bool quiet) {
  if (options.mode == PerplexityMode::Llama && !quiet) {  // llama-perplexity's running line instead of a bar
    std::fprintf(stderr, "%s: ", label.c_str());
    const PerplexityResult r = evaluate_perplexity(model, tokens, options, [](int done, int, double ppl) {
      std::fprintf(stderr, "[%d]%.4f,", done, ppl);
      std::fflush(stderr);
    });
    std::fputc('\n', stderr);
    return r;
  }
  Progress bar(label, "windows", quiet);
  const PerplexityResult r = evaluate_perplexity(model, tokens, options, [&](int done, int total, double) {
    bar.update(done, total);
  });
  bar.finish();
  return r;
}

nlohmann::json result_json(const PerplexityResult& r, PerplexityMode mode) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const PositionBucket& b : r.buckets)
    buckets.push_back({{"first", b.first}, {"last", b.last}, {"tokens", b.tokens},
                       {"nll", b.tokens ? nlohmann::json(b.nll) : nlohmann::json()}});
  nlohmann::json j = {{"ppl", r.ppl},         {"ppl_stderr", r.ppl_stderr},
                      {"nll", r.nll},         {"tokens", r.tokens},
                      {"windows", r.windows}, {"stride", r.stride},
                      {"seconds", r.seconds}, {"tokens_per_second", double(r.tokens) / std::max(r.seconds, 1e-9)},
                      {"nll_by_position", buckets}};
  if (mode == PerplexityMode::Llama) j["running_ppl"] = r.running_ppl;  // llama-perplexity's [i] figures
  return j;
}

std::string ppl_text(double ppl, double stderr_) {
  char s[96];
  std::snprintf(s, sizeof s, "PPL = %.4f ± %.5f", ppl, stderr_);
  return s;
}

std::string llama_final_text(double ppl, double stderr_) {
  char s[96];
  std::snprintf(s, sizeof s, "Final estimate: PPL = %.4f +/- %.5f", ppl, stderr_);
  return s;
}

}  // namespace pert::cli
