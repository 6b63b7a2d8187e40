#include "pert/generate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "pert/error.hpp"

namespace pert {

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

GenerateResult generate(InferenceState& state, const std::vector<int>& prompt, const GenerateOptions& options,
                        Sampler& sampler, const std::function<void(int)>& on_token) {
  const int n_ctx = state.n_ctx(), V = state.vocab_size();
  const int vocab = options.vocab > 0 ? std::min(options.vocab, V) : V;
  if (prompt.empty()) throw Error("generate: empty prompt");
  if (int(prompt.size()) > n_ctx)
    throw Error("generate: the prompt has " + std::to_string(prompt.size()) + " tokens, more than the context size " +
                std::to_string(n_ctx));
  if (options.n_keep < 0) throw Error("generate: --keep must not be negative here");

  GenerateResult r;
  std::vector<float> logits(static_cast<size_t>(V));
  std::vector<int> context = prompt;  // the tokens the cache holds, by position
  std::vector<int> history = prompt;  // everything so far, for the repetition penalty
  auto start = std::chrono::steady_clock::now();
  state.forward(prompt.data(), int(prompt.size()), 0, logits.data(), false);
  r.prompt_seconds = seconds_since(start);

  start = std::chrono::steady_clock::now();
  r.stop = "length";
  const bool until_full = options.n_predict < 0;
  auto interrupted = [&] { return options.interrupt && *options.interrupt; };
  for (int i = 0; until_full || i < options.n_predict; ++i) {
    if (interrupted()) {  // checked once a token is out (and once the prompt has run)
      r.stop = "interrupted";
      break;
    }
    for (int v = 0; v < vocab; ++v)
      if (!std::isfinite(logits[size_t(v)]))
        throw Error("generate: non-finite logits at position " + std::to_string(state.n_past() - 1));
    const int next = sampler.sample(logits.data(), vocab, history);
    if (options.n_probs > 0) r.probs.push_back(sampler.distribution(logits.data(), vocab, next, options.n_probs));
    r.tokens.push_back(next);
    history.push_back(next);
    on_token(next);
    if (!options.ignore_eos && std::find(options.eos.begin(), options.eos.end(), next) != options.eos.end()) {
      r.stop = "eos";
      break;
    }
    if (i + 1 == options.n_predict) break;
    if (interrupted()) {
      r.stop = "interrupted";
      break;
    }
    if (state.n_past() == n_ctx && until_full) {  // no shift: the context is spent
      r.stop = "context";
      break;
    }
    if (state.n_past() == n_ctx) {  // full: drop the older half of what follows n_keep
      if (options.n_keep > n_ctx - 2)
        throw Error("generate: the context of " + std::to_string(n_ctx) + " is full and keeping " +
                    std::to_string(options.n_keep) + " tokens leaves nothing to drop; use a larger -c or a smaller --keep");
      const int n_discard = (state.n_past() - options.n_keep) / 2;
      context.erase(context.begin() + options.n_keep, context.begin() + options.n_keep + n_discard);
      if (!state.shift(options.n_keep, n_discard))  // positions baked into the cache: re-encode
        state.forward(context.data(), int(context.size()), 0, logits.data(), false);
      ++r.context_shifts;
    }
    state.forward(&next, 1, state.n_past(), logits.data(), false);
    context.push_back(next);
  }
  r.generate_seconds = seconds_since(start);
  return r;
}

}  // namespace pert
