// What `pert perplexity` and `pert sweep` share: the evaluation flags, one cell's run with its
// progress, and its result as text (as JSON: pert/evaluation.hpp).
#pragma once
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common.hpp"
#include "pert/evaluation.hpp"

namespace pert::cli {

// The evaluation's flags (-f, --mode, --stride, --chunks, --buckets, --split-docs) into an EvalSpec.
struct EvalFlags : EvalSpec {
  void add_to(CLI::App& app);
  CLI::Option* buckets_flag = nullptr;  // given or not (sweep resumes with the file's buckets when not)
};

// Runs one evaluation with a progress bar labelled `label` (none when `quiet`).
PerplexityResult run_perplexity(const Model& model, const std::vector<int>& tokens, const PerplexityOptions& options,
                                const std::string& label, bool quiet);

// "PPL = 19.3912 ± 0.1234" as llama-perplexity prints it.
std::string ppl_text(double ppl, double stderr_);
// Its last line exactly: "Final estimate: PPL = 19.3912 +/- 0.12340" (pert perplexity's last line
// in every mode).
std::string llama_final_text(double ppl, double stderr_);

}  // namespace pert::cli
