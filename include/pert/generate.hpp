// Text generation over an inference state: prompt, then sampled tokens until EOS or a count,
// with llama.cpp's context shift when the context fills up.
#pragma once
#include <csignal>
#include <functional>
#include <string>
#include <vector>

#include "pert/model.hpp"
#include "pert/sampler.hpp"

namespace pert {

struct GenerateResult {
  std::vector<int> tokens;     // generated, in order
  std::string stop;            // "eos", "length", "context" (n_predict < 0 and the cache full) or "interrupted"
  double prompt_seconds = 0;   // evaluating the prompt
  double generate_seconds = 0; // the rest, context shifts included
  int context_shifts = 0;
  std::vector<TokenProbs> probs;  // with n_probs > 0: one per generated token, in order
};

struct GenerateOptions {
  int n_predict = 256;  // tokens to generate at most; < 0: until EOS or the context is full (no shift then)
  int n_keep = 0;       // context shift keeps the first n_keep cached tokens
  int vocab = 0;        // sample among ids [0, vocab) (the tokenizer's); 0: the model's
  std::vector<int> eos;
  bool ignore_eos = false;  // keep going past EOS tokens
  int n_probs = 0;          // > 0: record each token's top n_probs probabilities (Sampler::distribution)
  // Set (e.g. by a SIGINT handler) to stop after the current token with stop "interrupted".
  const volatile std::sig_atomic_t* interrupt = nullptr;
};

// Runs `prompt` (which must fit the context) and generates. When the next token would not
// fit, the oldest half of the tokens after the first n_keep is dropped (InferenceState::shift;
// schemes that cannot shift their cache re-encode the kept tokens); with n_predict < 0 it stops
// there instead ("context"). on_token sees each new token as it is made; `interrupt` is read
// after each. Throws pert::Error on bad input.
GenerateResult generate(InferenceState& state, const std::vector<int>& prompt, const GenerateOptions& options,
                        Sampler& sampler, const std::function<void(int)>& on_token);

// generate(), one token per call, for callers that pull tokens (the Python module's iterator).
// `state`, `options` and `sampler` must outlive it.
class Generation {
 public:
  // Runs the prompt; throws as generate() does.
  Generation(InferenceState& state, const std::vector<int>& prompt, const GenerateOptions& options, Sampler& sampler);
  // The next token, or -1 once the generation has stopped (result().stop says why). A token
  // is fed to the model on the call after the one that returned it, so the caller can stop
  // between tokens (options.interrupt) without paying for one more step.
  int next();
  const GenerateResult& result() const { return r_; }

 private:
  InferenceState& state_;
  const GenerateOptions& options_;
  Sampler& sampler_;
  int vocab_;
  GenerateResult r_;
  std::vector<float> logits_;  // [vocab] of the last position run
  std::vector<int> context_;   // the tokens the cache holds, by position
  std::vector<int> history_;   // everything so far, for the repetition penalty
  int pending_ = -1;           // returned, not yet fed to the model
  bool done_ = false;
  double started_;             // when the prompt had run (steady clock, seconds)
  void stop(const char* why);
};

}  // namespace pert
