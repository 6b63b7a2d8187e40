#include "pert/evaluation.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "pert/error.hpp"
#include "pert/json_util.hpp"
#include "pert/loaded_model.hpp"
#include "pert/progress.hpp"

namespace pert {

PerplexityMode parse_perplexity_mode(const std::string& name, const std::string& where) {
  if (name == "chunks") return PerplexityMode::Chunks;
  if (name == "sliding") return PerplexityMode::Sliding;
  if (name == "llama") return PerplexityMode::Llama;
  throw Error(where + ": must be chunks, sliding or llama, got '" + name + "'");
}

int EvalSpec::bos(const Tokenizer& tokenizer, int config_bos) const {
  if (mode != "llama") return config_bos;
  if (!tokenizer.suffix_special().empty())  // llama-perplexity asserts that the vocab adds no EOS
    throw Error("`mode` llama: the tokenizer adds " + tokenizer.piece(tokenizer.suffix_special().front()) +
                " after a text, which llama-perplexity refuses");
  return tokenizer.prefix_special().empty() ? -1 : tokenizer.prefix_special().front();
}

std::vector<int> EvalSpec::tokenize(const Tokenizer& tokenizer, int bos) const {
  if (mode == "llama") return tokenize_file_llama(tokenizer, text_file);
  return tokenize_file(tokenizer, text_file, bos, split_docs);
}

std::vector<int> EvalSpec::tokenize_text(const Tokenizer& tokenizer, int bos, std::string_view text) const {
  if (mode == "llama") return tokenize_text_llama(tokenizer, text);
  return pert::tokenize_text(tokenizer, text, bos, split_docs);
}

namespace {
// `buckets`: "log" (kLogBuckets) or a count, whether set in C++, read from a sweep file or given in Python.
bool bucket_count_in_range(long long n) { return n >= 1 && n <= kMaxBuckets; }
std::string buckets_rule() { return "must be \"log\" or a count from 1 to " + std::to_string(kMaxBuckets) + ", got "; }
}  // namespace

void EvalSpec::validate() const {
  parse_perplexity_mode(mode, "`mode`");
  auto fail = [](const std::string& what) { throw Error("perplexity: " + what); };
  if (stride < 0) fail("`stride` must be >= 0, got " + std::to_string(stride));
  if (stride != 0 && mode != "sliding") fail("`stride` only with `mode` sliding (the mode is " + mode + ")");
  if (max_windows < 0) fail("`max_windows` must be >= 0, got " + std::to_string(max_windows));
  if (buckets != kLogBuckets && !bucket_count_in_range(buckets)) fail("`buckets` " + buckets_rule() + std::to_string(buckets));
  if (split_docs && mode == "llama") fail("`split_docs` not with `mode` llama, which tokenizes the whole text once");
  if (key_short < 1) fail("`key_short` (the key tokens' short context) must be >= 1 token, got " + std::to_string(key_short));
  if (key_step < 0) fail("`key_step` must be >= 0 (0: key_short / 4), got " + std::to_string(key_step));
  if (!std::isfinite(key_alpha) || !std::isfinite(key_beta)) fail("`key_alpha` and `key_beta` must be finite");
  if (!key_tokens && !key_model.empty()) fail("`key_model` only with `key_tokens`");
  if (key_model.empty() && !key_config.empty())  // the scored model choosing runs under its own config
    fail("`key_config` only with `key_model` (the evaluator it configures)");
}

PerplexityOptions EvalSpec::options(int n_ctx, int bos) const {
  validate();
  PerplexityOptions o;
  o.n_ctx = n_ctx;
  o.mode = parse_perplexity_mode(mode);
  o.stride = stride;
  o.max_windows = max_windows;
  o.n_buckets = buckets;
  o.bos = bos;
  o.key.enabled = key_tokens;
  o.key.short_len = key_short;
  o.key.step = key_step;
  o.key.alpha = key_alpha;
  o.key.beta = key_beta;
  return o;
}

std::string EvalSpec::key_evaluator() const {
  if (key_model.empty()) return "the model itself";
  std::string s = key_model;
  for (const std::string& c : key_config) s += " --key-config " + c;
  return s;
}

nlohmann::json EvalSpec::settings() const {
  nlohmann::json j = {{"text", text_file},
                      {"mode", mode},
                      {"stride", stride},
                      {"chunks", max_windows},
                      {"buckets", buckets == kLogBuckets ? nlohmann::json("log") : nlohmann::json(buckets)},
                      {"split_docs", split_docs}};
  if (key_tokens)  // (only then: the files of plain sweeps keep their settings)
    j.update({{"key_tokens", true},
              {"key_short", key_short},
              {"key_step", key_step > 0 ? key_step : std::max(1, key_short / 4)},
              {"key_alpha", key_alpha},
              {"key_beta", key_beta},
              {"key_model", key_model}});
  if (!key_config.empty()) j["key_config"] = key_config;  // (only then: earlier key sweeps' settings stay equal)
  return j;
}

const Model* KeyEvaluator::get(const EvalSpec& spec, const std::vector<int>& tokens, int bos) {
  if (!spec.key_tokens || spec.key_model.empty()) return nullptr;
  if (spec.text_file.empty())
    throw Error("perplexity: `key_model` needs the text as a file, to read it with the evaluator's tokenizer");
  if (!loaded_) {
    ConfigOverrides overrides;
    overrides.files.assign(spec.key_config.begin(), spec.key_config.end());
    loaded_ = std::make_shared<LoadedModel>(load_model(spec.key_model, overrides));
  }
  auto it = tokens_.find(bos);
  if (it == tokens_.end()) it = tokens_.emplace(bos, spec.tokenize(loaded_->tokenizer, bos)).first;
  if (it->second != tokens) {
    const auto diff = std::mismatch(tokens.begin(), tokens.end(), it->second.begin(), it->second.end());
    throw Error("perplexity: the key tokens' evaluator " + spec.key_model + " reads " + spec.text_file +
                " as other tokens (" + std::to_string(it->second.size()) + " against " + std::to_string(tokens.size()) +
                ", the first difference at " + std::to_string(diff.first - tokens.begin()) +
                "): it needs the scored model's tokenizer");
  }
  return loaded_->model.get();
}

int buckets_from_json(const nlohmann::json& value, const std::string& where) {
  if (value == "log") return kLogBuckets;
  if (value.is_number_integer() && bucket_count_in_range(value.get<long long>())) return value.get<int>();
  throw Error(where + ": " + buckets_rule() + json_brief(value));
}

nlohmann::json perplexity_json(const PerplexityResult& r, PerplexityMode mode) {
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
  if (r.has_key) {
    const bool any = r.key.tokens > 0;  // (no key token: no perplexity, null)
    j.update({{"key_tokens", r.key.tokens},
              {"key_candidates", r.key.candidates},
              {"key_ppl", any ? nlohmann::json(r.key.ppl) : nlohmann::json()},
              {"key_ppl_stderr", any ? nlohmann::json(r.key.ppl_stderr) : nlohmann::json()},
              {"key_nll", any ? nlohmann::json(r.key.nll) : nlohmann::json()},
              {"key_seconds", r.key.seconds}});
  }
  return j;
}

nlohmann::json run_header(const std::string& model_dir, const ModelConfig& config, const std::string& dtype,
                          const std::string& cache_type) {
  return {{"model_dir", model_dir},
          {"position", describe_position(config)},
          {"position_label", position_label(config)},
          {"trained_length", config.max_position_embeddings},
          {"threads", omp_get_max_threads()},
          {"dtype", dtype},
          {"cache_type", cache_type}};
}

nlohmann::json perplexity_report(const std::string& model_dir, const ModelConfig& config, const EvalSpec& spec,
                                 const PerplexityOptions& options, size_t text_tokens, const std::string& dtype,
                                 const std::string& cache_type, const PerplexityResult& result) {
  nlohmann::json j = run_header(model_dir, config, dtype, cache_type);
  j.update({{"n_ctx", options.n_ctx}, {"text_tokens", text_tokens}});
  j.update(spec.settings());
  j.update(perplexity_json(result, options.mode));
  if (result.has_key) j["key_token_indices"] = result.key.indices;  // (a sweep's cells keep only the count)
  return j;
}

PerplexityResult run_perplexity(const Model& model, const std::vector<int>& tokens, const PerplexityOptions& options,
                                const std::string& label, bool quiet) {
  if (options.mode == PerplexityMode::Llama && !quiet) {  // llama-perplexity's running line instead of a bar
    std::fprintf(stderr, "%s: ", label.c_str());
    const PerplexityResult r = evaluate_perplexity(model, tokens, options, [](const PerplexityStep& step) {
      if (!step.window_end) return;
      std::fprintf(stderr, "[%d]%.4f,", step.windows, step.running_ppl);
      std::fflush(stderr);
    });
    std::fputc('\n', stderr);
    return r;
  }
  Progress bar(label, "positions", quiet);  // positions, not windows: one long window moves it too
  const PerplexityResult r = evaluate_perplexity(model, tokens, options, [&](const PerplexityStep& step) {
    bar.update(step.positions, step.total_positions, step.windows_text());
  });
  bar.finish();
  return r;
}

std::string ppl_text(double ppl, double stderr_) {
  char s[96];
  std::snprintf(s, sizeof s, "PPL = %.4f ± %.5f", ppl, stderr_);
  return s;
}

}  // namespace pert
