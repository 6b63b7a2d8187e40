// Property tests of the positional schemes (docs/design.md) through the public interface only:
// each check compares pert against an expectation computed here, from the cited formula.
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pert/config.hpp"
#include "attention/positions/rope.hpp"
#include "pert/error.hpp"
#include "pert/positions.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

constexpr int kHeadDim = 16;

// tiny_config() with head_dim 16 and the given "position" block.
ModelConfig config_with(const json& position) {
  json c = tiny_config();
  c["head_dim"] = kHeadDim;
  c["position"] = position;
  return parse_model_config(c, "test/config.json");
}

std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors = {}) {
  auto pe = make_position_encoding(c, tensors ? tensors : [](const std::string&) -> const float* { return nullptr; });
  REQUIRE(pe != nullptr);
  return pe;
}

std::vector<float> random_vector(std::mt19937& rng, int n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}
double norm(const std::vector<float>& a) { return std::sqrt(dot(a, a)); }

// One head vector rotated at position `pos`, with the tables of length class `length`.
std::vector<float> rotated(PositionEncoding& pe, std::vector<float> v, int pos, int length, bool is_query) {
  pe.begin_forward(length, 0, pos + 1);
  pe.rotate(v.data(), pos, 1, 1, kHeadDim, kHeadDim, is_query);
  return v;
}

// ⟨R_m q, R_n k⟩ with both rotated as the model does for the query at max(m, n).
double rotated_dot(PositionEncoding& pe, const std::vector<float>& q, const std::vector<float>& k, int m, int n,
                   double* scale = nullptr) {
  const int length = pe.length_class(std::max(m, n));
  const std::vector<float> rq = rotated(pe, q, m, length, true), rk = rotated(pe, k, n, length, false);
  if (scale) *scale = norm(rq) * norm(rk);
  return dot(rq, rk);
}

std::vector<double> rising_factors(int n) {  // longrope factors, one per rotary pair
  std::vector<double> f;
  for (int i = 0; i < n; ++i) f.push_back(1.0 + 0.25 * i);
  return f;
}

}  // namespace

// M-RoPE (Qwen2-VL, Qwen3-VL): with text alone, or positions equal on every axis, it is plain RoPE
// to the bit; with other positions pair i turns by its own axis's position.
TEST_CASE("positions: M-RoPE is plain RoPE at equal positions, each pair by its axis otherwise", "[positions]") {
  for (const bool interleaved : {false, true}) {
    INFO("interleaved " << interleaved);
    const ModelConfig plain_c = config_with({{"type", "rope"}, {"base", 100.0}});
    const ModelConfig m_c = config_with({{"type", "rope"}, {"base", 100.0}, {"mrope_section", {3, 3, 2}},
                                         {"mrope_interleaved", interleaved}});
    auto plain = make(plain_c), mrope = make(m_c);
    CHECK(plain->position_axes() == 0);
    REQUIRE(mrope->position_axes() == 3);
    std::mt19937 rng(5);
    const int n = 5, heads = 2;
    const std::vector<float> x = random_vector(rng, n * heads * kHeadDim);
    std::vector<float> a = x, b = x, c = x;
    plain->begin_forward(0, 3, n);
    plain->rotate(a.data(), 3, n, heads, heads * kHeadDim, kHeadDim, true);
    mrope->set_axis_positions(nullptr, 3, n);  // text alone
    mrope->begin_forward(0, 3, n);
    mrope->rotate(b.data(), 3, n, heads, heads * kHeadDim, kHeadDim, true);
    CHECK(a == b);
    std::vector<int> at;
    for (int t = 0; t < n; ++t) at.insert(at.end(), {3 + t, 3 + t, 3 + t});
    mrope->set_axis_positions(at.data(), 3, n);
    mrope->begin_forward(0, 3, n);
    mrope->rotate(c.data(), 3, n, heads, heads * kHeadDim, kHeadDim, true);
    CHECK(a == c);

    // (t, h, w) = (2, 9, 40): pair i turns by the position of axis mrope_axes()[i]
    const std::vector<int> axes = mrope_axes(m_c.position.as<RopeConfig>());
    const int where[3] = {2, 9, 40};
    std::vector<float> v = random_vector(rng, kHeadDim), turned = v;
    mrope->set_axis_positions(where, 0, 1);
    mrope->begin_forward(0, 0, 1);
    mrope->rotate(turned.data(), 0, 1, 1, kHeadDim, kHeadDim, false);
    const std::vector<double> theta = rope_inv_freq(m_c.position.as<RopeConfig>(), 1);
    for (int i = 0; i < kHeadDim / 2; ++i) {
      const double angle = where[axes[size_t(i)]] * theta[size_t(i)];
      INFO("pair " << i);
      CHECK(turned[size_t(i)] == Approx(v[size_t(i)] * std::cos(angle) - v[size_t(i) + 8] * std::sin(angle)).margin(1e-5));
      CHECK(turned[size_t(i) + 8] == Approx(v[size_t(i)] * std::sin(angle) + v[size_t(i) + 8] * std::cos(angle)).margin(1e-5));
    }
  }
  CHECK(mrope_axes(config_with({{"type", "rope"}, {"mrope_section", {3, 3, 2}}, {"mrope_interleaved", true}})
                       .position.as<RopeConfig>()) == std::vector<int>{0, 1, 2, 0, 1, 2, 0, 1});
}

// RoPE's defining property (Su et al., RoFormer §3.2; docs/design.md): the score of a rotated
// pair depends only on the offset n − m, for every layout, partial rotary, scaling and xPos.
TEST_CASE("positions: rope scores depend only on the relative position", "[positions]") {
  struct Case {
    std::string name;
    json position;
    int lo, hi;  // the positions (shifted ones included) stay in [lo, hi)
  };
  const json longrope = {{"type", "longrope"},
                         {"original_max_position_embeddings", 64},
                         {"factor", 4.0},
                         {"short_factor", rising_factors(kHeadDim / 2)},
                         {"long_factor", rising_factors(kHeadDim / 2)}};
  std::vector<Case> cases;
  for (const char* layout : {"half", "interleaved"}) {
    const json rope = {{"type", "rope"}, {"layout", layout}};
    const std::string l = std::string(" ") + layout;
    auto with = [&](json extra) { json p = rope; p.update(extra); return p; };
    cases.push_back({"plain" + l, rope, 0, 6000});
    cases.push_back({"partial" + l, with({{"rotary_dim", 8}}), 0, 6000});
    cases.push_back({"linear" + l, with({{"scaling", {{"type", "linear"}, {"factor", 4.0}}}}), 0, 6000});
    cases.push_back({"ntk" + l, with({{"scaling", {{"type", "ntk"}, {"factor", 4.0}}}}), 0, 6000});
    cases.push_back({"yarn" + l, with({{"scaling", {{"type", "yarn"}, {"factor", 8.0}}}}), 0, 6000});
    cases.push_back({"llama3" + l,
                     with({{"scaling", {{"type", "llama3"}, {"factor", 8.0}, {"original_max_position_embeddings", 32}}}}),
                     0, 6000});
    cases.push_back({"longrope short" + l, with({{"scaling", longrope}}), 0, 64});
    cases.push_back({"longrope long" + l, with({{"scaling", longrope}}), 64, 6000});
    cases.push_back({"dynamic within L" + l, with({{"scaling", {{"type", "dynamic"}, {"factor", 4.0}}}}), 0, 64});
    cases.push_back({"xpos" + l, with({{"xpos", {{"gamma", 0.4}, {"scale_base", 512}}}}), 0, 6000});
    cases.push_back({"partial yarn xpos" + l,
                     with({{"rotary_dim", 8}, {"scaling", {{"type", "yarn"}, {"factor", 4.0}}}, {"xpos", json::object()}}),
                     0, 6000});
  }
  std::mt19937 rng(7);
  for (const Case& c : cases) {
    SECTION(c.name) {
      auto pe = make(config_with(c.position));
      REQUIRE(pe->rotates());
      const int pairs[][2] = {{0, 0}, {5, 2}, {2, 5}, {13, 0}, {20, 20}, {30, 7}};
      const int shifts[] = {1, 3, 17, 33, 500, 2048, 5000};
      for (const auto& mn : pairs) {
        const int m = c.lo + mn[0], n = c.lo + mn[1];
        const std::vector<float> q = random_vector(rng, kHeadDim), k = random_vector(rng, kHeadDim);
        double scale = 0.0;
        const double base = rotated_dot(*pe, q, k, m, n, &scale);
        for (int s : shifts) {
          if (std::max(m, n) + s >= c.hi) continue;
          INFO(c.name << ": (m, n) = (" << m << ", " << n << "), shift " << s);
          CHECK(rotated_dot(*pe, q, k, m + s, n + s) == Approx(base).margin(1e-4 * scale));
        }
      }
    }
  }
}

// The documented exception: dynamic NTK changes the frequencies once the length passes L, so a
// pair inside L and the same pair shifted past L score differently (docs/design.md "dynamic").
TEST_CASE("positions: dynamic NTK past L is not shift invariant", "[positions]") {
  auto pe = make(config_with({{"type", "rope"}, {"scaling", {{"type", "dynamic"}, {"factor", 4.0}}}}));
  REQUIRE(pe->rotates_keys_on_read());
  REQUIRE(pe->length_class(40) != pe->length_class(140));
  std::mt19937 rng(11);
  const std::vector<float> q = random_vector(rng, kHeadDim), k = random_vector(rng, kHeadDim);
  double scale = 0.0;
  const double inside = rotated_dot(*pe, q, k, 40, 10, &scale);
  const double past = rotated_dot(*pe, q, k, 140, 110);
  CHECK(std::abs(inside - past) > 1e-2 * scale);
}

// A rotation is orthogonal (RoFormer §3.2): without an attention factor or xPos, |R_m q| = |q|.
TEST_CASE("positions: rope rotation keeps the norm", "[positions]") {
  for (const json& extra : {json{{"layout", "half"}}, json{{"layout", "interleaved"}}, json{{"rotary_dim", 8}},
                            json{{"scaling", {{"type", "llama3"}, {"factor", 8.0}}}}}) {
    json p = {{"type", "rope"}};
    p.update(extra);
    INFO(p.dump());
    auto pe = make(config_with(p));
    std::mt19937 rng(3);
    for (int m = 0; m <= 5000; m += 37) {
      const std::vector<float> q = random_vector(rng, kHeadDim);
      CHECK(norm(rotated(*pe, q, m, pe->length_class(m), m % 2 == 0)) == Approx(norm(q)).epsilon(1e-5));
    }
  }
}

// RoFormer §3.2 in docs/design.md's layouts: pair i, dims (i, i + r/2) for "half" and
// (2i, 2i + 1) for "interleaved", turns by m·θ_i with θ_i = base^(−2i/r); dims past r stay.
TEST_CASE("positions: rope turns pair i by m times theta_i in the named layout", "[positions]") {
  for (const char* layout : {"half", "interleaved"})
    for (int r : {16, 8}) {
      auto pe = make(config_with({{"type", "rope"}, {"layout", layout}, {"rotary_dim", r}, {"base", 500.0}}));
      const bool half = std::string(layout) == "half";
      for (int m : {0, 1, 7, 300})
        for (int i = 0; i < r / 2; ++i) {
          INFO(layout << ", rotary_dim " << r << ", m " << m << ", pair " << i);
          const size_t a = size_t(half ? i : 2 * i), b = size_t(half ? i + r / 2 : 2 * i + 1);
          std::vector<float> x(kHeadDim, 0.0f);
          x[a] = 1.0f, x[b] = 2.0f;
          if (r < kHeadDim) x[kHeadDim - 1] = 3.0f;  // past the rotary dims: must stay
          std::vector<float> want = x;
          const double angle = m * std::pow(500.0, -2.0 * i / r);
          want[a] = float(x[a] * std::cos(angle) - x[b] * std::sin(angle));
          want[b] = float(x[a] * std::sin(angle) + x[b] * std::cos(angle));
          const std::vector<float> got = rotated(*pe, x, m, pe->length_class(m), true);
          for (int j = 0; j < kHeadDim; ++j) CHECK(got[size_t(j)] == Approx(want[size_t(j)]).margin(1e-5));
        }
    }
}

// The scaled frequencies (docs/design.md, HF modeling_rope_utils.py), r = 16, base 10000, L = 64.
// Llama3 bands and YaRN ramps worked by hand: wavelengths 2π·10000^(i/8) = 6.3, 19.9, 62.8,
// 198.7, ...; YaRN's correction dims are (0, 3) for L = 64 and (2, 6) for L = 4096.
TEST_CASE("positions: rope scaling frequencies", "[positions]") {
  const int half = kHeadDim / 2;
  auto theta = [&](double base, int i) { return std::pow(base, -2.0 * i / kHeadDim); };
  auto check = [&](const json& scaling, int length, auto want) {
    INFO(scaling.dump() << ", length " << length);
    const std::vector<double> got = rope_inv_freq(config_with({{"type", "rope"}, {"scaling", scaling}}).position.as<RopeConfig>(), length);
    REQUIRE(got.size() == size_t(half));
    for (int i = 0; i < half; ++i) CHECK(got[size_t(i)] == Approx(want(i)).epsilon(1e-12));
  };
  const double e = kHeadDim / (kHeadDim - 2.0);
  check({{"type", "linear"}, {"factor", 4.0}}, 10, [&](int i) { return theta(1e4, i) / 4; });
  check({{"type", "ntk"}, {"factor", 4.0}}, 10, [&](int i) { return theta(1e4 * std::pow(4.0, e), i); });
  check({{"type", "dynamic"}, {"factor", 4.0}}, 64, [&](int i) { return theta(1e4, i); });
  check({{"type", "dynamic"}, {"factor", 4.0}}, 200, [&](int i) { return theta(1e4 * std::pow(4.0 * 200 / 64 - 3, e), i); });
  const json longrope = {
      {"type", "longrope"}, {"short_factor", rising_factors(half)}, {"long_factor", {8, 7, 6, 5, 4, 3, 2, 1}}};
  check(longrope, 64, [&](int i) { return theta(1e4, i) / (1.0 + 0.25 * i); });
  check(longrope, 65, [&](int i) { return theta(1e4, i) / (8 - i); });
  const double u1 = (64 / 19.869176531592203 - 1) / 3, u2 = (64 / 62.83185307179586 - 1) / 3;
  check({{"type", "llama3"}, {"factor", 8.0}}, 10, [&](int i) {
    const double t = theta(1e4, i);
    return i == 0 ? t : i == 1 ? (1 - u1) * t / 8 + u1 * t : i == 2 ? (1 - u2) * t / 8 + u2 * t : t / 8;
  });
  const double ramp64[] = {0, 1 / 3.0, 2 / 3.0, 1, 1, 1, 1, 1}, ramp4096[] = {0, 0, 0, 0.25, 0.5, 0.75, 1, 1};
  check({{"type", "yarn"}, {"factor", 8.0}}, 10,
        [&](int i) { return theta(1e4, i) * (1 - ramp64[i]) + theta(1e4, i) / 8 * ramp64[i]; });
  check({{"type", "yarn"}, {"factor", 8.0}, {"original_max_position_embeddings", 4096}}, 10,
        [&](int i) { return theta(1e4, i) * (1 - ramp4096[i]) + theta(1e4, i) / 8 * ramp4096[i]; });
}

// YaRN (Peng et al. 2023, default 0.1·ln s + 1) and LongRoPE (sqrt(1 + ln s / ln L)) scale the
// rotated dims of q and k by the attention factor; the dims past rotary_dim are untouched.
TEST_CASE("positions: yarn and longrope scale the rotary part by the attention factor", "[positions]") {
  struct Case {
    json scaling;
    double factor;
  };
  const Case cases[] = {
      {{{"type", "yarn"}, {"factor", 4.0}}, 0.1 * std::log(4.0) + 1.0},
      {{{"type", "yarn"}, {"factor", 16.0}, {"attention_factor", 1.7}}, 1.7},
      {{{"type", "longrope"}, {"original_max_position_embeddings", 16}, {"short_factor", rising_factors(4)},
        {"long_factor", rising_factors(4)}},  // factor 64 / 16 = 4 from the config
       std::sqrt(1.0 + std::log(4.0) / std::log(16.0))},
  };
  for (const Case& c : cases) {
    INFO(c.scaling.dump());
    const ModelConfig cfg = config_with({{"type", "rope"}, {"rotary_dim", 8}, {"scaling", c.scaling}});
    CHECK(rope_attention_factor(cfg.position.as<RopeConfig>()) == Approx(c.factor).epsilon(1e-12));
    auto pe = make(cfg);
    std::mt19937 rng(5);
    for (int m : {0, 1, 15, 16, 17, 100, 1000}) {
      const std::vector<float> q = random_vector(rng, kHeadDim);
      const std::vector<float> r = rotated(*pe, q, m, pe->length_class(m), true);
      const std::vector<float> q_rot(q.begin(), q.begin() + 8), r_rot(r.begin(), r.begin() + 8);
      CHECK(norm(r_rot) == Approx(c.factor * norm(q_rot)).epsilon(1e-5));
      for (int i = 8; i < kHeadDim; ++i) CHECK(r[size_t(i)] == q[size_t(i)]);
    }
  }
  CHECK(rope_attention_factor(config_with({{"type", "rope"}}).position.as<RopeConfig>()) == 1.0);
}

// LongRoPE's short/long choice (docs/design.md "longrope"): by the whole sequence's length, as
// transformers (the default: keys cached rotated, one class for every position once the length
// is given), or by each position's own (keys rotated on read); factors alike on both sides of L
// (a GGUF file's rope_freqs) depend on no length at all.
TEST_CASE("positions: longrope chooses its factors by the sequence or by each position", "[positions]") {
  const json longrope = {{"type", "longrope"}, {"original_max_position_embeddings", 64}, {"factor", 4.0},
                         {"short_factor", rising_factors(kHeadDim / 2)}, {"long_factor", {8, 7, 6, 5, 4, 3, 2, 1}}};
  auto with = [&](json extra) { json s = longrope; s.update(extra); return json{{"type", "rope"}, {"scaling", s}}; };

  const ModelConfig by_sequence = config_with(with(json::object()));
  CHECK(by_sequence.position.scheme->to_json()["scaling"]["longrope_choice"] == "sequence");
  CHECK_THAT(by_sequence.position.scheme->describe(kHeadDim), Catch::Matchers::Contains("by the whole sequence's length"));
  auto pe = make(by_sequence);
  CHECK(pe->encodes_by_sequence_length());
  CHECK(!pe->rotates_keys_on_read());
  CHECK(pe->sequence_class(1) == pe->sequence_class(64));
  CHECK(pe->sequence_class(64) != pe->sequence_class(65));
  CHECK(pe->sequence_class(65) == pe->sequence_class(5000));
  CHECK(pe->length_class(10) == pe->sequence_class(11));  // no length given yet: each position's own
  CHECK(pe->length_class(100) == pe->sequence_class(101));
  pe->begin_sequence(100);
  CHECK(pe->length_class(0) == pe->sequence_class(100));
  CHECK(pe->length_class(99) == pe->sequence_class(100));
  // position 5 of a sequence of 100 turns by 5·θ_i/long_i
  std::vector<float> x(kHeadDim, 0.0f);
  x[0] = 1.0f;
  const std::vector<float> got = rotated(*pe, x, 5, pe->length_class(5), true);
  const double a = rope_attention_factor(by_sequence.position.as<RopeConfig>(), 100);
  CHECK(got[0] == Approx(a * std::cos(5.0 / 8)).margin(1e-6));
  CHECK(got[kHeadDim / 2] == Approx(a * std::sin(5.0 / 8)).margin(1e-6));
  pe->begin_sequence(30);
  CHECK(pe->length_class(5) == pe->sequence_class(30));

  const ModelConfig by_position = config_with(with({{"longrope_choice", "position"}}));
  CHECK_THAT(by_position.position.scheme->describe(kHeadDim), Catch::Matchers::Contains("by each position's own"));
  auto causal = make(by_position);
  CHECK(!causal->encodes_by_sequence_length());
  CHECK(causal->rotates_keys_on_read());
  causal->begin_sequence(100);  // (ignored)
  CHECK(causal->length_class(10) != causal->length_class(100));

  auto fixed = make(config_with(with({{"long_factor", rising_factors(kHeadDim / 2)}})));
  CHECK(!fixed->encodes_by_sequence_length());
  CHECK(!fixed->rotates_keys_on_read());
  CHECK(fixed->length_class(0) == fixed->length_class(1000));

  REQUIRE_THROWS_NAMING(config_with(with({{"longrope_choice", "query"}})), ConfigError, "position.scaling.longrope_choice",
                        "\"sequence\"", "\"position\"", "\"query\"");
}

// Vaswani et al. §3.5: "PE(pos+k) can be represented as a linear function of PE(pos)": for each
// frequency ω_i = base^(-2i/d), [sin, cos](t+k) is [sin, cos](t) rotated by k·ω_i.
TEST_CASE("positions: sinusoidal PE(t+k) is a fixed rotation of PE(t)", "[positions]") {
  const ModelConfig cfg = config_with({{"type", "sinusoidal"}});
  const int d = cfg.hidden_size;
  auto pe = make(cfg);
  auto encoding = [&](int t) {
    std::vector<float> x(static_cast<size_t>(d), 0.0f);
    pe->add_to_embeddings(x.data(), t, 1);
    return x;
  };
  const std::vector<float> pe0 = encoding(0);
  for (int i = 0; i < d / 2; ++i) {  // sin 0, cos 0
    CHECK(pe0[size_t(2 * i)] == 0.0f);
    CHECK(pe0[size_t(2 * i + 1)] == 1.0f);
  }
  for (int t : {0, 1, 7, 100, 1234}) {
    const std::vector<float> a = encoding(t);
    for (int k : {1, 2, 13, 400}) {
      const std::vector<float> b = encoding(t + k);
      for (int i = 0; i < d / 2; ++i) {
        const double w = std::pow(10000.0, -2.0 * i / d), c = std::cos(k * w), s = std::sin(k * w);
        const double sin_t = a[size_t(2 * i)], cos_t = a[size_t(2 * i + 1)];
        INFO("t " << t << ", k " << k << ", pair " << i);
        CHECK(b[size_t(2 * i)] == Approx(sin_t * c + cos_t * s).margin(1e-5));
        CHECK(b[size_t(2 * i + 1)] == Approx(cos_t * c - sin_t * s).margin(1e-5));
      }
    }
  }
  // embed_scale multiplies the token embedding before the encoding is added.
  auto scaled = make(config_with({{"type", "sinusoidal"}, {"embed_scale", 4.0}}));
  std::vector<float> x(static_cast<size_t>(d), 0.5f);
  scaled->add_to_embeddings(x.data(), 1234, 1);
  const std::vector<float> p = encoding(1234);
  for (int i = 0; i < d; ++i) CHECK(x[size_t(i)] == Approx(2.0 + p[size_t(i)]).margin(1e-6));
}

namespace {
// BLOOM's build_alibi_tensor (transformers/models/bloom/modeling_bloom.py), written out again.
std::vector<double> bloom_slopes(int n) {
  const int cp = 1 << int(std::floor(std::log2(n)));
  const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(cp) - 3)));
  std::vector<double> slopes;
  for (int p = 1; p <= cp; ++p) slopes.push_back(std::pow(base, p));
  if (cp != n) {
    const double extra_base = std::pow(2.0, -std::pow(2.0, -(std::log2(2 * cp) - 3)));
    for (int i = 0; i < std::min(cp, n - cp); ++i) slopes.push_back(std::pow(extra_base, 2 * i + 1));
  }
  return slopes;
}
}  // namespace

// ALiBi (Press et al. §3): the geometric slopes 2^(-8/H)... and BLOOM's rule for other head
// counts; the bias added to the score of query m, key n is −slope_h · (m − n).
TEST_CASE("positions: alibi slopes and bias", "[positions]") {
  const std::vector<double> eight = alibi_slopes(8, 8.0);
  REQUIRE(eight.size() == 8);
  for (int h = 0; h < 8; ++h) CHECK(eight[size_t(h)] == 1.0 / double(2 << h));
  for (int n : {1, 2, 4, 5, 6, 12, 16, 20, 24}) {
    INFO(n << " heads");
    const std::vector<double> got = alibi_slopes(n, 8.0), want = bloom_slopes(n);
    REQUIRE(got.size() == want.size());
    for (size_t h = 0; h < got.size(); ++h) CHECK(got[h] == Approx(want[h]).epsilon(1e-12));
  }
  // The hook, for the 4 heads of tiny_config(): slopes 2^-2, 2^-4, 2^-6, 2^-8.
  auto pe = make(config_with({{"type", "alibi"}}));
  REQUIRE(pe->has_bias());
  for (int h = 0; h < 4; ++h)
    for (int m : {0, 1, 9, 300}) {
      std::vector<float> scores(static_cast<size_t>(m + 1));
      for (int n = 0; n <= m; ++n) scores[size_t(n)] = 0.25f * float(n % 5);
      pe->add_bias(scores.data(), 0, h, m, 0, m + 1);
      const double slope = std::pow(2.0, -2.0 * (h + 1));
      for (int n = 0; n <= m; ++n)
        CHECK(scores[size_t(n)] == Approx(0.25 * (n % 5) - slope * (m - n)).margin(1e-5));
    }
}

// T5 causal buckets (HF T5Attention._relative_position_bucket, bidirectional=False, 32 buckets,
// max_distance 128): exact below 16, then 16 + int(ln(d/16) / ln 8 · 16), capped at 31.
// Expected values worked by hand and confirmed with HF's formula in torch float32.
TEST_CASE("positions: t5 buckets and bias", "[positions]") {
  const std::vector<std::pair<int, int>> table = {
      {0, 0},   {1, 1},   {15, 15}, {16, 16}, {17, 16},  {18, 16},  {19, 17},  {20, 17},  {23, 18},
      {31, 21}, {32, 21}, {45, 23}, {64, 26}, {90, 29},  {100, 30}, {112, 30}, {113, 31}, {127, 31},
      {128, 31}, {500, 31}, {100000, 31}};
  for (const auto& [d, bucket] : table) {
    INFO("distance " << d);
    CHECK(t5_bucket(d, 32, 128) == bucket);
  }
  // The hook reads table[bucket(m − n)][head] from model.relative_attention_bias.weight.
  const ModelConfig cfg = config_with({{"type", "t5"}});
  const int heads = cfg.n_heads;
  std::vector<float> weights(size_t(32 * heads));
  for (int b = 0; b < 32; ++b)
    for (int h = 0; h < heads; ++h) weights[size_t(b * heads + h)] = float(100 * b + h) + 0.5f;
  auto pe = make(cfg, [&](const std::string& name) -> const float* {
    return name == "model.relative_attention_bias.weight" ? weights.data() : nullptr;
  });
  REQUIRE(pe->has_bias());
  const int m = 100000;
  std::vector<float> scores(size_t(m + 1));
  for (int h = 0; h < heads; ++h) {
    std::fill(scores.begin(), scores.end(), 1.0f);
    pe->add_bias(scores.data(), 0, h, m, 0, m + 1);
    for (const auto& [d, bucket] : table) {
      INFO("head " << h << ", distance " << d);
      CHECK(scores[size_t(m - d)] == 1.0f + float(100 * bucket + h) + 0.5f);
    }
  }
}

// KERPLE-log: -max(r1, eps)·log(1 + max(r2, eps)·(m − n)), r1 and r2 per layer and head from
// model.layers.{l}.self_attn.kerple_r1 / _r2; tabulated by begin_forward, computed past it.
TEST_CASE("positions: kerple bias per layer and head, clamped", "[positions]") {
  const ModelConfig c = config_with({{"type", "kerple"}});
  std::map<std::string, std::vector<float>> w;
  for (int l = 0; l < c.n_layers; ++l)
    for (const char* r : {"r1", "r2"})
      for (int h = 0; h < c.n_heads; ++h)  // a negative value, to be clamped, in head 0 of layer 1
        w["model.layers." + std::to_string(l) + ".self_attn.kerple_" + r].push_back(l == 1 && h == 0 ? -3.0f : 0.5f + l + 0.25f * h + (r[1] == '2'));
  auto pe = make(c, [&](const std::string& name) -> const float* { return w.count(name) ? w[name].data() : nullptr; });
  REQUIRE(pe->has_bias());
  auto expected = [&](int l, int h, int d) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.kerple_";
    const double r1 = std::max(0.01, double(w[p + "r1"][size_t(h)])), r2 = std::max(0.01, double(w[p + "r2"][size_t(h)]));
    return -r1 * std::log(1.0 + r2 * d);
  };
  for (bool tabulated : {false, true}) {
    if (tabulated) pe->begin_forward(0, 0, 200);
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_heads; ++h)
        for (int m : {0, 5, 199, 5000}) {
          std::vector<float> scores(size_t(m + 1), 1.0f);
          pe->add_bias(scores.data(), l, h, m, 0, m + 1);
          for (int d : {0, 1, 7, m}) {
            if (d > m) continue;
            INFO("layer " << l << " head " << h << " m " << m << " distance " << d << (tabulated ? " (table)" : ""));
            CHECK(scores[size_t(m - d)] == Approx(1.0 + expected(l, h, d)).margin(1e-5));
          }
        }
  }
  CHECK(expected(1, 0, 10) == Approx(-0.01 * std::log(1.0 + 0.01 * 10)));  // both clamped to eps
}

// FIRE: f(ψ(m − n) / (ψ(max(m, L)) + eps)), ψ(x) = log(|c| x + 1), f = Linear(1, 2) → ReLU →
// Linear(2, heads), per layer; hand-set weights against the formula in double.
TEST_CASE("positions: fire bias per layer and head", "[positions]") {
  const ModelConfig c = config_with({{"type", "fire"}, {"width", 2}});
  std::map<std::string, std::vector<float>> w;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.fire.";
    w[p + "c"] = {l == 0 ? 0.5f : -2.0f};  // |c| is used
    w[p + "threshold"] = {l == 0 ? 10.0f : -3.0f};
    w[p + "mlp.0.weight"] = {1.5f, -1.0f};
    w[p + "mlp.0.bias"] = {-0.25f, 0.75f};
    for (int h = 0; h < c.n_heads; ++h) {
      w[p + "mlp.2.weight"].push_back(float(h + 1));
      w[p + "mlp.2.weight"].push_back(-0.5f * float(h + l));
      w[p + "mlp.2.bias"].push_back(0.1f * float(h));
    }
  }
  auto pe = make(c, [&](const std::string& name) -> const float* { return w.count(name) ? w[name].data() : nullptr; });
  REQUIRE(pe->has_bias());
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_heads; ++h)
      for (int m : {0, 3, 10, 64}) {
        std::vector<float> scores(size_t(m + 1), 0.0f);
        pe->add_bias(scores.data(), l, h, m, 0, m + 1);
        const double cc = l == 0 ? 0.5 : 2.0, L = l == 0 ? 10.0 : 3.0;
        for (int d = 0; d <= m; ++d) {
          const double u = std::log(cc * d + 1) / (std::log(cc * std::max(double(m), L) + 1) + 1e-6);
          const double want = (h + 1) * std::max(0.0, 1.5 * u - 0.25) - 0.5 * (h + l) * std::max(0.0, -u + 0.75) + 0.1 * h;
          INFO("layer " << l << " head " << h << " m " << m << " distance " << d);
          CHECK(scores[size_t(m - d)] == Approx(want).margin(1e-5));
        }
      }
}

// Split-K decoding asks for the bias of one block of keys at a time: add_bias over
// [key0, key0 + n) must be that slice of the full row, for both bias schemes.
TEST_CASE("positions: bias over a block of keys is the slice of the full row", "[positions]") {
  const ModelConfig t5 = config_with({{"type", "t5"}});
  std::vector<float> weights(size_t(32 * t5.n_heads));
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = std::sin(float(i));
  const TensorLookup lookup = [&](const std::string&) -> const float* { return weights.data(); };
  for (const ModelConfig& c : {config_with({{"type", "alibi"}}), t5}) {
    auto pe = make(c, lookup);
    const int m = 700;
    for (int h = 0; h < c.n_heads; ++h) {
      std::vector<float> full(size_t(m + 1), 0.5f);
      pe->add_bias(full.data(), 0, h, m, 0, m + 1);
      for (const auto& [key0, n] : {std::pair{0, 256}, std::pair{256, 256}, std::pair{512, 189}, std::pair{650, 51}}) {
        std::vector<float> block(size_t(n), 0.5f);
        pe->add_bias(block.data(), 0, h, m, key0, n);
        for (int i = 0; i < n; ++i) CHECK(block[size_t(i)] == full[size_t(key0 + i)]);
      }
    }
  }
}

// Learned absolute positions (GPT-2 wpe): x_m += P[m]; past the table an error naming the
// position and the clamp option, or with "beyond": "clamp" the last row (docs/design.md).
TEST_CASE("positions: learned table, its end, and clamping", "[positions]") {
  const int rows = 8, d = 16;
  std::vector<float> table(size_t(rows * d));
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < d; ++i) table[size_t(r * d + i)] = float(r) + 0.01f * float(i);
  const TensorLookup lookup = [&](const std::string& name) -> const float* {
    return name == "model.embed_positions.weight" ? table.data() : nullptr;
  };
  const json learned = {{"type", "learned"}, {"max_positions", rows}};
  auto pe = make(config_with(learned), lookup);

  std::vector<float> x(size_t(3 * d), 1.0f);
  pe->add_to_embeddings(x.data(), 5, 3);  // positions 5, 6, 7: the last rows
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < d; ++i) CHECK(x[size_t(t * d + i)] == Approx(1.0 + table[size_t((5 + t) * d + i)]));

  std::vector<float> y(size_t(5 * d), 0.0f);
  REQUIRE_THROWS_NAMING(pe->add_to_embeddings(y.data(), 6, 5), Error, "position 8 ", "8 positions", "beyond");
  REQUIRE_THROWS_NAMING(pe->add_to_embeddings(y.data(), 8, 1), Error, "position 8", "clamp");

  json clamp = learned;
  clamp["beyond"] = "clamp";
  auto clamped = make(config_with(clamp), lookup);
  clamped->add_to_embeddings(y.data(), 6, 5);  // positions 6..10 → rows 6, 7, 7, 7, 7
  for (int t = 0; t < 5; ++t)
    for (int i = 0; i < d; ++i) CHECK(y[size_t(t * d + i)] == table[size_t(std::min(6 + t, rows - 1) * d + i)]);
}
