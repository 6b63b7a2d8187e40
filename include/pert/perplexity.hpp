// Perplexity of a token stream at a fixed context length (DESIGN.md §4), the two ways the
// long-context papers measure it:
//   chunks  (ALiBi paper): windows of n_ctx positions that do not overlap, each run from an
//           empty cache with BOS first, every text token scored;
//   sliding (YaRN paper):  windows moved by `stride`, each scoring its last `stride` tokens
//           (the first window scores all of its own), so every token is scored once.
// Besides PPL it keeps the mean NLL by position within the window: the extrapolation curve.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "pert/model.hpp"

namespace pert {

enum class PerplexityMode { Chunks, Sliding };
const char* perplexity_mode_name(PerplexityMode mode);

struct PerplexityOptions {
  int n_ctx = 0;                 // positions per window, BOS included
  PerplexityMode mode = PerplexityMode::Chunks;
  int stride = 0;                // sliding: tokens scored per window after the first; 0: n_ctx / 2
  int max_windows = 0;           // evaluate at most this many windows; 0: all that fit
  int n_buckets = 16;            // equal-width position buckets over [0, n_ctx)
  int bos = -1;                  // token put first in every window; -1: none
  int n_batch = 0;               // rows per forward pass (all windows' positions together); 0:
                                 // 2048, fewer when the logits [rows][vocab] would pass 64 MiB
};

struct PositionBucket {
  int first = 0, last = 0;       // window positions [first, last] of the scored tokens
  long long tokens = 0;
  double nll = 0;                // mean NLL of the tokens scored there
};

struct PerplexityResult {
  double ppl = 0, ppl_stderr = 0;  // exp(mean NLL) ± its standard error (as llama-perplexity)
  double nll = 0;                  // mean NLL (nats)
  long long tokens = 0;            // tokens scored
  int windows = 0;
  int stride = 0;                  // resolved
  double seconds = 0;
  std::vector<PositionBucket> buckets;
};

// Text tokens per window: n_ctx less the BOS position.
int window_text_tokens(const PerplexityOptions& options);

// Windows the stream holds (before max_windows), or 0 when it is shorter than one window.
int count_windows(size_t n_tokens, const PerplexityOptions& options);

// Evaluates `tokens` (the text, already tokenized; BOS tokens inside it are text). Throws
// pert::Error when the options are invalid or the text is shorter than one window.
// `progress(done, total)` is called after each window.
PerplexityResult evaluate_perplexity(const Model& model, const std::vector<int>& tokens,
                                     const PerplexityOptions& options,
                                     const std::function<void(int, int)>& progress = {});

}  // namespace pert
