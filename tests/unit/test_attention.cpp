// Unit tests of the attention kernel (src/attention/attention.hpp) against naive full-matrix
// causal attention in double precision.
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "attention/attention.hpp"
#include "pert/config.hpp"
#include "attention/kv_cache.hpp"
#include "kernels/ops.hpp"
#include "pert/positions.hpp"
#include "attention/positions/rope.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

// Naive causal attention over the whole score matrix: query t at position pos0 + t, head h,
// reads kv head h / (n_heads / n_kv_heads), keys 0..pos0 + t, plus `bias(h, m, n)`.
template <class Bias>
std::vector<double> naive_attention(const std::vector<float>& q, const std::vector<float>& keys,
                                    const std::vector<float>& values, const AttentionShape& s, double scale,
                                    Bias bias) {
  const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads;
  std::vector<double> out(size_t(s.T * s.n_heads * hd), 0.0);
  for (int t = 0; t < s.T; ++t)
    for (int h = 0; h < s.n_heads; ++h) {
      const int m = s.pos0 + t;
      const float* qt = &q[size_t((t * s.n_heads + h) * hd)];
      const float* k = &keys[size_t(h / group) * size_t(s.kv_head_stride)];
      const float* v = &values[size_t(h / group) * size_t(s.kv_head_stride)];
      std::vector<double> p(size_t(m + 1));
      double max = -std::numeric_limits<double>::infinity(), z = 0.0;
      for (int n = 0; n <= m; ++n) {
        double dot = 0.0;
        for (int i = 0; i < hd; ++i) dot += double(qt[i]) * k[n * hd + i];
        p[size_t(n)] = dot * scale + bias(h, m, n);
        max = std::max(max, p[size_t(n)]);
      }
      for (double& x : p) z += (x = std::exp(x - max));
      for (int n = 0; n <= m; ++n)
        for (int i = 0; i < hd; ++i) out[size_t((t * s.n_heads + h) * hd + i)] += p[size_t(n)] / z * v[n * hd + i];
    }
  return out;
}

// A test scheme whose bias depends on query position, key position and head, non-linearly.
struct ArbitraryBias final : PositionEncoding {
  static double bias(int h, int m, int n) { return std::sin(0.3 * m + 0.7 * n * n + h); }
  bool has_bias() const override { return true; }
  void add_bias(float* scores, int, int head, int query_pos, int key0, int n_keys) const override {
    for (int i = 0; i < n_keys; ++i) scores[i] += float(bias(head, query_pos, key0 + i));
  }
};

}  // namespace

// The blocked, parallel, grouped-query kernel equals full-matrix causal attention: over several
// query blocks, with keys already cached before pos0, a cache larger than needed (its unused
// rows hold NaN, so reading them fails), without a bias, with ALiBi's −slope·(m − n) built by
// make_position_encoding, and with an arbitrary bias.
TEST_CASE("attention: the kernel matches naive causal attention", "[attention]") {
  const int n_heads = 4, n_kv_heads = 2, hd = 8;
  // Decoding (T = 1) over one key block, exactly one, one and a single key, and three.
  for (const auto& [T, pos0] : {std::pair{37, 11}, std::pair{17, 3}, std::pair{16, 0}, std::pair{1, 50},
                                std::pair{1, kKeyBlock - 1}, std::pair{1, kKeyBlock}, std::pair{1, 2 * kKeyBlock + 88}}) {
    INFO("T " << T << ", pos0 " << pos0);
    const int n_keys = pos0 + T, capacity = n_keys + 13;
    const AttentionShape shape{T, pos0, n_heads, n_kv_heads, hd, ptrdiff_t(capacity) * hd};
    std::vector<float> keys = random_floats(size_t(n_kv_heads * capacity * hd), 10, 2.0f);
    std::vector<float> values = random_floats(keys.size(), 11);
    for (int kv = 0; kv < n_kv_heads; ++kv)
      for (size_t i = size_t(n_keys) * hd; i < size_t(capacity) * hd; ++i) {
        keys[size_t(kv * capacity * hd) + i] = std::numeric_limits<float>::quiet_NaN();
        values[size_t(kv * capacity * hd) + i] = std::numeric_limits<float>::quiet_NaN();
      }
    const std::vector<float> q = random_floats(size_t(T * n_heads * hd), 12, 2.0f);
    const float scale = 1.0f / std::sqrt(float(hd));
    AttentionScratch scratch(n_heads, hd, capacity);
    std::vector<float> out(q.size(), -1.0f);

    // No bias: the base interface, whose hooks do nothing.
    PositionEncoding plain;
    attention(out.data(), q.data(), KvRows::of(keys.data(), hd), KvRows::of(values.data(), hd), shape, scale, plain, scratch);
    const std::vector<double> unbiased =
        naive_attention(q, keys, values, shape, scale, [](int, int, int) { return 0.0; });
    for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(unbiased[i]).margin(1e-5));

    // ALiBi for the 4 heads of tiny_config(): slopes 2^-2, 2^-4, 2^-6, 2^-8.
    json c = tiny_config();
    c["position"] = {{"type", "alibi"}};
    const auto alibi = make_position_encoding(parse_model_config(c, "test/config.json"),
                                              [](const std::string&) -> const float* { return nullptr; });
    REQUIRE(alibi);
    attention(out.data(), q.data(), KvRows::of(keys.data(), hd), KvRows::of(values.data(), hd), shape, scale, *alibi, scratch);
    const std::vector<double> biased = naive_attention(
        q, keys, values, shape, scale, [](int h, int m, int n) { return -std::pow(2.0, -2.0 * (h + 1)) * (m - n); });
    double differs = 0.0;  // the bias must matter, or this would not test it
    for (size_t i = 0; i < out.size(); ++i) {
      CHECK(out[i] == Approx(biased[i]).margin(1e-5));
      differs = std::max(differs, std::abs(biased[i] - unbiased[i]));
    }
    CHECK(differs > 1e-2);

    // A bias that no row constant absorbs (ALiBi's does: softmax ignores it), so the kernel must
    // pass the true query position, key index and head.
    const ArbitraryBias arbitrary;
    attention(out.data(), q.data(), KvRows::of(keys.data(), hd), KvRows::of(values.data(), hd), shape, scale, arbitrary, scratch);
    const std::vector<double> want = naive_attention(q, keys, values, shape, scale, ArbitraryBias::bias);
    for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(want[i]).margin(1e-5));

    // A narrower cache: prefill widens each block's key ranges, decoding reads the rows in
    // registers; both equal attention over the rounded keys and values.
    for (CacheType type : {CacheType::BF16, CacheType::F16, CacheType::Q8}) {
      INFO("cache " << cache_type_name(type));
      const size_t rows = size_t(n_kv_heads) * size_t(capacity);
      KvCache kc(type, rows, hd), vc(type, rows, hd);
      kc.store(0, keys.data(), rows);
      vc.store(0, values.data(), rows);
      std::vector<float> rounded_keys(keys.size()), rounded_values(values.size());
      kc.load(rounded_keys.data(), 0, rows);
      vc.load(rounded_values.data(), 0, rows);
      AttentionScratch narrow_scratch(n_heads, hd, capacity, 0, true);
      attention(out.data(), q.data(), kc.rows(), vc.rows(), shape, scale, arbitrary, narrow_scratch);
      const std::vector<double> from_rounded =
          naive_attention(q, rounded_keys, rounded_values, shape, scale, ArbitraryBias::bias);
      for (size_t i = 0; i < out.size(); ++i) CHECK(out[i] == Approx(from_rounded[i]).margin(1e-5));
    }
  }
}
