// One perplexity evaluation as the user asks for it (`pert perplexity`, `pert sweep`, the
// Python module's perplexity() and sweep()): the text, the mode and its settings, turned into
// tokens and PerplexityOptions, and the result as JSON.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/config.hpp"
#include "pert/loaded_model.hpp"
#include "pert/perplexity.hpp"
#include "pert/tokenizer.hpp"

namespace pert {

// "chunks", "sliding" or "llama"; pert::Error naming `where` for anything else.
PerplexityMode parse_perplexity_mode(const std::string& name, const std::string& where = "mode");

struct EvalSpec {
  std::string text_file;          // the text (tokenize()), or "" when given as a string
  std::string mode = "chunks";    // parse_perplexity_mode
  int stride = 0, max_windows = 0;
  int buckets = kLogBuckets;      // NLL by position: kLogBuckets (written "log"), or a count
  bool split_docs = false;
  // Key tokens (LongPPL; perplexity.hpp, KeyTokenOptions): scored beside the plain perplexity.
  bool key_tokens = false;
  int key_short = 4096, key_step = 0;  // the short context's text tokens; tokens sharing one (0: key_short / 4)
  double key_alpha = 2.0, key_beta = -2.0;
  std::string key_model;               // the evaluator ("": each scored model chooses its own)
  std::vector<std::string> key_config; // its config patches (files or inline JSON, as --config), with key_model only

  // The BOS the mode puts in each window: `config_bos`, or for llama the tokenizer's (the
  // token its post-processor puts first; -1 when it adds none, as llama's add_bos).
  int bos(const Tokenizer& tokenizer, int config_bos) const;
  // The text file's tokens as the mode reads them (llama: tokenize_file_llama).
  std::vector<int> tokenize(const Tokenizer& tokenizer, int bos) const;
  // A text given as a string, the same way (llama: no trailing newline dropped).
  std::vector<int> tokenize_text(const Tokenizer& tokenizer, int bos, std::string_view text) const;
  // Every setting in range and the combinations that make sense, pert::Error worded by field
  // (error.hpp) otherwise; options() checks it first.
  void validate() const;
  // (options.key.evaluator stays null: KeyEvaluator gives --key-model's.)
  PerplexityOptions options(int n_ctx, int bos) const;
  // Who chooses the key tokens, for a reader: "the model itself", or key_model and its configs.
  std::string key_evaluator() const;
  // The settings a result depends on (besides model, config and length), as JSON.
  nlohmann::json settings() const;
};

// The model that chooses the key tokens when the spec names one (`key_model`), loaded once.
class KeyEvaluator {
 public:
  // Null when the spec names no key model or wants no key tokens (the scored model chooses);
  // else the evaluator, once its tokenizer has read the spec's text as `tokens` (with `bos`):
  // the evaluator must see the same tokens, pert::Error otherwise.
  const Model* get(const EvalSpec& spec, const std::vector<int>& tokens, int bos);
  // Its choices so far (KeyTokenOptions::shared): the text is one, each model scored reads it as
  // the same tokens (get), so a choice on the same windows is the same.
  KeyChoices* choices() { return &choices_; }

 private:
  std::shared_ptr<LoadedModel> loaded_;
  KeyChoices choices_;
  std::map<int, std::vector<int>> tokens_;  // BOS -> the evaluator's tokens of the text
};

// `buckets` as settings() writes it ("log" or a count) back into EvalSpec::buckets; pert::Error
// naming `where` for anything else.
int buckets_from_json(const nlohmann::json& value, const std::string& where = "`buckets`");

// Runs one evaluation with a progress bar on stderr labelled `label` (none when `quiet`); llama
// mode prints llama-perplexity's running line instead.
PerplexityResult run_perplexity(const Model& model, const std::vector<int>& tokens, const PerplexityOptions& options,
                                const std::string& label, bool quiet);

// "PPL = 19.3912 ± 0.12340" as llama-perplexity prints it.
std::string ppl_text(double ppl, double stderr_);

// The result as JSON; llama mode adds running_ppl, key tokens their count and perplexity.
nlohmann::json perplexity_json(const PerplexityResult& r, PerplexityMode mode);

// What every task's report opens with (perplexity, passkey, ruler; the module's too): the model,
// its positions as run and its trained length, the threads, the weights' and the cache's number types.
nlohmann::json run_header(const std::string& model_dir, const ModelConfig& config, const std::string& dtype,
                          const std::string& cache_type);

// What `pert perplexity --json` and the module's perplexity() report: the model, its positions,
// the window, the text's length, threads and precision, the spec's settings and the result.
nlohmann::json perplexity_report(const std::string& model_dir, const ModelConfig& config, const EvalSpec& spec,
                                 const PerplexityOptions& options, size_t text_tokens, const std::string& dtype,
                                 const std::string& cache_type, const PerplexityResult& result);

}  // namespace pert
