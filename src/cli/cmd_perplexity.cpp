// pert perplexity: PPL of a text at one context length, with the NLL-by-position curve
// (flags as llama-perplexity's where they mean the same).
#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli/evaluate.hpp"
#include "pert/error.hpp"

namespace pert::cli {

namespace {

struct PerplexityArgs {
  std::string model_dir;
  int n_ctx = 0, threads = 0;
  bool quiet = false;
  JsonFlags json;
  EvalFlags eval;
  ConfigFlags config;
};

// The key tokens' line (LongPPL): their count, their perplexity and how they were chosen.
void print_key_tokens(const PerplexityResult& r, const EvalSpec& e, int n_ctx, int has_bos) {
  const std::string evaluator = e.key_evaluator();
  std::printf("key tokens (LongPPL; short context %d-%d tokens, alpha %g, beta %g, chosen by %s): %lld of %lld scored "
              "(%lld with more context than the short), %.2f s to choose\n",
              r.key.short_len, r.key.short_len + r.key.step - 1, e.key_alpha, e.key_beta, evaluator.c_str(), r.key.tokens,
              r.tokens, r.key.candidates, r.key.seconds);
  if (r.key.tokens > 0)
    std::printf("key-token %s\n", ppl_text(r.key.ppl, r.key.ppl_stderr).c_str());
  else if (r.key.candidates == 0)
    std::printf("no key tokens: no scored token has more than %d text tokens before it (at most %d at -c %d); lower "
                "--key-short\n", r.key.short_len, n_ctx - 1 - has_bos, n_ctx);
  else
    std::printf("no key tokens: no perplexity over them\n");
}

void run(const PerplexityArgs& a) {
  std::vector<NamedPath> inputs = run_inputs({a.model_dir}, a.config.files, a.eval.text_file);
  for (NamedPath& p : key_inputs(a.eval)) inputs.push_back(std::move(p));
  check_distinct_paths({{"--json-out", a.json.file}}, inputs);
  use_threads(a.threads);
  const LoadedModel m = load_cli_model(resolve_model_dir(a.model_dir), a.config.overrides(), a.config.weight_type());
  const ModelConfig& c = m.model->config();
  const int n_ctx = a.n_ctx > 0 ? a.n_ctx : c.max_position_embeddings;
  const int bos = a.eval.bos(m.tokenizer, c.bos_token_id);
  const size_t dropped = m.tokenizer.dropped_characters();
  const std::vector<int> tokens = a.eval.tokenize(m.tokenizer, bos);
  note_dropped(m.tokenizer, dropped, a.eval.text_file);
  PerplexityOptions o = a.eval.options(n_ctx, bos);
  o.cache_type = a.config.kv_type();
  KeyEvaluator key_evaluator;  // --key-model's
  o.key.evaluator = key_evaluator.get(a.eval, tokens, bos);
  const PerplexityResult r = run_perplexity(*m.model, tokens, o, "perplexity", a.quiet);

  const double tps = double(r.tokens) / std::max(r.seconds, 1e-9);
  if (a.json.wanted() && a.json.write(perplexity_report(m.dir.string(), c, a.eval, o, tokens.size(), resolved_dtype(a.config.dtype, m.dir),
                                                         a.config.cache_type, r)))
    return;
  std::printf("%s: %s\n", m.dir.string().c_str(), describe_position(c).c_str());
  if (o.mode == PerplexityMode::Llama) {
    std::printf("%s: %zu tokens%s; llama chunks of %d tokens (%s), positions %d-%d scored, trained length %d\n",
                a.eval.text_file.c_str(), tokens.size(), o.bos >= 0 ? " (BOS first)" : "", n_ctx,
                o.bos >= 0 ? "BOS in place of the first" : "no BOS", n_ctx / 2 + 1, n_ctx - 1,
                c.max_position_embeddings);
  } else {
    std::printf("%s: %zu tokens; %s windows of %d positions (%s%d text tokens), trained length %d\n",
                a.eval.text_file.c_str(), tokens.size(), perplexity_mode_name(o.mode), n_ctx,
                o.bos >= 0 ? "BOS + " : "", window_text_tokens(o), c.max_position_embeddings);
    std::printf("%s\n", ppl_text(r.ppl, r.ppl_stderr).c_str());
  }
  std::printf("%lld tokens scored in %d windows (stride %d), %.2f s, %.1f tokens/s\n", r.tokens, r.windows, r.stride,
              r.seconds, tps);
  if (r.has_key) print_key_tokens(r, a.eval, n_ctx, o.bos >= 0 ? 1 : 0);
  std::printf("\nNLL by position in the window:\n\n| positions | tokens | NLL | PPL |\n|---|---:|---:|---:|\n");
  for (const PositionBucket& b : r.buckets) {
    if (!b.tokens) continue;
    const std::string at = b.first == b.last ? std::to_string(b.first) : std::to_string(b.first) + "–" + std::to_string(b.last);
    std::printf("| %s | %lld | %.4f | %.3f |\n", at.c_str(), b.tokens, b.nll, std::exp(b.nll));
  }
  std::printf("\n%s\n", llama_final_text(r.ppl, r.ppl_stderr).c_str());  // last, as llama-perplexity's
}

}  // namespace

void add_perplexity(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity of a text at a context length, and NLL by position");
  cmd->add_option("-m,--model", a->model_dir, "Model directory or GGUF file (default: models/default)")->check(not_empty());
  cmd->add_option("-c,--ctx-size", a->n_ctx, "Context length: positions per window, BOS included (default: the trained length)")
      ->check(int_in(0));
  a->eval.add_to(*cmd);
  add_threads(*cmd, a->threads);
  a->config.add_to(*cmd);
  add_quiet(*cmd, a->quiet);
  a->json.add_to(*cmd, "the result");
  cmd->callback([a] { run(*a); });
}

}  // namespace pert::cli
