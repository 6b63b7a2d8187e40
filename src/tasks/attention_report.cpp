#include "pert/attention_report.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <memory>

#include "pert/error.hpp"

namespace pert {

AttentionResult evaluate_attention(const Model& model, const std::vector<int>& tokens, const AttentionOptions& o,
                                   const PerplexityProgress& progress) {
  if (o.n_ctx < 1) throw Error("attention: the context (`n_ctx`) must be at least 1 position, got " + std::to_string(o.n_ctx));
  if (o.max_windows < 0) throw Error("attention: `max_windows` must be >= 0, got " + std::to_string(o.max_windows));
  if (o.sink < 0) throw Error("attention: `sink` must be >= 0, got " + std::to_string(o.sink));
  if (o.n_batch < 0) throw Error("attention: batch size must be >= 0, got " + std::to_string(o.n_batch));
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& c = model.config();
  PerplexityOptions cut;  // the windows perplexity's chunks mode cuts
  cut.n_ctx = o.n_ctx;
  cut.bos = o.bos;
  const int n_ctx = o.n_ctx, has_bos = o.bos >= 0 ? 1 : 0, per = window_text_tokens(cut);
  if (per < 1) throw Error("attention: a window of 1 position holds only the BOS; give a longer context");
  const int available = count_windows(tokens.size(), cut);
  if (available == 0)
    throw Error("attention: the text has " + std::to_string(tokens.size()) + " tokens, fewer than one window of " +
                std::to_string(per) + " (`n_ctx` " + std::to_string(n_ctx) + ")");
  const int windows = o.max_windows > 0 ? std::min(o.max_windows, available) : available;
  AttentionStats stats(c.n_layers, c.n_heads, n_ctx, c.max_position_embeddings > 0 ? c.max_position_embeddings : INT_MAX,
                       o.sink, c.sink_logits);

  // Windows shorter than a batch run several in step (separate caches), as perplexity's do;
  // only each window's last logits are made.
  const int rows = o.n_batch > 0 ? o.n_batch : 2048, n_batch = std::min(rows, n_ctx);
  const int group = std::max(1, std::min(windows, rows / n_ctx));
  std::unique_ptr<InferenceState> state;
  std::vector<int> ids(size_t(group) * size_t(n_ctx));                    // [group][n_ctx] windows
  std::vector<int> run(size_t(group) * size_t(n_batch));                  // [group][n] tokens run
  std::vector<float> logits(size_t(group) * size_t(c.vocab_size));        // [group][vocab], unread
  for (int w0 = 0; w0 < windows; w0 += group) {
    const int g = std::min(group, windows - w0);
    if (!state || state->n_seq() != g) {
      state = std::make_unique<InferenceState>(model, n_ctx, n_batch, g, o.cache_type);
      state->observe_attention(&stats);
    }
    for (int s = 0; s < g; ++s) {
      int* win = &ids[size_t(s) * n_ctx];
      std::copy_n(tokens.begin() + ptrdiff_t(size_t(w0 + s) * size_t(per)), per, win + has_bos);
      if (has_bos) win[0] = o.bos;
    }
    for (int b = 0; b < n_ctx; b += n_batch) {
      const int n = std::min(n_batch, n_ctx - b);
      for (int s = 0; s < g; ++s) std::copy_n(&ids[size_t(s) * n_ctx + size_t(b)], n, &run[size_t(s) * n]);
      state->forward(run.data(), n, b, logits.data(), /*all_logits=*/false);
      if (stats.nonfinite())  // overflowing weights or config values: no statistics to report
        throw Error("attention: non-finite attention scores in the windows from " + std::to_string(w0 + 1) + " (positions " +
                    std::to_string(b) + "-" + std::to_string(b + n - 1) + "; the weights or config values overflow float)");
      if (progress)
        progress({(long long)w0 * n_ctx + (long long)g * (b + n), (long long)windows * n_ctx, w0, windows, std::nan(""),
                  false});
    }
    if (progress)
      progress({(long long)(w0 + g) * n_ctx, (long long)windows * n_ctx, w0 + g, windows, std::nan(""), true});
  }
  AttentionResult r = attention_result(stats, n_ctx, c.max_position_embeddings);
  r.windows = windows;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

AttentionResult attention_result(const AttentionStats& stats, int max_length, int trained_length) {
  AttentionResult r;
  r.trained_length = trained_length;
  r.sink = stats.sink();
  for (int k = 0; k < stats.buckets(); ++k)
    r.buckets.push_back({k == 0 ? 0 : 1 << (k - 1), std::min(k == 0 ? 0 : (1 << k) - 1, max_length - 1)});
  r.in_L = stats.means(QueryRange::InL);
  r.past_L = stats.means(QueryRange::PastL);
  r.all = stats.means(QueryRange::All);
  return r;
}

namespace {

// [layer][head] (or [layer][head][bucket] with `inner`) as nested arrays; NaN (no query) as null.
nlohmann::json nested(const std::vector<double>& v, int layers, int heads, int inner = 0) {
  nlohmann::json out = nlohmann::json::array();
  const size_t width = size_t(std::max(inner, 1));
  for (int l = 0; l < layers; ++l) {
    nlohmann::json row = nlohmann::json::array();
    for (int h = 0; h < heads; ++h) {
      const size_t at = (size_t(l) * size_t(heads) + size_t(h)) * width;
      auto value = [&](size_t i) { return std::isfinite(v[i]) ? nlohmann::json(v[i]) : nlohmann::json(); };
      if (inner == 0) {
        row.push_back(value(at));
      } else {
        nlohmann::json cell = nlohmann::json::array();
        for (size_t k = 0; k < width; ++k) cell.push_back(value(at + k));
        row.push_back(cell);
      }
    }
    out.push_back(row);
  }
  return out;
}

}  // namespace

nlohmann::json attention_json(const AttentionResult& r) {
  nlohmann::json buckets = nlohmann::json::array(), queries, ranges;
  for (const auto& [first, last] : r.buckets) buckets.push_back({first, last});
  for (QueryRange q : {QueryRange::All, QueryRange::InL, QueryRange::PastL}) queries[query_range_name(q)] = r.range(q).queries;
  for (QueryRange q : r.reported_ranges()) {
    const AttentionMeans& m = r.range(q);
    ranges[query_range_name(q)] = {{"entropy", nested(m.entropy, m.layers, m.heads)},
                                   {"sink_mass", nested(m.sink_mass, m.layers, m.heads)},
                                   {"mean_distance", nested(m.mean_distance, m.layers, m.heads)},
                                   {"max_weight", nested(m.max_weight, m.layers, m.heads)},
                                   {"mass", nested(m.mass, m.layers, m.heads, m.buckets)}};
    if (!m.sink_logit_mass.empty())  // a model with learned sink logits (gpt-oss) only
      ranges[query_range_name(q)]["sink_logit_mass"] = nested(m.sink_logit_mass, m.layers, m.heads);
  }
  return {{"windows", r.windows},     {"trained_length", r.trained_length}, {"sink", r.sink},
          {"layers", r.all.layers},   {"heads", r.all.heads},               {"buckets", buckets},
          {"queries", queries},       {"seconds", r.seconds},               {"attention", ranges}};
}

}  // namespace pert
