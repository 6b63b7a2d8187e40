#include "pert/perplexity.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "pert/error.hpp"
#include "pert/ops.hpp"

namespace pert {

const char* perplexity_mode_name(PerplexityMode mode) {
  return mode == PerplexityMode::Chunks ? "chunks" : "sliding";
}

int window_text_tokens(const PerplexityOptions& o) { return o.n_ctx - (o.bos >= 0 ? 1 : 0); }

namespace {

int resolved_stride(const PerplexityOptions& o) {
  if (o.mode == PerplexityMode::Chunks) return window_text_tokens(o);
  return o.stride > 0 ? o.stride : std::max(1, o.n_ctx / 2);
}

void validate(const PerplexityOptions& o) {
  if (o.n_ctx < 2) throw Error("perplexity: the context (-c) must be at least 2 positions, got " + std::to_string(o.n_ctx));
  if (o.mode == PerplexityMode::Sliding && (o.stride < 0 || o.stride > o.n_ctx - 1))
    throw Error("perplexity: --stride must be in [1, " + std::to_string(o.n_ctx - 1) + "] for -c " +
                std::to_string(o.n_ctx) + ", got " + std::to_string(o.stride));
  if (o.max_windows < 0) throw Error("perplexity: --chunks must be >= 0, got " + std::to_string(o.max_windows));
  if (o.n_buckets < 1) throw Error("perplexity: --buckets must be >= 1, got " + std::to_string(o.n_buckets));
  if (o.n_batch < 1) throw Error("perplexity: batch size must be >= 1, got " + std::to_string(o.n_batch));
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

int count_windows(size_t n_tokens, const PerplexityOptions& o) {
  const size_t per = size_t(window_text_tokens(o)), stride = size_t(resolved_stride(o));
  if (n_tokens < per) return 0;
  const size_t n = (n_tokens - per) / stride + 1;
  return int(std::min<size_t>(n, size_t(std::numeric_limits<int>::max())));
}

PerplexityResult evaluate_perplexity(const Model& model, const std::vector<int>& tokens, const PerplexityOptions& o,
                                     const std::function<void(int, int)>& progress) {
  validate(o);
  const auto t0 = std::chrono::steady_clock::now();
  const int n_ctx = o.n_ctx, per = window_text_tokens(o), stride = resolved_stride(o);
  const int has_bos = o.bos >= 0 ? 1 : 0;
  const int available = count_windows(tokens.size(), o);
  if (available == 0)
    throw Error("perplexity: the text has " + std::to_string(tokens.size()) + " tokens, fewer than one window of " +
                std::to_string(per) + " (-c " + std::to_string(n_ctx) + ")");
  const int windows = o.max_windows > 0 ? std::min(o.max_windows, available) : available;
  const int vocab = model.config().vocab_size, n_buckets = std::min(o.n_buckets, n_ctx);

  // Only positions 0 .. n_ctx-2 run: the last position's logits would predict past the window.
  const int n_run = n_ctx - 1, n_batch = std::min(o.n_batch, n_run);
  InferenceState state(model, n_run, n_batch);
  std::vector<int> ids(static_cast<size_t>(n_ctx));                             // [n_ctx] the window
  std::vector<float> logits(static_cast<size_t>(n_batch) * size_t(vocab));     // [n_batch][vocab]
  std::vector<double> row_nll(static_cast<size_t>(n_batch));                  // [n_batch]
  std::vector<double> bucket_sum(static_cast<size_t>(n_buckets), 0.0);
  std::vector<long long> bucket_count(static_cast<size_t>(n_buckets), 0);
  double sum = 0, sum2 = 0;
  long long count = 0;

  for (int w = 0; w < windows; ++w) {
    const size_t start = size_t(w) * size_t(stride);
    if (has_bos) ids[0] = o.bos;
    std::copy(tokens.begin() + ptrdiff_t(start), tokens.begin() + ptrdiff_t(start + size_t(per)), ids.begin() + has_bos);
    // Positions q >= first are scored (predicted by the logits at q - 1).
    const int first = (o.mode == PerplexityMode::Chunks || w == 0) ? 1 : n_ctx - stride;
    for (int b = 0; b < n_run; b += n_batch) {
      const int n = std::min(n_batch, n_run - b);
      state.forward(&ids[size_t(b)], n, b, logits.data(), /*all_logits=*/true);
      const int r0 = std::max(0, first - 1 - b);
#pragma omp parallel for schedule(static)
      for (int r = r0; r < n; ++r) row_nll[size_t(r)] = token_nll(&logits[size_t(r) * vocab], vocab, ids[size_t(b + r + 1)]);
      for (int r = r0; r < n; ++r) {  // in order, so the sums do not depend on the thread count
        const double v = row_nll[size_t(r)];
        const int q = b + r + 1, bucket = int(int64_t(q) * n_buckets / n_ctx);
        sum += v;
        sum2 += v * v;
        ++count;
        bucket_sum[size_t(bucket)] += v;
        ++bucket_count[size_t(bucket)];
      }
    }
    if (progress) progress(w + 1, windows);
  }

  PerplexityResult r;
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
    pb.first = int((int64_t(b) * n_ctx + n_buckets - 1) / n_buckets);
    pb.last = int((int64_t(b + 1) * n_ctx + n_buckets - 1) / n_buckets) - 1;
    pb.tokens = bucket_count[size_t(b)];
    pb.nll = pb.tokens ? bucket_sum[size_t(b)] / double(pb.tokens) : std::numeric_limits<double>::quiet_NaN();
    r.buckets.push_back(pb);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace pert
