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
  PerplexityOptions options(int n_ctx, int bos) const;
  // The settings a result depends on (besides model, config and length), as JSON.
  nlohmann::json settings() const;
};

// Runs one evaluation with a progress bar labelled `label`.
PerplexityResult run_perplexity(const Model& model, const std::vector<int>& tokens, const PerplexityOptions& options,
                                const std::string& label);

nlohmann::json result_json(const PerplexityResult& r);

// "PPL = 19.3912 ± 0.1234" as llama-perplexity prints it.
std::string ppl_text(double ppl, double stderr_);

// Writes `j` to `path` ("-": stdout) through a temporary file, so a reader never sees half.
void write_json(const std::filesystem::path& path, const nlohmann::json& j);

}  // namespace pert::cli
