#include "pert/text_generation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "pert/error.hpp"
#include "pert/positions.hpp"
#include "pert/json_util.hpp"

namespace pert {

namespace {

int context_size(const ModelConfig& c, int n_ctx) {
  return n_ctx > 0 ? n_ctx : std::min(c.max_position_embeddings, 4096);
}

GenerateOptions generate_options(const LoadedModel& m, const std::vector<int>& prompt,
                                 const TextGenerationSettings& s) {
  const Tokenizer& tok = m.tokenizer;
  GenerateOptions o;
  o.n_predict = s.n_predict;
  o.vocab = tok.vocab_size();
  o.eos = m.model->config().eos_token_ids;
  o.ignore_eos = s.ignore_eos;
  o.n_probs = s.n_probs;
  o.interrupt = s.interrupt;
  // As llama.cpp: --keep counts prompt tokens (-1: all of them) and the leading special tokens are always kept.
  const int n_lead = int(tok.prefix_special().size());
  const int prompt_count = int(prompt.size()) - n_lead;
  o.n_keep = (s.n_keep < 0 || s.n_keep > prompt_count ? prompt_count : s.n_keep) + n_lead;
  return o;
}

// Whether some token of the generation is fed to a full cache, so the context shifts first.
bool shifts(size_t prompt, int n_predict, int n_ctx) { return n_predict >= 0 && int64_t(prompt) + n_predict - 1 > n_ctx; }

// Before any text streams out: a context the scheme cannot encode, and a shift that would have
// nothing to drop (generate() drops half of what follows n_keep).
InferenceState& checked(InferenceState& state, const LoadedModel& m, const std::vector<int>& prompt,
                              const GenerateOptions& o) {
  const ModelConfig& c = m.model->config();
  const int n_ctx = state.n_ctx();
  if (const int max = state.max_positions(); max > 0 && n_ctx > max)
    throw Error("`n_ctx` " + std::to_string(n_ctx) + " is " +
                past_position_table(c.position.scheme->label(), max, "pass `n_ctx` " + std::to_string(max) + " or less"));
  if (shifts(prompt.size(), o.n_predict, n_ctx) && o.n_keep > n_ctx - 2)
    throw Error("`n_keep`: the context of " + std::to_string(n_ctx) + " fills up and keeping " +
                std::to_string(o.n_keep) + " tokens leaves nothing to drop; use a larger `n_ctx` or a smaller `n_keep`");
  return state;
}

}  // namespace

void validate(const TextGenerationSettings& s) {
  auto fail = [](const std::string& what) { throw Error("generate: " + what); };
  const SamplerParams& p = s.sampling;
  if (s.n_predict < -1 || s.n_predict == 0)
    fail("`n_predict` must be -1 (until the end of text or a full context) or >= 1, got " + std::to_string(s.n_predict));
  if (s.n_ctx < 0) fail("`n_ctx` must be >= 0 (0: the trained length, at most 4096), got " + std::to_string(s.n_ctx));
  if (s.n_keep < -1) fail("`n_keep` must be -1 (all) or >= 0, got " + std::to_string(s.n_keep));
  if (!(std::isfinite(p.temperature) && p.temperature >= 0))
    fail("`temperature` must be a finite number >= 0, got " + number_text(p.temperature));
  if (p.top_k < 0) fail("`top_k` must be >= 0, got " + std::to_string(p.top_k));
  if (!(p.top_p >= 0 && p.top_p <= 1)) fail("`top_p` must be a number in [0, 1], got " + number_text(p.top_p));
  if (!(p.min_p >= 0 && p.min_p <= 1)) fail("`min_p` must be a number in [0, 1], got " + number_text(p.min_p));
  if (!(std::isfinite(p.repeat_penalty) && p.repeat_penalty > 0))
    fail("`repeat_penalty` must be a finite number > 0, got " + number_text(p.repeat_penalty));
  if (p.repeat_last_n < 0) fail("`repeat_last_n` must be >= 0, got " + std::to_string(p.repeat_last_n));
}

TextGeneration::TextGeneration(const LoadedModel& m, std::string_view prompt_text, const TextGenerationSettings& s)
    : prompt_((validate(s), prompt_tokens(m.tokenizer, prompt_text))),  // the settings checked before anything runs
      options_(generate_options(m, prompt_, s)),
      sampler_(s.sampling),
      state_(*m.model, context_size(m.model->config(), s.n_ctx), 512, 1, s.cache_type),
      stream_(m.tokenizer),
      generation_(checked(state_, m, prompt_, options_), prompt_, options_, sampler_) {
  stream_.prime(prompt_);  // the continuation is decoded as what follows the prompt (its leading space kept)
}

bool TextGeneration::will_shift() const { return shifts(prompt_.size(), options_.n_predict, state_.n_ctx()); }

bool TextGeneration::next(std::string& piece) {
  const int token = generation_.next();
  if (token >= 0) {
    piece = stream_.push(token);
    return true;
  }
  piece = flushed_ ? "" : stream_.flush();
  flushed_ = true;
  return false;
}

}  // namespace pert
