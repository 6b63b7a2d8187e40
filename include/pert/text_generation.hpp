// Text in, text pieces out, as `pert generate` and the Python module's generate() do it: the
// prompt made from the text, the context and keep rules checked before any text appears, and
// the tokens decoded as they stream.
#pragma once
#include <csignal>
#include <string>
#include <string_view>
#include <vector>

#include "pert/generate.hpp"
#include "pert/loaded_model.hpp"

namespace pert {

struct TextGenerationSettings {
  int n_predict = 256;   // < 0: until EOS or a full context
  int n_ctx = 0;         // 0: the trained length, at most 4096; past it the context shifts
  int n_keep = 0;        // prompt tokens kept on a shift (-1: all); the leading special tokens always are
  int n_probs = 0;       // > 0: record each token's top candidates (GenerateResult::probs)
  bool ignore_eos = false;
  SamplerParams sampling;  // the seed as it will be used
  CacheType cache_type = CacheType::F32;
  const volatile std::sig_atomic_t* interrupt = nullptr;
};

// Every setting in range (TextGeneration's constructor checks it first): pert::Error worded by
// field (error.hpp) otherwise.
void validate(const TextGenerationSettings& settings);

class TextGeneration {
 public:
  // Checks the settings against the model and runs the prompt. pert::Error (worded by field)
  // when the context cannot hold the prompt or a shift would drop nothing.
  // `m` must outlive it.
  TextGeneration(const LoadedModel& m, std::string_view prompt_text, const TextGenerationSettings& settings);
  TextGeneration(const TextGeneration&) = delete;
  TextGeneration& operator=(const TextGeneration&) = delete;

  // Makes the next token; `piece` gets the text that became certain with it (often ""). Once
  // the generation has stopped: false, and `piece` gets what was held back (an incomplete
  // character at the very end).
  bool next(std::string& piece);

  const std::vector<int>& prompt() const { return prompt_; }  // as run, the leading special tokens included
  int n_ctx() const { return state_.n_ctx(); }
  int n_keep() const { return options_.n_keep; }
  // Whether the context fills before n_predict tokens are made, and shifts (never for n_predict < 0).
  bool will_shift() const;
  const GenerateResult& result() const { return generation_.result(); }

 private:
  std::vector<int> prompt_;
  GenerateOptions options_;
  Sampler sampler_;
  InferenceState state_;
  StreamDecoder stream_;
  Generation generation_;  // last: runs the prompt once the rest is in place
  bool flushed_ = false;
};

}  // namespace pert
