// gpt-oss's learned sink logits (AttentionShape::sink_logits, ../shared/DESIGN.md §7): a query's
// weights exp(s_j) / (Σ_k exp(s_k) + exp(sink_h)), the sink's column dropped. The kernel on every
// path (prefill over query blocks, decoding over several key blocks and their merge, keys turned
// per query) against a double-precision loop; with a window, a ring, a soft-cap, a narrower cache
// and grouped-query heads; sinks of −1e30 equal none bit for bit, a huge sink leaves nothing.
// Then one unit of attention (Attention::layer) prefilling, decoding and in chunks, and the
// statistics' sink logit mass (AttentionStats), on layers built from a ModelConfig in code; and
// `pert attention`'s column for it.
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "attention/attention.hpp"
#include "attention/kv_cache.hpp"
#include "pert/attention_stats.hpp"
#include "pert/config.hpp"
#include "pert/positions.hpp"
#include "cli_util.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

constexpr int kHeads = 4, kKvHeads = 2, kDim = 8;  // grouped-query: two heads per kv head

// Which keys the query at m sees and how its scores are shaped.
struct SinkLayout {
  int window = 0;        // 0: every earlier key
  bool ring = false;     // the cache keeps the last window + batch positions, at row n mod ring
  float softcap = 0.0f;  // cap·tanh(s/cap) on q·k·scale, before the sink joins (as HF's order)
  bool turn = false;     // the kernel's keys-turned-per-query path (turn_per_query)
};

// Per (query, head): the sink logit's share of the mass and the entropy over the keys alone.
struct QueryShares {
  std::vector<double> sink, entropy;  // [T][heads]
};

// Attention in double over keys/values [kv head][n][hd] by position: query t (position pos0 + t),
// head h reads kv head h / 2 at keys [lo, m]; the sink logit (null: none) joins the softmax's
// denominator only, after the soft-cap, and the max is taken over the keys and the sink.
std::vector<double> sink_softmax_attention(const std::vector<float>& q, const std::vector<float>& keys,
                                           const std::vector<float>& values, int n_keys, int T, int pos0, double scale,
                                           const SinkLayout& layout, const float* sinks, QueryShares* shares = nullptr) {
  std::vector<double> out(size_t(T) * kHeads * kDim, 0.0);
  if (shares) shares->sink.assign(size_t(T) * kHeads, 0.0), shares->entropy.assign(size_t(T) * kHeads, 0.0);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < kHeads; ++h) {
      const int m = pos0 + t, lo = layout.window ? std::max(0, m - layout.window + 1) : 0;
      const float* k = &keys[size_t(h / 2) * size_t(n_keys) * kDim];
      const float* v = &values[size_t(h / 2) * size_t(n_keys) * kDim];
      std::vector<double> s;
      for (int n = lo; n <= m; ++n) {
        double dot = 0.0;
        for (int i = 0; i < kDim; ++i) dot += double(q[(size_t(t) * kHeads + h) * kDim + i]) * k[size_t(n) * kDim + i];
        dot *= scale;
        s.push_back(layout.softcap > 0 ? layout.softcap * std::tanh(dot / layout.softcap) : dot);
      }
      double max = *std::max_element(s.begin(), s.end());
      if (sinks) max = std::max(max, double(sinks[h]));
      double z = sinks ? std::exp(double(sinks[h]) - max) : 0.0;
      for (double& x : s) z += (x = std::exp(x - max));
      for (int n = lo; n <= m; ++n)
        for (int i = 0; i < kDim; ++i)
          out[(size_t(t) * kHeads + h) * kDim + i] += s[size_t(n - lo)] / z * v[size_t(n) * kDim + i];
      if (!shares) continue;
      if (sinks) shares->sink[size_t(t) * kHeads + h] = std::exp(double(sinks[h]) - max) / z;
      for (double e : s) shares->entropy[size_t(t) * kHeads + h] -= e > 0 ? e / z * std::log(e / z) : 0.0;
    }
  return out;
}

// The positions' rows of `width` as a narrower cache holds them: stored (rounded) and widened again.
std::vector<float> rounded(const std::vector<float>& rows, CacheType type, int width = kDim) {
  const size_t n = rows.size() / size_t(width);
  KvCache cache(type, n, width);
  cache.store(0, rows.data(), n);
  std::vector<float> out(rows.size());
  cache.load(out.data(), 0, n);
  return out;
}

// A cache of `type` holding keys [kv head][n_keys][hd] (by position) as the kernel reads them:
// position n at row n, the rows past n_keys NaN (so reading them fails), or in a ring of `ring`
// rows at row n mod ring (the last `ring` positions).
KvCache cache_of(const std::vector<float>& by_position, int n_keys, int ring, CacheType type, int& rows_per_head) {
  rows_per_head = ring ? ring : n_keys + 13;
  std::vector<float> rows(size_t(kKvHeads) * size_t(rows_per_head) * kDim, std::numeric_limits<float>::quiet_NaN());
  for (int g = 0; g < kKvHeads; ++g)
    for (int n = ring ? std::max(0, n_keys - ring) : 0; n < n_keys; ++n)
      std::copy_n(&by_position[(size_t(g) * n_keys + size_t(n)) * kDim], kDim,
                  &rows[(size_t(g) * rows_per_head + size_t(ring ? n % ring : n)) * kDim]);
  KvCache cache(type, rows.size() / kDim, kDim);
  cache.store(0, rows.data(), rows.size() / kDim);
  return cache;
}

// The identity as a per-query turn: the keys-turned-per-query path with nothing to turn.
struct CopyTurn final : PositionEncoding {
  void rotate_for_query(int, const float* src, float* dst, int, int n_pos, int n_heads, ptrdiff_t pos_stride,
                        ptrdiff_t src_head_stride, ptrdiff_t dst_head_stride) const override {
    for (int t = 0; t < n_pos; ++t)
      for (int h = 0; h < n_heads; ++h)
        std::copy_n(src + t * pos_stride + h * src_head_stride, pos_stride,
                    dst + t * pos_stride + h * dst_head_stride);
  }
};

}  // namespace

TEST_CASE("sink logits: the kernel equals a softmax with the sink column, on every path", "[attention][sink_logits]") {
  const float scale = 1.0f / std::sqrt(float(kDim));
  // against scores of spread ~1.3: a sink that a few keys outweigh, one below them all, and two that
  // hold their own against hundreds of keys
  const std::vector<float> sinks = {0.5f, -1.5f, 6.0f, 7.5f};
  const float none[kHeads] = {-1e30f, -1e30f, -1e30f, -1e30f}, huge[kHeads] = {1e4f, 1e4f, 1e4f, 1e4f};
  const SinkLayout layouts[] = {{}, {20, false}, {20, true}, {20, true, 30.0f}, {0, false, 0.0f, true},
                                {20, false, 0.0f, true}};
  // Prefill over one and two query blocks; decoding within one key block and over three (merged).
  for (const auto& [T, pos0] : {std::pair{37, 11}, std::pair{70, 150}, std::pair{1, 50}, std::pair{1, 2 * kKeyBlock + 88}})
    for (const SinkLayout& layout : layouts)
      for (CacheType type : {CacheType::F32, CacheType::Q8}) {
        // decoding's window spans two key blocks, so that its merge is exercised too
        SinkLayout l = layout;
        if (T == 1 && l.window) l.window = 300;
        const int n_keys = pos0 + T, ring = l.ring ? l.window + std::max(T, kQueryBlock) : 0;
        INFO("T " << T << ", pos0 " << pos0 << ", window " << l.window << ", ring " << ring << ", softcap " << l.softcap
                  << (l.turn ? ", turned per query" : "") << ", cache " << cache_type_name(type));
        const std::vector<float> keys = random_floats(size_t(kKvHeads) * n_keys * kDim, 20, 2.0f);
        const std::vector<float> values = random_floats(keys.size(), 21);
        const std::vector<float> q = random_floats(size_t(T) * kHeads * kDim, 22, 2.0f);
        int rows_per_head = 0;
        const KvCache kc = cache_of(keys, n_keys, ring, type, rows_per_head), vc = cache_of(values, n_keys, ring, type, rows_per_head);
        AttentionShape shape{T, pos0, kHeads, kKvHeads, kDim, ptrdiff_t(rows_per_head) * kDim};
        shape.window = l.window, shape.ring = ring, shape.softcap = l.softcap, shape.turn_per_query = l.turn;
        const CopyTurn turn;
        const PositionEncoding plain;
        const PositionEncoding& position = l.turn ? static_cast<const PositionEncoding&>(turn) : plain;
        AttentionScratch scratch(kHeads, kDim, n_keys, 0, type != CacheType::F32, l.turn);
        auto run = [&](const float* sink_logits) {
          std::vector<float> out(q.size(), -1.0f);
          shape.sink_logits = sink_logits;
          attention(out.data(), q.data(), kc.rows(), vc.rows(), shape, scale, position, scratch);
          return out;
        };

        const std::vector<double> want = sink_softmax_attention(q, rounded(keys, type), rounded(values, type), n_keys, T,
                                                                pos0, scale, l, sinks.data());
        const std::vector<double> without = sink_softmax_attention(q, rounded(keys, type), rounded(values, type), n_keys,
                                                                   T, pos0, scale, l, nullptr);
        const std::vector<float> got = run(sinks.data());
        double differs = 0.0;  // the sinks must matter (100 times the margin), or this would not test them
        for (size_t i = 0; i < got.size(); ++i) {
          CHECK(got[i] == Approx(want[i]).margin(1e-5));
          differs = std::max(differs, std::abs(want[i] - without[i]));
        }
        CHECK(differs > 1e-3);

        const std::vector<float> plain_out = run(nullptr);
        for (size_t i = 0; i < got.size(); ++i) CHECK(plain_out[i] == Approx(without[i]).margin(1e-5));
        CHECK(run(none) == plain_out);  // e^(−1e30 − max) = 0: the same sums, bit for bit
        for (float x : run(huge)) CHECK(std::abs(x) <= 1e-30f);  // every key's weight e^(s − 1e4) = 0
      }
}

TEST_CASE("sink logits: one attention unit prefilling, decoding and in chunks, and their statistics",
          "[attention][sink_logits]") {
  const int n = 90, L = 64;
  for (const json& extra : {json{{"position", {{"type", "none"}}}},
                            json{{"position", {{"type", "none"}}}, {"architectures", {"MistralForCausalLM"}},
                                 {"model_type", "mistral"}, {"sliding_window", 16}}})
    for (CacheType type : {CacheType::F32, CacheType::BF16}) {
      INFO(extra.dump() << ", cache " << cache_type_name(type));
      json c = tiny_config();
      c.update(extra);
      ModelConfig config = parse_model_config(c, "test/config.json");
      config.sink_logits = true;  // (no config key sets it yet: gpt-oss's architecture will)
      REQUIRE(config.n_heads == kHeads);
      REQUIRE(config.n_kv_heads == kKvHeads);
      REQUIRE(config.head_dim == 4);
      const int hd = config.head_dim, q_dim = kHeads * hd, kv_dim = kKvHeads * hd;
      const std::unique_ptr<PositionEncoding> position =
          make_position_encoding(config, [](const std::string&) -> const float* { return nullptr; });
      REQUIRE(position);
      const std::vector<float> q = random_floats(size_t(n) * q_dim, 30, 2.0f), k = random_floats(size_t(n) * kv_dim, 31, 2.0f),
                               v = random_floats(size_t(n) * kv_dim, 32);
      const std::vector<float> sinks = {1.0f, -0.5f, 2.0f, 0.0f};

      // The loop's answer, over the keys and values as the cache rounds them ([kv][n][hd] by position).
      std::vector<float> kp(size_t(kKvHeads) * n * hd), vp(kp.size());
      for (int t = 0; t < n; ++t)
        for (int g = 0; g < kKvHeads; ++g)
          for (int i = 0; i < hd; ++i) {
            kp[(size_t(g) * n + t) * hd + i] = k[size_t(t) * kv_dim + size_t(g) * hd + i];
            vp[(size_t(g) * n + t) * hd + i] = v[size_t(t) * kv_dim + size_t(g) * hd + i];
          }
      const int window = config.layers[0].window;
      REQUIRE(window == (c.contains("sliding_window") ? 16 : 0));
      QueryShares shares;
      // (the loop's heads are the kernel test's 8 wide; here they are 4)
      auto loop = [&](const float* sink_logits, QueryShares* query_shares) {
        // widen the 4-wide heads to 8 with zeros: the same dots, the same weighted sums in the first 4
        std::vector<float> q8(size_t(n) * kHeads * kDim, 0.0f), k8(size_t(kKvHeads) * n * kDim, 0.0f), v8(k8.size(), 0.0f);
        for (size_t r = 0; r < size_t(n) * kHeads; ++r) std::copy_n(&q[r * hd], hd, &q8[r * kDim]);
        const std::vector<float> kr = rounded(kp, type, hd), vr = rounded(vp, type, hd);
        for (size_t r = 0; r < size_t(kKvHeads) * n; ++r) {
          std::copy_n(&kr[r * hd], hd, &k8[r * kDim]);
          std::copy_n(&vr[r * hd], hd, &v8[r * kDim]);
        }
        const std::vector<double> wide = sink_softmax_attention(q8, k8, v8, n, n, 0, 1.0 / std::sqrt(double(hd)),
                                                                SinkLayout{window}, sink_logits, query_shares);
        std::vector<double> out(size_t(n) * q_dim);
        for (size_t r = 0; r < size_t(n) * kHeads; ++r) std::copy_n(&wide[r * kDim], hd, &out[r * hd]);
        return out;
      };
      const std::vector<double> want = loop(sinks.data(), &shares);

      // Layer 0 of a unit over both layers, run in steps of `step` positions (n_batch 8: a ring of
      // window + 8 rows under the window).
      auto run = [&](int step, AttentionStats* stats, const float* sink_logits) {
        Attention unit(config, *position, {0, 1}, n, 8, 1, type);
        unit.observe(stats);
        std::vector<float> qs = q, ks = k, out(size_t(n) * q_dim, -1.0f);
        for (int p = 0; p < n; p += step) {
          const int m = std::min(step, n - p);
          unit.begin(p, m);
          unit.layer(0, 0, &qs[size_t(p) * q_dim], &ks[size_t(p) * kv_dim], &v[size_t(p) * kv_dim], &out[size_t(p) * q_dim],
                     sink_logits);
        }
        return out;
      };
      for (int step : {1, 7, 8}) {
        INFO("steps of " << step);
        const std::vector<float> got = run(step, nullptr, sinks.data());
        for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-5));
      }

      // The statistics: each head's sink logit mass and entropy (over the keys) are the loop's means
      // over the queries, the keys' buckets hold what the sink leaves of 1; without sink logits
      // the means have none.
      AttentionStats stats(config.n_layers, kHeads, n, L, 1, true);
      const std::vector<float> observed = run(8, &stats, sinks.data());
      for (size_t i = 0; i < observed.size(); ++i) CHECK(observed[i] == Approx(want[i]).margin(1e-5));
      const AttentionMeans all = stats.means(QueryRange::All);
      REQUIRE(all.sink_logit_mass.size() == size_t(config.n_layers) * kHeads);
      for (int h = 0; h < kHeads; ++h) {
        double mean = 0.0, entropy = 0.0;
        for (int t = 0; t < n; ++t) {
          mean += shares.sink[size_t(t) * kHeads + size_t(h)] / n;
          entropy += shares.entropy[size_t(t) * kHeads + size_t(h)] / n;
        }
        CHECK(all.sink_logit_mass[size_t(h)] == Approx(mean).margin(1e-6));
        CHECK(all.entropy[size_t(h)] == Approx(entropy).margin(1e-5));
        double keys = 0.0;
        for (int b = 0; b < all.buckets; ++b) keys += all.mass[size_t(h) * all.buckets + size_t(b)];
        CHECK(keys + all.sink_logit_mass[size_t(h)] == Approx(1.0).margin(1e-6));
        CHECK(all.sink_logit_mass[size_t(h)] > 0.01);
      }
      CHECK(all.sink_logit_mass[2] > all.sink_logit_mass[1]);  // a larger logit takes more (2 against −0.5)
      AttentionStats plain(config.n_layers, kHeads, n, L, 1);
      run(8, &plain, nullptr);
      CHECK(plain.means(QueryRange::All).sink_logit_mass.empty());
    }
}

// `pert attention`'s table and CSV show a cell's sink logit mass in a column of their own beside the
// sink mass (a model without sink logits keeps the columns it had: test_attention_cli.cpp). No
// model loads with sink logits yet, so a run's file gets them written into its cells and is merged.
TEST_CASE("sink logits: pert attention's table and CSV give the sink logit mass its column", "[attention][sink_logits][cli]") {
  const TempDir tmp;
  const std::string text = repeated_story(tmp, 60).string(), run = (tmp / "a.json").string();
  REQUIRE(run_pert({"attention", "-m", kRope, "-f", text, "--lengths", "64", "--chunks", "2", "--out", run, "-q", "-t", "1"})
              .exit_code == 0);
  json a = json::parse(slurp(run));
  for (json& c : a["cells"])
    for (auto& [range, stats] : c["attention"].items()) {
      json by_layer = json::array();
      for (int l = 0; l < c["layers"].get<int>(); ++l) {
        json heads = json::array();
        for (int h = 0; h < c["heads"].get<int>(); ++h) heads.push_back(0.25 + 0.01 * h);  // mean 0.265
        by_layer.push_back(heads);
      }
      stats["sink_logit_mass"] = by_layer;
    }
  write_file(tmp / "b.json", a.dump());
  const std::string merged = (tmp / "m.json").string();
  const Run m = run_pert({"attention", "--merge", (tmp / "b.json").string(), "--out", merged});
  INFO(m.err);
  REQUIRE(m.exit_code == 0);
  CHECK_THAT(m.out, Catch::Matchers::Contains("| entropy | sink mass | sink logit mass | mean distance | max weight |"));
  CHECK_THAT(m.out, Catch::Matchers::Contains(" | 0.265 | "));
  CHECK(json::parse(slurp(merged))["cells"][0]["attention"]["all"]["sink_logit_mass"] == a["cells"][0]["attention"]["all"]["sink_logit_mass"]);
  std::istringstream csv(slurp(tmp / "m.csv"));
  std::string header, row;
  std::getline(csv, header);
  std::getline(csv, row);
  CHECK_THAT(header, Catch::Matchers::Contains(",head,entropy,sink_mass,sink_logit_mass,mean_distance,max_weight,mass_d0,"));
  // layer 0, head 0: its sink logit mass in the column after sink_mass
  size_t column = 0;
  for (size_t at = 0; at < header.find(",sink_logit_mass,") + 1; ++at) column += header[at] == ',';
  std::istringstream cells(row);
  std::string field;
  for (size_t i = 0; i <= column; ++i) std::getline(cells, field, ',');
  CHECK(field == "0.25");
}
