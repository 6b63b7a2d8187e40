#include "cli/evaluate.hpp"

#include <cmath>
#include <cstdio>

#include "pert/error.hpp"
#include "pert/model_dir.hpp"

namespace pert::cli {

void EvalFlags::add_to(CLI::App& app) {
  app.add_option("-f,--file", text_file, "Text file to evaluate")->required()->check(input_file(/*streams=*/true));
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
  buckets_flag = app.add_option("--buckets", buckets,
                                "Buckets of the NLL-by-position curve: log (log-spaced, four to an octave: each of "
                                "positions 2 to 7 its own, 1000-1189 one) or N of equal width")
                     ->transform(word_or_int_in("log", kLogBuckets, 1, kMaxBuckets))
                     ->type_name("log|N")
                     ->default_str("log");
  app.add_flag("--split-docs", split_docs,
               "Documents are separated by blank lines; each is encoded on its own with BOS before it "
               "(as the family was trained)");
  // Key tokens (LongPPL, Fang et al., ICLR 2025): include/pert/perplexity.hpp, KeyTokenOptions.
  app.add_flag("--key-tokens", key_tokens,
               "Also score only the key tokens (LongPPL): those whose log-probability with the window's context "
               "is above --key-beta and beats a short context's by more than --key-alpha");
  std::vector<CLI::Option*> key_flags;
  key_flags.push_back(app.add_option("--key-short", key_short,
                                     "With --key-tokens: the short context, in text tokens (the paper's 4096)")
                          ->check(int_in(1))
                          ->capture_default_str());
  key_flags.push_back(app.add_option("--key-step", key_step,
                                     "With --key-tokens: scored tokens that share one short context, so that each "
                                     "has --key-short to --key-short + step - 1 tokens of it (1: exactly --key-short; "
                                     "default: --key-short / 4, as the paper's 1024 for 4096)")
                          ->check(int_in(1)));
  key_flags.push_back(app.add_option("--key-alpha", key_alpha,
                                     "With --key-tokens: least gain ln p(long) - ln p(short) of a key token (paper: 2)")
                          ->check(real_in(-kFloatMax))
                          ->capture_default_str());
  key_flags.push_back(app.add_option("--key-beta", key_beta,
                                     "With --key-tokens: least ln p(long) of a key token (paper: -2)")
                          ->check(real_in(-kFloatMax))
                          ->capture_default_str());
  key_flags.push_back(app.add_option("--key-model", key_model,
                                     "With --key-tokens: the model that chooses the key tokens, with the scored "
                                     "model's tokenizer (default: the scored model itself)")
                          ->check(not_empty()));
  CLI::Option* key_config_flag =
      app.add_option("--key-config", key_config,
                     "With --key-model: a config merged over the evaluator's config.json, a file or inline JSON as "
                     "--config (repeatable; e.g. an extension method, so that it reads past its trained length)")
          ->check(not_empty());
  key_flags.push_back(key_config_flag);
  app.parse_complete_callback([this, stride_flag, key_flags, key_config_flag] {
    for (CLI::Option* flag : key_flags)  // not ignored silently
      if (flag->count() > 0 && !key_tokens)
        throw CLI::ValidationError(flag->get_name(), "only with --key-tokens");
    if (key_config_flag->count() > 0 && key_model.empty())  // the scored model's own config applies when it chooses
      throw CLI::ValidationError("--key-config", "only with --key-model (the scored model chooses under its own --config)");
    if (stride_flag->count() > 0 && mode != "sliding")  // not ignored silently: chunks and llama have no stride
      throw CLI::ValidationError("--stride", "only with --mode sliding (the mode is " + mode + ")");
    if (split_docs && mode == "llama")
      throw CLI::ValidationError("--split-docs",
                                 "not with --mode llama, which tokenizes the whole text once, as llama-perplexity");
  });
}

std::vector<NamedPath> key_inputs(const EvalSpec& spec) {
  std::vector<NamedPath> inputs;
  if (!spec.key_model.empty())
    for (const std::filesystem::path& f : model_dir_files(resolve_model_dir(spec.key_model)))
      inputs.push_back({"--key-model's " + f.filename().string(), f});
  for (const std::string& c : spec.key_config) inputs.push_back({"--key-config", c});
  return inputs;
}

std::string llama_final_text(double ppl, double stderr_) {
  char s[96];
  std::snprintf(s, sizeof s, "Final estimate: PPL = %.4f +/- %.5f", ppl, stderr_);
  return s;
}

}  // namespace pert::cli
