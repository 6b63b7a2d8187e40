// Hook 4, the schemes whose score terms read q and k (Transformer-XL, DeBERTa), through the public
// interface: hand-set weights against each paper's formula computed here in double, a block of
// keys equal to that slice of the full row, and their configs' refusals.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "pert/config.hpp"
#include "pert/error.hpp"
#include "pert/positions.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

// tiny_config(): width 16, 2 layers, 4 heads of head_dim 4.
ModelConfig relative_config(const json& position) {
  json c = tiny_config();
  c["position"] = position;
  return parse_model_config(c, "test/config.json");
}

using Weights = std::map<std::string, std::vector<float>>;

std::vector<float> pattern(size_t n, float a, float b) {  // deterministic values of both signs
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = a * std::sin(b * float(i + 1));
  return v;
}

std::unique_ptr<PositionEncoding> make_with(const ModelConfig& c, Weights& w) {
  for (const ExpectedTensor& t : position_tensors(c)) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= size_t(d);
    w[t.name] = pattern(n, 0.5f, 0.37f + 0.01f * float(w.size()));
  }
  return make_position_encoding(c, [&](const std::string& name) -> const float* { return w.at(name).data(); });
}

// q (one per head) and keys [n][head_dim] of sin patterns.
struct Vectors {
  std::vector<float> q, keys;
};
Vectors vectors(const ModelConfig& c, int n_keys) {
  return {pattern(size_t(c.head_dim), 1.0f, 0.9f), pattern(size_t(n_keys) * c.head_dim, 1.0f, 0.53f)};
}

}  // namespace

// Dai et al. 2019, eq. (8) terms (b)-(d): u·k_n + (q_m + v)·W_R R_{m−n}, R the sinusoids of the
// width (sines of δ·10000^(−2i/d), then cosines).
TEST_CASE("relative terms: xl against its formula", "[positions]") {
  const ModelConfig c = relative_config({{"type", "xl"}});
  Weights w;
  auto pe = make_with(c, w);
  REQUIRE(pe->has_relative_terms());
  CHECK(pe->score_terms() == 1);
  const int m = 300, hd = c.head_dim, d = c.hidden_size;
  pe->begin_forward(0, 0, m + 1);
  const Vectors v = vectors(c, m + 1);
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_heads; ++h) {
      std::vector<float> scores(size_t(m + 1), 0.0f);
      pe->add_relative_terms(scores.data(), l, h, m, v.q.data(), v.keys.data(), 0, m + 1, 0.5f);
      const float* W_R = w["model.layers." + std::to_string(l) + ".self_attn.xl.r_net.weight"].data();
      for (int n : {0, 1, 150, 299, 300}) {
        double want = 0;
        for (int j = 0; j < hd; ++j) {
          double r = 0;  // (W_R R_{m−n})_j
          for (int i = 0; i < d / 2; ++i) {
            const double angle = (m - n) / std::pow(10000.0, 2.0 * i / d);
            r += W_R[size_t(h * hd + j) * d + i] * std::sin(angle) + W_R[size_t(h * hd + j) * d + d / 2 + i] * std::cos(angle);
          }
          const double k = v.keys[size_t(n) * hd + j];
          want += w["model.xl.r_w_bias"][size_t(h * hd + j)] * k + (v.q[size_t(j)] + w["model.xl.r_r_bias"][size_t(h * hd + j)]) * r;
        }
        INFO("layer " << l << " head " << h << " key " << n);
        CHECK(scores[size_t(n)] == Approx(0.5 * want).margin(1e-5));
      }
    }
}

// He et al. 2021, eq. (4) with microsoft/DeBERTa's index: q_m·K_r[i] + k_n·Q_r[i],
// i = clamp(m − n + k, 0, 2k − 1), K_r = P·W_kr^T, Q_r = P·W_qr^T + b_qr; scale 1/sqrt(3·head_dim).
TEST_CASE("relative terms: deberta against its formula", "[positions]") {
  const int span = 6;
  const ModelConfig c = relative_config({{"type", "deberta"}, {"max_relative_positions", span}});
  Weights w;
  auto pe = make_with(c, w);
  REQUIRE(pe->has_relative_terms());
  CHECK(pe->score_terms() == 3);
  const int m = 40, hd = c.head_dim, d = c.hidden_size;
  const Vectors v = vectors(c, m + 1);
  const float* P = w["model.rel_embeddings.weight"].data();
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_heads; ++h) {
      std::vector<float> scores(size_t(m + 1), 0.0f);
      pe->add_relative_terms(scores.data(), l, h, m, v.q.data(), v.keys.data(), 0, m + 1, 1.0f);
      const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
      for (int n = 0; n <= m; ++n) {
        const int i = std::min(std::max(m - n + span, 0), 2 * span - 1);
        double want = 0;
        for (int j = 0; j < hd; ++j) {
          const size_t o = size_t(h * hd + j);
          double kr = 0, qr = w[p + "pos_query_proj.bias"][o];
          for (int x = 0; x < d; ++x) {
            kr += double(w[p + "pos_key_proj.weight"][o * d + x]) * P[size_t(i) * d + x];
            qr += double(w[p + "pos_query_proj.weight"][o * d + x]) * P[size_t(i) * d + x];
          }
          want += v.q[size_t(j)] * kr + v.keys[size_t(n) * hd + j] * qr;
        }
        INFO("layer " << l << " head " << h << " key " << n);
        CHECK(scores[size_t(n)] == Approx(want).margin(1e-5));
      }
    }
}

// The kernel asks for one block of keys at a time (split-K decoding, prefill's ranges).
TEST_CASE("relative terms: a block of keys is the slice of the full row", "[positions]") {
  for (const json& position : {json{{"type", "xl"}}, json{{"type", "deberta"}, {"max_relative_positions", 8}}}) {
    const ModelConfig c = relative_config(position);
    Weights w;
    auto pe = make_with(c, w);
    const int m = 700, hd = c.head_dim;
    pe->begin_forward(0, 0, m + 1);
    const Vectors v = vectors(c, m + 1);
    std::vector<float> full(size_t(m + 1), 0.25f);
    pe->add_relative_terms(full.data(), 1, 2, m, v.q.data(), v.keys.data(), 0, m + 1, 0.7f);
    for (const auto& [key0, n] : {std::pair{0, 256}, std::pair{256, 256}, std::pair{650, 51}}) {
      std::vector<float> block(size_t(n), 0.25f);
      pe->add_relative_terms(block.data(), 1, 2, m, v.q.data(), v.keys.data() + size_t(key0) * hd, key0, n, 0.7f);
      INFO(position.dump() << " keys [" << key0 << ", " << key0 + n << ")");
      for (int i = 0; i < n; ++i) CHECK(block[size_t(i)] == full[size_t(key0 + i)]);
    }
  }
}

TEST_CASE("relative terms: configs refused with the field named", "[positions][errors]") {
  CHECK_THROWS_WITH(relative_config({{"type", "deberta"}, {"max_relative_positions", 0}}),
                    Catch::Contains("max_relative_positions"));
  CHECK_THROWS_WITH(relative_config({{"type", "xl"}, {"base", 10}}), Catch::Contains("base"));
  // The default span is the trained length (HF: max_relative_positions -1).
  CHECK(relative_config({{"type", "deberta"}}).position.scheme->to_json()["max_relative_positions"] == 64);
}
