// pert generate: text in, streamed text out (flags as in llama.cpp's CLI where they mean the same).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <random>

#include "common.hpp"
#include "pert/error.hpp"
#include "pert/generate.hpp"
#include "pert/tokenizer.hpp"

namespace pert::cli {

namespace {

struct GenerateArgs {
  std::string model_dir, prompt;
  int n_predict = 256, n_ctx = 0, n_keep = 0, threads = 0;
  long long seed = -1;
  SamplerParams sampling;
  ConfigFlags config;
  bool json = false, ignore_eos = false;
};

void run_generate(GenerateArgs& a) {
  size_t bad = 0;  // before the model loads: the flag, not the tokenizer, is what is wrong
  if (!valid_utf8(a.prompt, &bad)) throw Error("--prompt: not valid UTF-8 (byte " + std::to_string(bad) + ")");
  set_threads(a.threads);
  const LoadedModel m = load_model(resolve_model_dir(a.model_dir), a.config.overrides(), a.config.weight_type());
  const std::filesystem::path& dir = m.dir;
  const Tokenizer& tok = m.tokenizer;
  const ModelConfig& c = m.model->config();

  const int n_lead = int(tok.prefix_special().size());  // what the post-processor puts first (e.g. <s>)
  std::vector<int> prompt = tok.prefix_special();
  for (int id : tok.encode(a.prompt)) prompt.push_back(id);
  const int n_ctx = a.n_ctx > 0 ? a.n_ctx : std::min(c.max_position_embeddings, 4096);
  GenerateOptions options;
  options.n_predict = a.n_predict;
  options.vocab = tok.vocab_size();
  options.eos = c.eos_token_ids;
  options.ignore_eos = a.ignore_eos;
  // As llama.cpp: --keep counts prompt tokens (-1: all of them) and the leading special tokens are always kept.
  const int prompt_text = int(prompt.size()) - n_lead;
  options.n_keep = (a.n_keep < 0 || a.n_keep > prompt_text ? prompt_text : a.n_keep) + n_lead;
  a.sampling.seed = a.seed >= 0 ? uint64_t(a.seed) : std::random_device{}();
  Sampler sampler(a.sampling);
  InferenceState state(*m.model, n_ctx);
  if (const int max = state.max_positions(); max > 0 && n_ctx > max)  // now, not after text has streamed out
    throw Error("-c " + std::to_string(n_ctx) + " is past the " + c.position.type() +
                " position table (" + std::to_string(max) + " positions); pass -c " + std::to_string(max) +
                " or less, or --set position.beyond=clamp to reuse the last one");

  // The continuation is decoded as what follows the prompt (its leading space is kept).
  StreamDecoder stream(tok);
  stream.prime(prompt);
  std::string text;
  bool echoed = a.json;  // the prompt is echoed once it has run, so errors come before any text
  auto echo = [&] {
    if (!echoed) std::cout << a.prompt << std::flush;
    echoed = true;
  };
  const GenerateResult r = generate(state, prompt, options, sampler, [&](int id) {
    const std::string piece = stream.push(id);
    text += piece;
    echo();
    if (!a.json) std::cout << piece << std::flush;
  });
  echo();
  const std::string held = stream.flush();  // an incomplete character at the very end
  text += held;
  const double prompt_tps = prompt.size() / std::max(r.prompt_seconds, 1e-9);
  const double gen_tps = r.tokens.size() / std::max(r.generate_seconds, 1e-9);
  if (a.json) {
    const nlohmann::json out = {{"model_dir", dir.string()},       {"prompt", a.prompt},
                                {"text", text},                     {"prompt_tokens", prompt},
                                {"tokens", r.tokens},               {"stop", r.stop},
                                {"n_ctx", n_ctx},                   {"n_keep", options.n_keep},
                                {"context_shifts", r.context_shifts}, {"seed", a.sampling.seed},
                                {"prompt_seconds", r.prompt_seconds}, {"generate_seconds", r.generate_seconds},
                                {"prompt_tokens_per_second", prompt_tps}, {"tokens_per_second", gen_tps}};
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  std::cout << held << std::endl;  // before the stats on stderr
  std::fprintf(stderr,
               "pert: prompt %zu tokens, %.1f tokens/s | generated %zu tokens, %.1f tokens/s | %d context shifts | "
               "stop: %s | seed %llu\n",
               prompt.size(), prompt_tps, r.tokens.size(), gen_tps, r.context_shifts, r.stop.c_str(),
               (unsigned long long)a.sampling.seed);
}

}  // namespace

void add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt, streamed to stdout");
  cmd->add_option("-m,--model", a->model_dir, "Model directory (default: models/default)");
  cmd->add_option("-p,--prompt", a->prompt, "Prompt text")->required();
  cmd->add_option("-n,--n-predict", a->n_predict, "Tokens to generate at most")->check(int_in(1, 1 << 30))->capture_default_str();
  cmd->add_option("-c,--ctx-size", a->n_ctx, "Context size (default: the trained length, at most 4096); past it the context shifts")
      ->check(int_in(0));
  cmd->add_option("--keep", a->n_keep, "Prompt tokens kept on a context shift (-1: all)")->check(int_in(-1))->capture_default_str();
  cmd->add_option("--temp", a->sampling.temperature, "Temperature (0: greedy)")->check(real_in(0.0))->capture_default_str();
  cmd->add_option("--top-k", a->sampling.top_k, "Top-k (0: off)")->check(int_in(0))->capture_default_str();
  cmd->add_option("--top-p", a->sampling.top_p, "Top-p (1: off)")->check(real_in(0.0, 1.0))->capture_default_str();
  cmd->add_option("--min-p", a->sampling.min_p, "Min-p (0: off)")->check(real_in(0.0, 1.0))->capture_default_str();
  cmd->add_option("--repeat-penalty", a->sampling.repeat_penalty, "Repetition penalty (1: off)")
      ->check(real_in(0.0, kFloatMax, true))
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", a->sampling.repeat_last_n, "Tokens the penalty looks back over (0: off)")
      ->check(int_in(0))
      ->capture_default_str();
  cmd->add_option("-s,--seed", a->seed, "Random seed (-1: random)")->check(int_in(-1, std::numeric_limits<long long>::max()))->capture_default_str();
  add_threads(*cmd, a->threads);
  cmd->add_flag("--ignore-eos", a->ignore_eos, "Keep generating past end-of-sequence tokens");
  a->config.add_to(*cmd);
  cmd->add_flag("--json", a->json, "Write the text, token ids and timings as JSON instead of streaming");
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace pert::cli
