// `pert attention`'s task: per (layer, head) statistics of the attention weights (attention_stats.hpp)
// over the windows of a text, as perplexity's chunks mode cuts it: windows of n_ctx positions
// that do not overlap, each from an empty cache with BOS first. Every position of a window is a
// query (position 0, the BOS, included); no weight matrix is kept.
#pragma once
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/attention_stats.hpp"
#include "pert/model.hpp"
#include "pert/perplexity.hpp"

namespace pert {

struct AttentionOptions {
  int n_ctx = 0;        // positions per window, BOS included
  int max_windows = 0;  // at most this many windows; 0: all that fit
  int bos = -1;         // token put first in every window; -1: none
  int sink = 1;         // the sink mass is the weight on positions [0, sink)
  int n_batch = 0;      // rows per forward pass; 0: 2048
  CacheType cache_type = CacheType::F32;
};

struct AttentionResult {
  int windows = 0;
  int trained_length = 0;  // L: queries at [0, L) are in_L, the rest past_L (0: no L, all in_L)
  int sink = 1;
  double seconds = 0;
  std::vector<std::pair<int, int>> buckets;  // [bucket]: its distances [first, last]
  AttentionMeans in_L, past_L, all;
  const AttentionMeans& range(QueryRange r) const { return r == QueryRange::InL ? in_L : r == QueryRange::PastL ? past_L : all; }
  // The ranges a report gives: "all", and "in_L" and "past_L" too when some query is past L.
  std::vector<QueryRange> reported_ranges() const {
    if (past_L.queries == 0) return {QueryRange::All};
    return {QueryRange::All, QueryRange::InL, QueryRange::PastL};
  }
};

// Throws pert::Error when the options are invalid or the text is shorter than one window.
AttentionResult evaluate_attention(const Model& model, const std::vector<int>& tokens, const AttentionOptions& options,
                                   const PerplexityProgress& progress = {});

// The means `stats` holds so far, for queries below max_length (the windows' length); no
// windows or seconds.
AttentionResult attention_result(const AttentionStats& stats, int max_length, int trained_length);

// The result as JSON: "buckets" [[first, last]...], "queries" per range, and per range
// ("all"; "in_L" and "past_L" too when some query is past L) each statistic as [layer][head]
// (mass: [layer][head][bucket]; sink_logit_mass only for a model with learned sink logits); a
// statistic with no query is null.
nlohmann::json attention_json(const AttentionResult& r);

}  // namespace pert
