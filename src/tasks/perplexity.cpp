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
}

// -log softmax(row)[target]; the sum of exponentials in double.
double token_nll(const float* row, int vocab, int target) {
  const float mx = *std::max_element(row, row + vocab);
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int i = 0; i < vocab; ++i) sum += double(exp_nonpositive(row[i] - mx));
  return std::log(sum) + mx - row[target];
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
      // llama: llama-perplexity's `first` is n_ctx/2, the first logits row it reads; that row
      // predicts position n_ctx/2 + 1, so it scores n_ctx - 1 - n_ctx/2 tokens a chunk.
      auto first_row = [&](int s) {
        if (llama) return std::max(0, n_ctx / 2 - b);
        const int first = (o.mode == PerplexityMode::Chunks || w0 + s == 0) ? 1 : n_ctx - stride;
        return std::max(0, first - 1 - b);
      };
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
    for (int s = 0; s < g; ++s) {
      running_sum += window_sum[size_t(s)];
      running_count += window_count[size_t(s)];
      r.running_ppl.push_back(std::exp(running_sum / double(running_count)));
      if (progress)
        progress({(long long)(w0 + g) * n_run, (long long)windows * n_run, w0 + s + 1, windows, r.running_ppl.back(), true});
    }
  }

  r.windows = windows;
  r.stride = stride;
  r.tokens = count;
  r.nll = sum / double(count);
  r.ppl = std::exp(r.nll);
  // llama-perplexity's estimate: the NLL's standard deviation over sqrt(count - 1), times PPL.
  const double var = sum2 / double(count) - r.nll * r.nll;
  r.ppl_stderr = var > 0 && count > 1 ? r.ppl * std::sqrt(var / double(count - 1)) : 0.0;
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
