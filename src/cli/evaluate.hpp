// What `pert perplexity` and `pert sweep` share: the evaluation flags, one cell's run, and
// its result as JSON and as text.
#pragma once
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "pert/perplexity.hpp"

namespace pert::cli {

struct EvalFlags {
  std::string text_file;
  std::string mode = "chunks";
  int stride = 0, max_windows = 0, buckets = 16;
  bool split_docs = false;

  void add_to(CLI::App& app);
  // The BOS the mode puts in each window: `config_bos`, or for llama the tokenizer's (the
  // token its post-processor puts first; -1 when it adds none, as llama's add_bos).
  int bos(const Tokenizer& tokenizer, int config_bos) const;
  // The text file's tokens as the mode reads them (llama: tokenize_file_llama).
  std::vector<int> tokenize(const Tokenizer& tokenizer, int bos) const;
  PerplexityOptions options(int n_ctx, int bos) const;
  // The settings a result depends on (besides model, config and length), as JSON.
  nlohmann::json settings() const;
};

// Runs one evaluation with a progress bar labelled `label` (none when `quiet`).
PerplexityResult run_perplexity(const Model& model, const std::vector<int>& tokens, const PerplexityOptions& options,
                                const std::string& label, bool quiet);

// The result as JSON; llama mode adds running_ppl.
nlohmann::json result_json(const PerplexityResult& r, PerplexityMode mode);

// "PPL = 19.3912 ± 0.1234" as llama-perplexity prints it.
std::string ppl_text(double ppl, double stderr_);
// Its last line exactly: "Final estimate: PPL = 19.3912 +/- 0.12340" (pert perplexity's last line
// in every mode).
std::string llama_final_text(double ppl, double stderr_);

}  // namespace pert::cli
