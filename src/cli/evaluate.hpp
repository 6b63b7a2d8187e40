// What `pert perplexity` and `pert sweep` share: the evaluation flags, and the result's last line
// (one run with its progress, and the result as JSON and text: pert/evaluation.hpp).
#pragma once
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_common.hpp"
#include "pert/evaluation.hpp"

namespace pert::cli {

// The evaluation's flags (-f, --mode, --stride, --chunks, --buckets, --split-docs) into an EvalSpec.
struct EvalFlags : EvalSpec {
  void add_to(CLI::App& app);
  CLI::Option* buckets_flag = nullptr;  // given or not (sweep resumes with the file's buckets when not)
};

// The key tokens' evaluator's files (--key-model's, --key-config), which no output may overwrite.
std::vector<NamedPath> key_inputs(const EvalSpec& spec);

// llama-perplexity's last line exactly: "Final estimate: PPL = 19.3912 +/- 0.12340" (pert perplexity's last line
// in every mode).
std::string llama_final_text(double ppl, double stderr_);

}  // namespace pert::cli
