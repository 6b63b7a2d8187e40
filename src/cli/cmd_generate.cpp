// pert generate: text in, streamed text out (flags as in llama.cpp's CLI where they mean the same).
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <random>

#include "cli/cli_common.hpp"
#include "pert/error.hpp"
#include "pert/output_file.hpp"
#include "pert/text_generation.hpp"
#include "pert/tokenizer.hpp"

namespace pert::cli {

namespace {

struct GenerateArgs {
  std::string model_dir, prompt, prompt_file;
  int n_predict = 256, n_ctx = 0, n_keep = 0, threads = 0, n_probs = 0;
  long long seed = -1;
  SamplerParams sampling;
  ConfigFlags config;
  bool json = false, ignore_eos = false, no_display_prompt = false, prompt_given = false;
};

// Set by SIGINT while tokens are generated; generate() stops after the current one.
volatile std::sig_atomic_t interrupted = 0;
extern "C" void on_sigint(int) { interrupted = 1; }

// SIGINT caught for as long as this lives; a second one (SA_RESETHAND) ends pert as usual.
class CatchInterrupt {
 public:
  CatchInterrupt() {
    interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, &old_);
  }
  ~CatchInterrupt() { sigaction(SIGINT, &old_, nullptr); }
  CatchInterrupt(const CatchInterrupt&) = delete;
  CatchInterrupt& operator=(const CatchInterrupt&) = delete;

 private:
  struct sigaction old_ {};
};

// The prompt from -p, -f FILE, or stdin (-p -, or no -p when stdin is not a terminal); a file
// or stdin loses one trailing newline, as llama.cpp's -f reads a prompt file.
std::string read_prompt(const GenerateArgs& a) {
  auto drop_newline = [](std::string s) {
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  };
  if (!a.prompt_file.empty()) return drop_newline(read_utf8_file(a.prompt_file));
  if (a.prompt_given && a.prompt != "-") {
    size_t bad = 0;  // before the model loads: the flag, not the tokenizer, is what is wrong
    if (!valid_utf8(a.prompt, &bad)) throw Error("--prompt: not valid UTF-8 (byte " + std::to_string(bad) + ")");
    return a.prompt;
  }
  if (!a.prompt_given && isatty(STDIN_FILENO))
    throw CLI::ValidationError("no prompt", "give -p TEXT or -f FILE, or pipe one on stdin (-p - reads stdin)");
  std::string text(std::istreambuf_iterator<char>(std::cin), {});
  if (std::cin.bad()) throw IoError("stdin: cannot read the prompt");
  size_t bad = 0;
  if (!valid_utf8(text, &bad)) throw Error("stdin: the prompt is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  return drop_newline(std::move(text));
}

nlohmann::json probs_json(const TokenProbs& probs, int id, const Tokenizer& tok) {
  nlohmann::json top = nlohmann::json::array();
  for (const TokenProb& t : probs.top) top.push_back({{"id", t.id}, {"token", tok.token_text(t.id)}, {"prob", t.p}});
  return {{"id", id}, {"token", tok.token_text(id)}, {"prob", probs.p}, {"top_probs", top}};
}

// Once on stderr, before any text: a context past the trained length (the output then shows
// how the scheme extrapolates), or a run that will fill the context and shift it (the text
// may then lose its thread, or start over).
void note_context(const GenerateArgs& a, const ModelConfig& c, const TextGeneration& g) {
  const int n_ctx = g.n_ctx(), trained = c.max_position_embeddings, prompt = int(g.prompt().size());
  if (n_ctx > trained)
    std::fprintf(stderr, "pert: note: -c %d is past the %d positions the model was trained on\n", n_ctx, trained);
  else if (g.will_shift())
    std::fprintf(stderr,
                 "pert: note: the context of %d%s fills after %d new tokens; then it shifts (half of it is dropped)\n",
                 n_ctx, a.n_ctx > 0 ? "" : " (the trained length)", std::max(0, n_ctx - prompt + 1));
}

void run_generate(GenerateArgs& a) {
  const std::string prompt_text = read_prompt(a);
  use_threads(a.threads);
  const LoadedModel m = load_cli_model(resolve_model_dir(a.model_dir), a.config.overrides(), a.config.weight_type());
  TextGenerationSettings settings;
  settings.n_predict = a.n_predict;
  settings.n_ctx = a.n_ctx;
  settings.n_keep = a.n_keep;
  settings.n_probs = a.n_probs;
  settings.ignore_eos = a.ignore_eos;
  settings.sampling = a.sampling;
  settings.sampling.seed = a.seed >= 0 ? uint64_t(a.seed) : std::random_device{}();
  settings.cache_type = a.config.kv_type();
  settings.interrupt = &interrupted;
  const CatchInterrupt catch_interrupt;
  const size_t dropped = m.tokenizer.dropped_characters();
  TextGeneration g(m, prompt_text, settings);  // errors come before any text
  note_dropped(m.tokenizer, dropped, "the prompt");
  note_context(a, m.model->config(), g);

  std::string text, piece;
  bool echoed = a.json || a.no_display_prompt;  // the prompt is echoed once it has run
  auto echo = [&] {
    if (!echoed) std::cout << prompt_text << std::flush;
    echoed = true;
  };
  while (g.next(piece)) {
    text += piece;
    echo();
    if (!a.json) std::cout << piece << std::flush;
    if (stdout_failed()) finish_stdout();  // no reader or no room: stop now, not after -n tokens
  }
  echo();
  text += piece;  // held back to the end (an incomplete character)
  const GenerateResult& r = g.result();
  const std::vector<int>& prompt = g.prompt();
  const double prompt_tps = prompt.size() / std::max(r.prompt_seconds, 1e-9);
  const double gen_tps = r.tokens.size() / std::max(r.generate_seconds, 1e-9);
  if (a.json) {
    nlohmann::json out = {{"model_dir", m.dir.string()},      {"prompt", prompt_text},
                          {"text", text},                     {"prompt_tokens", prompt},
                          {"tokens", r.tokens},               {"stop", r.stop},
                          {"n_ctx", g.n_ctx()},               {"n_keep", g.n_keep()},
                          {"context_shifts", r.context_shifts}, {"seed", settings.sampling.seed},
                          {"prompt_seconds", r.prompt_seconds}, {"generate_seconds", r.generate_seconds},
                          {"prompt_tokens_per_second", prompt_tps}, {"tokens_per_second", gen_tps}};
    if (a.n_probs > 0) {
      out["probs"] = nlohmann::json::array();
      for (size_t i = 0; i < r.probs.size(); ++i)
        out["probs"].push_back(probs_json(r.probs[i], r.tokens[i], m.tokenizer));
    }
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << piece << std::endl;  // before the stats on stderr
    std::fprintf(stderr,
                 "pert: prompt %zu tokens, %.1f tokens/s | generated %zu tokens, %.1f tokens/s | %d context shifts | "
                 "stop: %s | seed %llu\n",
                 prompt.size(), prompt_tps, r.tokens.size(), gen_tps, r.context_shifts, r.stop.c_str(),
                 (unsigned long long)settings.sampling.seed);
  }
  std::cout << std::flush;
  if (r.stop == "interrupted") throw ExitStatus{130};  // 128 + SIGINT, as a shell reports it
}

}  // namespace

void add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a prompt, streamed to stdout");
  cmd->add_option("-m,--model", a->model_dir, "Model directory or GGUF file (default: models/default)")->check(not_empty());
  CLI::Option* prompt =
      cmd->add_option("-p,--prompt", a->prompt, "Prompt text (-: read it from stdin, as with no -p when stdin is a pipe)");
  cmd->add_option("-f,--file", a->prompt_file, "Read the prompt from this file (one trailing newline dropped)")
      ->check(input_file(/*streams=*/true))
      ->excludes(prompt);
  cmd->add_option("-n,--n-predict", a->n_predict,
                  "Tokens to generate at most (-1: until end of text or a full context, which then does not shift)")
      ->check(int_in_or(-1, "until end of text or a full context", 1, 1 << 30))
      ->capture_default_str();
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
  cmd->add_flag("--no-display-prompt", a->no_display_prompt, "Do not echo the prompt before the generated text");
  a->config.add_to(*cmd);
  CLI::Option* json = cmd->add_flag("--json", a->json, "Write the text, token ids and timings as JSON instead of streaming");
  cmd->add_option("--n-probs", a->n_probs,
                  "With --json: each token's N most likely candidates and their probabilities, as the sampler drew "
                  "from them (after penalty, top-k/top-p/min-p and temperature; greedy: the softmax of the logits)")
      ->check(int_in(0, 1 << 20))
      ->needs(json);
  cmd->callback([a, prompt] {
    a->prompt_given = prompt->count() > 0;
    run_generate(*a);
  });
}

}  // namespace pert::cli
