// Perplexity of a token stream at a fixed context length (docs/design.md), the two ways the
// long-context papers measure it, and llama.cpp's:
//   chunks  (ALiBi paper): windows of n_ctx positions that do not overlap, each run from an
//           empty cache with BOS first, every text token scored;
//   sliding (YaRN paper):  windows moved by `stride`, each scoring its last `stride` tokens
//           (the first window scores all of its own), so every token is scored once;
//   llama   (llama-perplexity's default): the stream (tokenized once, BOS first when the
//           tokenizer adds one) cut into chunks of n_ctx tokens, the rest dropped; each chunk's
//           first token replaced by `bos` (when >= 0) and only positions n_ctx/2 + 1 .. n_ctx - 1
//           scored, from the logits at n_ctx/2 .. n_ctx - 2. As llama.cpp's
//           tools/perplexity/perplexity.cpp, function perplexity() (its n_seq batching only
//           groups chunks), which also needs at least 2 * n_ctx tokens.
// Besides PPL it keeps the mean NLL by position within the window: the extrapolation curve.
// With key tokens (KeyTokenOptions) it also scores only the tokens that need the long context.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "pert/model.hpp"

namespace pert {

enum class PerplexityMode { Chunks, Sliding, Llama };
const char* perplexity_mode_name(PerplexityMode mode);

// NLL by position in log-spaced buckets, four to an octave: a bucket starts at each
// round(2^(k/4)) from 2 on (0-1, 2, 3, ..., 7, 8-9, 10, 11-12, 13-15, 16-18, ..., 108-127,
// 128-151, ...), so that the positions inside a short trained length keep their own steps
// at any context length. The default; n_buckets > 0 asks for that many of equal width.
constexpr int kLogBuckets = 0;
constexpr int kMaxBuckets = 1 << 20;  // the most equal-width buckets one may ask for

// Key-token perplexity, LongPPL (Fang et al., ICLR 2025, "What is Wrong with Perplexity for
// Long-context Language Modeling?"; github.com/PKU-ML/LongPPL, longppl/longppl.py): an evaluator
// scores each scored token x with its window's context (long) and with a short one; with
// LSD = ln p(x | long) - ln p(x | short) and LCL = ln p(x | long), x is a key token when
// LSD > alpha and LCL > beta, and LongPPL is the scored model's perplexity over key tokens only.
// The short contexts are as the paper's code forms them: the scored tokens after the first
// `short_len` text tokens of a window go in runs of `step`, and each run shares one short context,
// the `short_len` text tokens before the run's first token (BOS first where the window has it).
// So a token's short context holds short_len to short_len + step - 1 text tokens; step 1: exactly
// short_len. Tokens with at most short_len text tokens before them have short = long (LSD = 0).
// Cost: each run is one pass of short_len + step positions (runs batched as sequences), about
// (short_len + step) / step positions per candidate token; a separate evaluator adds one pass
// over every window.
// An evaluator's choice of key tokens over one text's windows. With an evaluator of its own the
// choice depends on the windows alone, not on the scored model, so the models a sweep scores
// with one evaluator share it (KeyEvaluator keeps them) instead of choosing again.
struct KeyChoice {
  std::vector<char> is_key;  // [windows][n_ctx]: 1 at each key token's window position
  long long candidates = 0;
};
using KeyChoices = std::map<std::string, KeyChoice>;  // by the windows' layout (key_choice_id)

struct KeyTokenOptions {
  bool enabled = false;
  int short_len = 4096;            // text tokens of the short context (the paper's trunc_len)
  int step = 0;                    // scored tokens sharing one short context; 0: short_len / 4
                                   // (the paper's sliding_window 1024 for trunc_len 4096)
  double alpha = 2.0, beta = -2.0; // the paper's thresholds
  const Model* evaluator = nullptr;  // chooses the key tokens (same tokens, same vocabulary);
                                     // null: the scored model itself
  KeyChoices* shared = nullptr;      // with an evaluator: its choices on these tokens, reused and
                                     // added to (null: chosen afresh)
};

struct PerplexityOptions {
  int n_ctx = 0;                 // positions per window, BOS included
  PerplexityMode mode = PerplexityMode::Chunks;
  int stride = 0;                // sliding: tokens scored per window after the first; 0: n_ctx / 2
  int max_windows = 0;           // evaluate at most this many windows; 0: all that fit
  int n_buckets = kLogBuckets;   // kLogBuckets, or that many equal-width buckets over [0, n_ctx)
  int bos = -1;                  // token put first in every window (llama: in place of the
                                 // chunk's first token); -1: none
  int n_batch = 0;               // rows per forward pass (all windows' positions together); 0:
                                 // 2048, fewer when the logits [rows][vocab] would pass 64 MiB
  CacheType cache_type = CacheType::F32;  // the KV cache's storage (--cache-type)
  KeyTokenOptions key;           // key-token perplexity (LongPPL), when key.enabled
};

struct PositionBucket {
  int first = 0, last = 0;       // window positions [first, last] of the scored tokens
  long long tokens = 0;
  double nll = 0;                // mean NLL of the tokens scored there
};

struct KeyTokenResult {
  int short_len = 0, step = 0;     // resolved
  long long candidates = 0;        // scored tokens with more than short_len text tokens before
                                   // them in their window (the others have LSD = 0)
  long long tokens = 0;            // key tokens among the scored
  double ppl = 0, ppl_stderr = 0;  // the scored model's over key tokens (NaN when there are none)
  double nll = 0;
  std::vector<long long> indices;  // each key token's index in the token stream, ascending
  double seconds = 0;              // the evaluator's passes (within PerplexityResult::seconds)
};

struct PerplexityResult {
  double ppl = 0, ppl_stderr = 0;  // exp(mean NLL) ± its standard error (as llama-perplexity)
  double nll = 0;                  // mean NLL (nats)
  long long tokens = 0;            // tokens scored
  int windows = 0;
  int stride = 0;                  // resolved (llama: n_ctx)
  std::vector<double> running_ppl; // [windows] PPL of the tokens scored up to each window's end
                                   // (llama-perplexity's running "[i]ppl" figures)
  double seconds = 0;
  std::vector<PositionBucket> buckets;
  bool has_key = false;            // key tokens were chosen (options.key.enabled)
  KeyTokenResult key;
};

// The first window position of each NLL-by-position bucket, ascending from 0: log-spaced for
// kLogBuckets, else min(n_buckets, n_ctx) of equal width (position q in bucket q * B / n_ctx).
std::vector<int> bucket_starts(int n_ctx, int n_buckets);

// Stream tokens per window: n_ctx less the BOS position (llama: n_ctx, the first replaced).
int window_text_tokens(const PerplexityOptions& options);

// Windows the stream holds (before max_windows), or 0 when it is shorter than one window.
int count_windows(size_t n_tokens, const PerplexityOptions& options);

// Where an evaluation stands: after each forward batch (a window of 32768 positions runs in
// dozens, so a bar moves within it) and after each window (`window_end`). Positions count what
// the windows run (n_ctx − 1 each); running_ppl is the PPL of every token scored so far, NaN
// until the first window ends.
struct PerplexityStep {
  long long positions = 0, total_positions = 0;
  int windows = 0, total_windows = 0;
  double running_ppl = 0;
  bool window_end = false;
  std::string windows_text() const { return std::to_string(windows) + "/" + std::to_string(total_windows) + " windows"; }
};
using PerplexityProgress = std::function<void(const PerplexityStep& step)>;

// Evaluates `tokens` (the text, already tokenized; BOS tokens inside it are text, except that
// llama mode's stream starts with the BOS its tokenizer adds). Throws pert::Error when the
// options are invalid or the text is shorter than one window (llama: than two).
PerplexityResult evaluate_perplexity(const Model& model, const std::vector<int>& tokens,
                                     const PerplexityOptions& options, const PerplexityProgress& progress = {});

}  // namespace pert
