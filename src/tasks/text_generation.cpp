#include "pert/text_generation.hpp"

#include <algorithm>
#include <cstdint>

#include "pert/error.hpp"

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

// Before any text streams out: a context the scheme cannot encode, and a shift that would have
// nothing to drop (generate() drops half of what follows n_keep).
InferenceState& checked(InferenceState& state, const LoadedModel& m, const std::vector<int>& prompt,
                              const GenerateOptions& o) {
  const ModelConfig& c = m.model->config();
  const int n_ctx = state.n_ctx();
  if (const int max = state.max_positions(); max > 0 && n_ctx > max)
    throw Error("`n_ctx` " + std::to_string(n_ctx) + " is past the " + c.position.scheme->label() + " position table (" +
                std::to_string(max) + " positions); pass `n_ctx` " + std::to_string(max) + " or less" +
                (c.position.type() == "learned" ? ", or `set position.beyond=clamp` to reuse the last one" : ""));
  const bool shifts = o.n_predict >= 0 && int64_t(prompt.size()) + o.n_predict - 1 > n_ctx;  // some token is fed to a full cache
  if (shifts && o.n_keep > n_ctx - 2)
    throw Error("`n_keep`: the context of " + std::to_string(n_ctx) + " fills up and keeping " +
                std::to_string(o.n_keep) + " tokens leaves nothing to drop; use a larger `n_ctx` or a smaller `n_keep`");
  return state;
}

}  // namespace

TextGeneration::TextGeneration(const LoadedModel& m, std::string_view prompt_text, const TextGenerationSettings& s)
    : prompt_(prompt_tokens(m.tokenizer, prompt_text)),
      options_(generate_options(m, prompt_, s)),
      sampler_(s.sampling),
      state_(*m.model, context_size(m.model->config(), s.n_ctx), 512, 1, s.cache_type),
      stream_(m.tokenizer),
      generation_(checked(state_, m, prompt_, options_), prompt_, options_, sampler_) {
  stream_.prime(prompt_);  // the continuation is decoded as what follows the prompt (its leading space kept)
}

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
