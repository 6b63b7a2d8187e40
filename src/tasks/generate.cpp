#include "pert/generate.hpp"

#include <algorithm>
#include <cmath>

#include "pert/error.hpp"
#include "pert/progress.hpp"

namespace pert {

Generation::Generation(InferenceState& state, const std::vector<int>& prompt, const GenerateOptions& options,
                       Sampler& sampler)
    : state_(state), options_(options), sampler_(sampler) {
  const int n_ctx = state.n_ctx(), V = state.vocab_size();
  vocab_ = options.vocab > 0 ? std::min(options.vocab, V) : V;
  if (prompt.empty()) throw Error("generate: empty prompt");
  if (int(prompt.size()) > n_ctx)
    throw Error("generate: the prompt has " + std::to_string(prompt.size()) + " tokens, more than the context size " +
                std::to_string(n_ctx));
  if (options.n_keep < 0) throw Error("generate: `n_keep` must not be negative here");
  logits_.resize(size_t(V));
  context_ = history_ = prompt;
  const double start = now_seconds();
  state.forward(prompt.data(), int(prompt.size()), 0, logits_.data(), false);
  started_ = now_seconds();
  r_.prompt_seconds = started_ - start;
  r_.stop = "length";
  done_ = options.n_predict == 0;
}

void Generation::stop(const char* why) {
  r_.stop = why;
  done_ = true;
}

int Generation::next() {
  const auto interrupted = [&] { return options_.interrupt && *options_.interrupt; };
  const int n_ctx = state_.n_ctx();
  if (!done_ && pending_ >= 0) {  // feed the token returned last time
    if (interrupted()) {
      stop("interrupted");
    } else if (state_.n_past() == n_ctx && options_.n_predict < 0) {  // no shift: the context is spent
      stop("context");
    } else {
      if (state_.n_past() < int(context_.size()))  // a re-encode stopped midway (check_interrupt): finish it
        state_.forward(context_.data() + state_.n_past(), int(context_.size()) - state_.n_past(), state_.n_past(),
                       logits_.data(), false);
      if (state_.n_past() == n_ctx) {  // full: drop the older half of what follows n_keep
        if (options_.n_keep > n_ctx - 2)
          throw Error("generate: the context of " + std::to_string(n_ctx) + " is full and keeping " +
                      std::to_string(options_.n_keep) +
                      " tokens leaves nothing to drop; use a larger `n_ctx` or a smaller `n_keep`");
        const int n_discard = (state_.n_past() - options_.n_keep) / 2;
        context_.erase(context_.begin() + options_.n_keep, context_.begin() + options_.n_keep + n_discard);
        if (!state_.shift(options_.n_keep, n_discard))  // positions baked into the cache: re-encode
          state_.forward(context_.data(), int(context_.size()), 0, logits_.data(), false);
        ++r_.context_shifts;
      }
      state_.forward(&pending_, 1, state_.n_past(), logits_.data(), false);
      context_.push_back(pending_);
      pending_ = -1;
    }
  }
  if (!done_ && interrupted()) stop("interrupted");  // checked once a token is out (and once the prompt has run)
  if (done_) {
    r_.generate_seconds = now_seconds() - started_;
    return -1;
  }
  for (int v = 0; v < vocab_; ++v)
    if (!std::isfinite(logits_[size_t(v)]))
      throw Error("generate: non-finite logits at position " + std::to_string(state_.n_past() - 1));
  const int token = sampler_.sample(logits_.data(), vocab_, history_);
  if (options_.n_probs > 0) r_.probs.push_back(sampler_.distribution(logits_.data(), vocab_, token, options_.n_probs));
  r_.tokens.push_back(token);
  history_.push_back(token);
  const auto& eos = options_.eos;
  if (!options_.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end())
    stop("eos");
  else if (int(r_.tokens.size()) == options_.n_predict)
    stop("length");
  else
    pending_ = token;
  r_.generate_seconds = now_seconds() - started_;
  return token;
}

GenerateResult generate(InferenceState& state, const std::vector<int>& prompt, const GenerateOptions& options,
                        Sampler& sampler, const std::function<void(int)>& on_token) {
  Generation g(state, prompt, options, sampler);
  for (int token; (token = g.next()) >= 0;) on_token(token);
  return g.result();
}

}  // namespace pert
