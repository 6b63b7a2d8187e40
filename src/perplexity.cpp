#include "pert/perplexity.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

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
  // Windows shorter than a batch run several in step (one forward, separate caches), so the
  // matrix products of short contexts see about n_batch rows.
  const int rows = o.n_batch > 0 ? o.n_batch : std::clamp((16 << 20) / vocab, 64, 2048);
  const int n_run = n_ctx - 1, n_batch = std::min(rows, n_run);
  const int group = std::max(1, std::min(windows, rows / n_run));
  std::unique_ptr<InferenceState> state;
  std::vector<int> ids(static_cast<size_t>(group) * n_ctx);                           // [group][n_ctx] windows
  std::vector<int> run(static_cast<size_t>(group) * n_batch);                         // [group][n] tokens run
  std::vector<float> logits(static_cast<size_t>(group) * n_batch * size_t(vocab));    // [group][n][vocab]
  std::vector<double> row_nll(static_cast<size_t>(group) * n_batch);                  // [group][n]
  std::vector<double> bucket_sum(static_cast<size_t>(n_buckets), 0.0);
  std::vector<long long> bucket_count(static_cast<size_t>(n_buckets), 0);
  double sum = 0, sum2 = 0;
  long long count = 0;

  for (int w0 = 0; w0 < windows; w0 += group) {
    const int g = std::min(group, windows - w0);
    if (!state || state->n_seq() != g) state = std::make_unique<InferenceState>(model, n_run, n_batch, g);
    for (int s = 0; s < g; ++s) {
      int* win = &ids[size_t(s) * n_ctx];
      const size_t start = size_t(w0 + s) * size_t(stride);
      if (has_bos) win[0] = o.bos;
      std::copy(tokens.begin() + ptrdiff_t(start), tokens.begin() + ptrdiff_t(start + size_t(per)), win + has_bos);
    }
    for (int b = 0; b < n_run; b += n_batch) {
      const int n = std::min(n_batch, n_run - b);
      for (int s = 0; s < g; ++s)
        std::copy_n(&ids[size_t(s) * n_ctx + size_t(b)], n, &run[size_t(s) * n]);
      state->forward(run.data(), n, b, logits.data(), /*all_logits=*/true);
      // Window w scores positions q >= first (predicted by the logits at q - 1): rows r >= first - 1 - b.
      auto first_row = [&](int s) {
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
          const int q = b + r + 1, bucket = int(int64_t(q) * n_buckets / n_ctx);
          sum += v;
          sum2 += v * v;
          ++count;
          bucket_sum[size_t(bucket)] += v;
          ++bucket_count[size_t(bucket)];
        }
      }
    }
    if (progress)
      for (int s = 0; s < g; ++s) progress(w0 + s + 1, windows);
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
