// Mode llama follows llama.cpp's tools/perplexity/perplexity.cpp (examples/perplexity/ in older
// trees), function perplexity(), its default path (no --ppl-stride, KL divergence, HellaSwag,
// ...), as read at ggml-org/llama.cpp 050fc7f and ggerganov/llama.cpp c392e50:
// - the text is tokenized once, with BOS first when the vocab adds one; chunks are the
//   stream's consecutive n_ctx tokens (n_chunk = tokens / n_ctx, the rest dropped, --chunks
//   caps it), and fewer than 2 * n_ctx tokens is refused;
// - each chunk's first token is set to BOS (when the vocab adds it) and runs from an empty
//   cache; n_seq = n_batch / n_ctx chunks share one batch as separate sequences, which does
//   not change their logits;
// - with first = n_ctx/2, the logits rows first .. n_ctx-2 predict the tokens at first+1 ..
//   n_ctx-1: n_ctx - 1 - first tokens a chunk (255 at -c 512), not n_ctx - first;
// - after each chunk it prints "[i]ppl," with PPL = exp(NLL so far); at the end
//   "Final estimate: PPL = %.4f +/- %.5f", the error being PPL * sqrt((<nll^2> - <nll>^2) /
//   (count - 1)), the formula every mode here uses.
#include "pert/perplexity.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "pert/error.hpp"
#include "pert/memory.hpp"
#include "kernels/ops.hpp"

namespace pert {

const char* perplexity_mode_name(PerplexityMode mode) {
  switch (mode) {
    case PerplexityMode::Chunks: return "chunks";
    case PerplexityMode::Sliding: return "sliding";
    case PerplexityMode::Llama: return "llama";
  }
  return "?";
}

int window_text_tokens(const PerplexityOptions& o) {
  if (o.mode == PerplexityMode::Llama) return o.n_ctx;
  return o.n_ctx - (o.bos >= 0 ? 1 : 0);
}

namespace {

int resolved_stride(const PerplexityOptions& o) {
  if (o.mode != PerplexityMode::Sliding) return window_text_tokens(o);
  return o.stride > 0 ? o.stride : std::max(1, o.n_ctx / 2);
}

void validate(const PerplexityOptions& o) {
  if (o.n_ctx < 2) throw Error("perplexity: the context (`n_ctx`) must be at least 2 positions, got " + std::to_string(o.n_ctx));
  if (o.mode == PerplexityMode::Llama && o.n_ctx < 3)  // -c 2 would score nothing (positions 2..1)
    throw Error("perplexity: `mode` llama scores positions c/2+1 .. c-1, so the context (`n_ctx`) must be at least 3, got " +
                std::to_string(o.n_ctx));
  if (o.mode == PerplexityMode::Sliding && (o.stride < 0 || o.stride > o.n_ctx - 1))
    throw Error("perplexity: `stride` must be in [1, " + std::to_string(o.n_ctx - 1) + "] for `n_ctx` " +
                std::to_string(o.n_ctx) + ", got " + std::to_string(o.stride));
  if (o.max_windows < 0) throw Error("perplexity: `max_windows` must be >= 0, got " + std::to_string(o.max_windows));
  if (o.n_buckets < 0)
    throw Error("perplexity: `n_buckets` must be kLogBuckets (0) or >= 1, got " + std::to_string(o.n_buckets));
  if (o.n_batch < 0) throw Error("perplexity: batch size must be >= 0, got " + std::to_string(o.n_batch));
  if (o.key.enabled && o.key.short_len < 1)
    throw Error("perplexity: the key tokens' short context (`key_short`) must be at least 1 token, got " +
                std::to_string(o.key.short_len));
  if (o.key.enabled && o.key.step < 0)
    throw Error("perplexity: `key_step` must be >= 0 (0: key_short / 4), got " + std::to_string(o.key.step));
  if (o.key.enabled && (!std::isfinite(o.key.alpha) || !std::isfinite(o.key.beta)))
    throw Error("perplexity: `key_alpha` and `key_beta` must be finite numbers");
}

// -log softmax(row)[target]; the sum of exponentials in double.
double token_nll(const float* row, int vocab, int target) {
  const float mx = *std::max_element(row, row + vocab);
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < vocab; ++i) sum += double(exp_nonpositive(row[i] - mx));
  return std::log(sum) + mx - row[target];
}

// Runs g sequences of n tokens ([g][n], in step, each from an empty cache) through a model and
// writes -ln p(ids[s][q] | ids[s][0..q)) for q in [first, n) to nll [g][n]: the key tokens'
// long and short passes. The state is kept while the shape repeats.
class SequenceScorer {
 public:
  SequenceScorer(const Model& model, CacheType cache, int rows) : model_(model), cache_(cache), rows_(rows) {}
  // Sequences of n tokens that one call runs together: about `rows` logits rows, as the windows.
  int group(int n) const { return std::max(1, rows_ / std::max(1, n - 1)); }

  void score(const int* ids, int g, int n, int first, double* nll) {
    const int n_run = n - 1, n_batch = std::min(rows_, n_run), vocab = model_.config().vocab_size;
    if (!state_ || state_->n_seq() != g || state_->n_ctx() != n_run || state_->n_batch() != n_batch)
      state_ = std::make_unique<InferenceState>(model_, n_run, n_batch, g, cache_);
    run_.resize(size_t(g) * n_batch);
    logits_.resize(size_t(g) * n_batch * size_t(vocab));
    for (int b = 0; b < n_run; b += n_batch) {
      const int nb = std::min(n_batch, n_run - b);
      for (int s = 0; s < g; ++s) std::copy_n(ids + size_t(s) * n + size_t(b), nb, &run_[size_t(s) * nb]);
      state_->forward(run_.data(), nb, b, logits_.data(), /*all_logits=*/true);
#pragma omp parallel for collapse(2) schedule(static)
      for (int s = 0; s < g; ++s)
        for (int r = 0; r < nb; ++r) {
          const int q = b + r + 1;
          const size_t at = size_t(s) * n + size_t(q);
          if (q >= first) nll[at] = token_nll(&logits_[(size_t(s) * nb + r) * vocab], vocab, ids[at]);
        }
    }
    for (int s = 0; s < g; ++s)
      for (int q = std::max(first, 1); q < n; ++q)
        if (!std::isfinite(nll[size_t(s) * n + size_t(q)]))
          throw Error("perplexity: non-finite logits of the key tokens' evaluator at position " + std::to_string(q - 1) +
                      " (the weights or config values overflow float)");
  }

 private:
  const Model& model_;
  CacheType cache_;
  int rows_;
  std::unique_ptr<InferenceState> state_;
  std::vector<int> run_;
  std::vector<float> logits_;
};

// A run of scored tokens [q0, q1) of window `seq` that share one short context: the window's
// text tokens [q0 - short_len, q1), after its BOS where it has one.
struct ShortRun {
  int seq, q0, q1;
};

// LongPPL's selection (perplexity.hpp) for g windows [g][n_ctx] scored from first[s]: key[s][q] = 1
// for each key token. long_nll [g][n_ctx]: the evaluator's NLL with the whole window; h: 1 where
// position 0 is BOS (not text). Returns the candidates (tokens with more than short_len text
// tokens before them).
long long choose_key_tokens(SequenceScorer& evaluator, const int* ids, int g, int n_ctx, const std::vector<int>& first,
                            int h, const KeyTokenOptions& k, const double* long_nll, char* key) {
  const int N = k.short_len, S = k.step, q_first = h + N + 1;  // q_first: the first token with N + 1 before it
  std::fill(key, key + size_t(g) * n_ctx, 0);
  long long candidates = 0;
  std::map<int, std::vector<ShortRun>> runs;  // by their sequences' length, so that equal ones run together
  for (int s = 0; s < g; ++s) {
    for (int q = first[size_t(s)]; q < std::min(q_first, n_ctx); ++q)  // short = long: LSD = 0
      key[size_t(s) * n_ctx + q] = 0.0 > k.alpha && -long_nll[size_t(s) * n_ctx + q] > k.beta;
    for (int q0 = q_first; q0 < n_ctx; q0 += S) {
      const int q1 = std::min(q0 + S, n_ctx);
      if (q1 <= first[size_t(s)]) continue;  // no scored token in it
      candidates += q1 - std::max(q0, first[size_t(s)]);
      runs[h + N + (q1 - q0)].push_back({s, q0, q1});
    }
  }
  std::vector<int> seqs;
  std::vector<double> short_nll;
  for (const auto& [n, list] : runs) {
    const int group = evaluator.group(n);
    for (size_t i0 = 0; i0 < list.size(); i0 += size_t(group)) {
      const int gs = int(std::min(list.size() - i0, size_t(group)));
      seqs.resize(size_t(gs) * n);
      short_nll.assign(size_t(gs) * n, 0.0);
      for (int j = 0; j < gs; ++j) {
        const ShortRun& r = list[i0 + size_t(j)];
        const int* win = ids + size_t(r.seq) * n_ctx;
        int* seq = &seqs[size_t(j) * n];
        if (h) seq[0] = win[0];
        std::copy(win + (r.q0 - N), win + r.q1, seq + h);
      }
      evaluator.score(seqs.data(), gs, n, h + N, short_nll.data());  // the run's first token is at h + N
      for (int j = 0; j < gs; ++j) {
        const ShortRun& r = list[i0 + size_t(j)];
        for (int q = std::max(r.q0, first[size_t(r.seq)]); q < r.q1; ++q) {
          const double long_v = long_nll[size_t(r.seq) * n_ctx + q];
          const double lsd = short_nll[size_t(j) * n + size_t(h + N + q - r.q0)] - long_v;  // ln p(long) - ln p(short)
          key[size_t(r.seq) * n_ctx + q] = lsd > k.alpha && -long_v > k.beta;
        }
      }
    }
  }
  return candidates;
}

}  // namespace

std::vector<int> bucket_starts(int n_ctx, int n_buckets) {
  std::vector<int> starts{0};
  if (n_buckets == kLogBuckets) {
    for (int k = 4; k < 4 * 32; ++k) {  // 2^(k/4) from 2 up to past any int
      const double start = std::round(std::exp2(k / 4.0));
      if (start >= n_ctx) break;
      if (int(start) > starts.back()) starts.push_back(int(start));
    }
    return starts;
  }
  const int64_t n = std::min(n_buckets, n_ctx);
  for (int64_t b = 1; b < n; ++b) starts.push_back(int((b * n_ctx + n - 1) / n));  // the least q with q * n / n_ctx == b
  return starts;
}

int count_windows(size_t n_tokens, const PerplexityOptions& o) {
  const size_t per = size_t(window_text_tokens(o)), stride = size_t(resolved_stride(o));
  if (n_tokens < per) return 0;
  const size_t n = (n_tokens - per) / stride + 1;
  return int(std::min<size_t>(n, size_t(std::numeric_limits<int>::max())));
}

PerplexityResult evaluate_perplexity(const Model& model, const std::vector<int>& tokens, const PerplexityOptions& o,
                                     const PerplexityProgress& progress) {
  validate(o);
  const auto t0 = std::chrono::steady_clock::now();
  const int n_ctx = o.n_ctx, per = window_text_tokens(o), stride = resolved_stride(o);
  const bool llama = o.mode == PerplexityMode::Llama;
  const int has_bos = o.bos >= 0 && !llama ? 1 : 0;  // BOS prepended (llama: it replaces the first token)
  const int available = count_windows(tokens.size(), o);
  if (available == 0)
    throw Error("perplexity: the text has " + std::to_string(tokens.size()) + " tokens, fewer than one window of " +
                std::to_string(per) + " (`n_ctx` " + std::to_string(n_ctx) + ")");
  if (llama && tokens.size() < 2 * size_t(n_ctx))  // llama-perplexity refuses such a text too
    throw Error("perplexity: `mode` llama needs at least 2 * c = " + std::to_string(2 * size_t(n_ctx)) +
                " tokens (as llama-perplexity), the text has " + std::to_string(tokens.size()) + " (`n_ctx` " +
                std::to_string(n_ctx) + ")");
  const int windows = o.max_windows > 0 ? std::min(o.max_windows, available) : available;
  const int vocab = model.config().vocab_size;
  const std::vector<int> starts = bucket_starts(n_ctx, o.n_buckets);
  const int n_buckets = int(starts.size());
  auto bucket_end = [&](int b) { return b + 1 < n_buckets ? starts[size_t(b + 1)] : n_ctx; };  // one past its last
  std::vector<int> bucket_of(static_cast<size_t>(n_ctx));  // [n_ctx] window position -> its bucket
  for (int b = 0; b < n_buckets; ++b) std::fill(bucket_of.begin() + starts[size_t(b)], bucket_of.begin() + bucket_end(b), b);

  // Only positions 0 .. n_ctx-2 run: the last position's logits would predict past the window.
  // Windows shorter than a batch run several in step (one forward, separate caches), so the
  // matrix products of short contexts see about n_batch rows.
  const int rows = o.n_batch > 0 ? o.n_batch : std::clamp((16 << 20) / vocab, 8, 2048);
  const int n_run = n_ctx - 1, n_batch = std::min(rows, n_run);
  const int group = std::max(1, std::min(windows, rows / n_run));
  require_memory(4.0 * group * n_batch * double(vocab), "perplexity: " + std::to_string(group * n_batch) +
                                                            " rows of logits over a vocabulary of " + std::to_string(vocab));
  std::unique_ptr<InferenceState> state;
  std::vector<int> ids(static_cast<size_t>(group) * n_ctx);                           // [group][n_ctx] windows
  std::vector<int> run(static_cast<size_t>(group) * n_batch);                         // [group][n] tokens run
  std::vector<float> logits(static_cast<size_t>(group) * n_batch * size_t(vocab));    // [group][n][vocab]
  std::vector<double> row_nll(static_cast<size_t>(group) * n_batch);                  // [group][n]
  std::vector<double> bucket_sum(static_cast<size_t>(n_buckets), 0.0);
  std::vector<long long> bucket_count(static_cast<size_t>(n_buckets), 0);
  std::vector<double> window_sum(static_cast<size_t>(group));  // [group] for the running PPL
  std::vector<long long> window_count(static_cast<size_t>(group));
  double sum = 0, sum2 = 0, running_sum = 0;
  long long count = 0, running_count = 0;
  PerplexityResult r;
  // The first position window w scores. llama: llama-perplexity's `first` is n_ctx/2, the first
  // logits row it reads; that row predicts position n_ctx/2 + 1, so it scores n_ctx - 1 - n_ctx/2
  // tokens a chunk.
  auto first_position = [&](int w) {
    if (llama) return n_ctx / 2 + 1;
    return (o.mode == PerplexityMode::Chunks || w == 0) ? 1 : n_ctx - stride;
  };

  // Key tokens: the window's NLLs kept whole, the evaluator's passes, a flag per position.
  KeyTokenOptions key = o.key;
  if (key.enabled && key.step == 0) key.step = std::max(1, key.short_len / 4);
  const Model& evaluator_model = key.evaluator ? *key.evaluator : model;
  std::unique_ptr<SequenceScorer> evaluator, evaluator_long;  // short passes; a separate evaluator's long one
  std::vector<double> window_nll, evaluator_nll;  // [group][n_ctx] by scored position
  std::vector<char> is_key;                       // [group][n_ctx] when no choice is kept (below)
  std::vector<int> first_scored(static_cast<size_t>(group));
  double key_sum = 0, key_sum2 = 0;
  // An evaluator's choice on these windows made for an earlier model (reused), or kept for the next (made).
  const KeyChoice* reused = nullptr;
  KeyChoice made;
  std::string choice_id;
  if (key.enabled && key.evaluator && key.shared) {
    choice_id = std::to_string(n_ctx) + ' ' + std::to_string(int(o.mode)) + ' ' + std::to_string(stride) + ' ' +
                std::to_string(windows) + ' ' + std::to_string(o.bos) + ' ' + std::to_string(int(o.cache_type));
    const auto it = key.shared->find(choice_id);
    if (it != key.shared->end())
      reused = &it->second;
    else
      made.is_key.assign(size_t(windows) * n_ctx, 0);
  }
  if (key.enabled) {
    if (!reused) evaluator = std::make_unique<SequenceScorer>(evaluator_model, o.cache_type, rows);
    window_nll.assign(size_t(group) * n_ctx, 0.0);
    if (key.evaluator && !reused) {
      evaluator_long = std::make_unique<SequenceScorer>(evaluator_model, o.cache_type, rows);
      evaluator_nll.assign(size_t(group) * n_ctx, 0.0);
    }
    if (!reused && made.is_key.empty()) is_key.assign(size_t(group) * n_ctx, 0);
    r.has_key = true;
    r.key.short_len = key.short_len;
    r.key.step = key.step;
  }

  for (int w0 = 0; w0 < windows; w0 += group) {
    const int g = std::min(group, windows - w0);
    if (!state || state->n_seq() != g) state = std::make_unique<InferenceState>(model, n_run, n_batch, g, o.cache_type);
    for (int s = 0; s < g; ++s) {
      int* win = &ids[size_t(s) * n_ctx];
      const size_t start = size_t(w0 + s) * size_t(stride);
      std::copy(tokens.begin() + ptrdiff_t(start), tokens.begin() + ptrdiff_t(start + size_t(per)), win + has_bos);
      if (o.bos >= 0) win[0] = o.bos;
    }
    std::fill(window_sum.begin(), window_sum.end(), 0.0);
    std::fill(window_count.begin(), window_count.end(), 0);
    for (int b = 0; b < n_run; b += n_batch) {
      const int n = std::min(n_batch, n_run - b);
      for (int s = 0; s < g; ++s)
        std::copy_n(&ids[size_t(s) * n_ctx + size_t(b)], n, &run[size_t(s) * n]);
      state->forward(run.data(), n, b, logits.data(), /*all_logits=*/true);
      // Window w scores positions q >= first (predicted by the logits at q - 1): rows r >= first - 1 - b.
      auto first_row = [&](int s) { return std::max(0, first_position(w0 + s) - 1 - b); };
#pragma omp parallel for collapse(2) schedule(static)
      for (int s = 0; s < g; ++s)
        for (int r = 0; r < n; ++r) {
          if (r < first_row(s)) continue;
          const size_t row = size_t(s) * n + size_t(r);
          row_nll[row] = token_nll(&logits[row * vocab], vocab, ids[size_t(s) * n_ctx + size_t(b + r + 1)]);
        }
      for (int s = 0; s < g; ++s) {  // in order, so the sums do not depend on threads or grouping
        for (int r = first_row(s); r < n; ++r) {
          const double v = row_nll[size_t(s) * n + size_t(r)];
          const int q = b + r + 1, bucket = bucket_of[size_t(q)];
          if (!std::isfinite(v))  // overflowing weights or config values: no perplexity to report
            throw Error("perplexity: non-finite logits at position " + std::to_string(q - 1) + " of window " +
                        std::to_string(w0 + s + 1) + " (the weights or config values overflow float)");
          if (key.enabled) window_nll[size_t(s) * n_ctx + size_t(q)] = v;
          sum += v;
          sum2 += v * v;
          ++count;
          bucket_sum[size_t(bucket)] += v;
          ++bucket_count[size_t(bucket)];
          window_sum[size_t(s)] += v;
          ++window_count[size_t(s)];
        }
      }
      if (progress)  // after the batch is scored: an error in it comes before any progress line
        progress({(long long)w0 * n_run + (long long)g * (b + n), (long long)windows * n_run, w0, windows,
                  running_count ? std::exp(running_sum / double(running_count)) : std::nan(""), false});
    }
    if (key.enabled) {  // the group's key tokens, then their NLLs summed in order
      const auto k0 = std::chrono::steady_clock::now();
      for (int s = 0; s < g; ++s) first_scored[size_t(s)] = first_position(w0 + s);
      const double* long_nll = window_nll.data();
      const size_t at = size_t(w0) * n_ctx;  // the group's windows in a kept choice [windows][n_ctx]
      const char* flags = reused ? reused->is_key.data() + at : nullptr;  // the group's [g][n_ctx]
      if (!reused) {
        if (key.evaluator) {  // its own pass over the windows
          const int min_first = *std::min_element(first_scored.begin(), first_scored.begin() + g);
          evaluator_long->score(ids.data(), g, n_ctx, min_first, evaluator_nll.data());
          long_nll = evaluator_nll.data();
        }
        char* chosen = made.is_key.empty() ? is_key.data() : made.is_key.data() + at;
        r.key.candidates += choose_key_tokens(*evaluator, ids.data(), g, n_ctx, first_scored, o.bos >= 0 ? 1 : 0, key,
                                              long_nll, chosen);
        flags = chosen;
      }
      for (int s = 0; s < g; ++s)
        for (int q = first_scored[size_t(s)]; q < n_ctx; ++q) {
          if (!flags[size_t(s) * n_ctx + size_t(q)]) continue;
          const double v = window_nll[size_t(s) * n_ctx + size_t(q)];
          key_sum += v;
          key_sum2 += v * v;
          ++r.key.tokens;
          r.key.indices.push_back((long long)(w0 + s) * stride + q - has_bos);  // its index in `tokens`
        }
      r.key.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - k0).count();
    }
    for (int s = 0; s < g; ++s) {
      running_sum += window_sum[size_t(s)];
      running_count += window_count[size_t(s)];
      r.running_ppl.push_back(std::exp(running_sum / double(running_count)));
      if (progress)
        progress({(long long)(w0 + g) * n_run, (long long)windows * n_run, w0 + s + 1, windows, r.running_ppl.back(), true});
    }
  }

  if (reused) r.key.candidates = reused->candidates;
  if (!made.is_key.empty()) {  // only a whole choice is kept
    made.candidates = r.key.candidates;
    (*key.shared)[choice_id] = std::move(made);
  }
  r.windows = windows;
  r.stride = stride;
  r.tokens = count;
  r.nll = sum / double(count);
  r.ppl = std::exp(r.nll);
  // llama-perplexity's estimate: the NLL's standard deviation over sqrt(count - 1), times PPL.
  const double var = sum2 / double(count) - r.nll * r.nll;
  r.ppl_stderr = var > 0 && count > 1 ? r.ppl * std::sqrt(var / double(count - 1)) : 0.0;
  if (key.enabled) {  // the same estimate over the key tokens; NaN without any
    const long long n = r.key.tokens;
    r.key.nll = n ? key_sum / double(n) : std::numeric_limits<double>::quiet_NaN();
    r.key.ppl = std::exp(r.key.nll);
    const double key_var = n ? key_sum2 / double(n) - r.key.nll * r.key.nll : 0.0;
    r.key.ppl_stderr = key_var > 0 && n > 1 ? r.key.ppl * std::sqrt(key_var / double(n - 1)) : 0.0;
  }
  for (int b = 0; b < n_buckets; ++b) {
    PositionBucket pb;
    pb.first = starts[size_t(b)];
    pb.last = bucket_end(b) - 1;
    pb.tokens = bucket_count[size_t(b)];
    pb.nll = pb.tokens ? bucket_sum[size_t(b)] / double(pb.tokens) : std::numeric_limits<double>::quiet_NaN();
    r.buckets.push_back(pb);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace pert
