// Token sampling, in llama.cpp's order: repetition penalty, top-k, top-p, min-p, temperature,
// then a draw. Greedy (argmax) when the temperature is 0. The same seed gives the same draws.
#pragma once
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace pert {

struct SamplerParams {
  float temperature = 0.8f;     // <= 0: greedy
  int top_k = 40;               // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off
  float repeat_penalty = 1.0f;  // 1: off (CTRL's penalty: logit/p if > 0, logit·p if < 0)
  int repeat_last_n = 64;       // tokens the penalty looks back over
  uint64_t seed = 0;
};

struct TokenProb {
  int id;
  float p;
};

// The distribution one token was drawn from: the drawn token's probability and the most likely
// candidates, best first.
struct TokenProbs {
  float p = 0;
  std::vector<TokenProb> top;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params) : p_(params), rng_(params.seed) {}
  // Picks the next token from logits[0..vocab) (modified in place) given the tokens so far.
  int sample(float* logits, int vocab, const std::vector<int>& history);
  const SamplerParams& params() const { return p_; }
  // After sample(logits, vocab, ...) (logits as it left them, penalised): the distribution the
  // draw was made from, its `n` most likely tokens (fewer when fewer candidates remained) and
  // the probability of `chosen`. As llama.cpp's post-sampling probabilities: the softmax, at
  // the temperature, of the candidates left after the penalty, top-k, top-p and min-p (0 for a
  // token cut); greedy (temperature 0): the softmax of the penalised logits over the vocabulary.
  TokenProbs distribution(const float* logits, int vocab, int chosen, int n) const;

 private:
  SamplerParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int>> candidates_;  // (logit, id), reused
  std::vector<double> prob_, weight_;              // per candidate, reused
  std::vector<char> seen_;                         // [vocab] ids already penalised, reused
  bool greedy_ = false;                            // the last sample() was an argmax
};

}  // namespace pert
