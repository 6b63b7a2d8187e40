// Text generation over an inference state: prompt, then sampled tokens until EOS or a count,
// with llama.cpp's context shift when the context fills up.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "pert/model.hpp"
#include "pert/sampler.hpp"

namespace pert {

struct GenerateResult {
  std::vector<int> tokens;     // generated, in order
  std::string stop;            // "eos" or "length"
  double prompt_seconds = 0;   // evaluating the prompt
  double generate_seconds = 0; // the rest, context shifts included
  int context_shifts = 0;
};

struct GenerateOptions {
  int n_predict = 256;  // tokens to generate at most
  int n_keep = 0;       // context shift keeps the first n_keep cached tokens
  int vocab = 0;        // sample among ids [0, vocab) (the tokenizer's); 0: the model's
  std::vector<int> eos;
  bool ignore_eos = false;  // keep going past EOS tokens
};

// Runs `prompt` (which must fit the context) and generates. When the next token would not
// fit, the oldest half of the tokens after the first n_keep is dropped (InferenceState::shift;
// schemes that cannot shift their cache re-encode the kept tokens). on_token sees each new
// token as it is made. Throws pert::Error on bad input.
GenerateResult generate(InferenceState& state, const std::vector<int>& prompt, const GenerateOptions& options,
                        Sampler& sampler, const std::function<void(int)>& on_token);

}  // namespace pert
