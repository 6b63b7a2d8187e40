// distance_profile (pert positions) against closed forms of q = k = ones for each scheme.
#include <cmath>

#include "pert/config.hpp"
#include "attention/positions/rope.hpp"
#include "pert/error.hpp"
#include "pert/positions.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

ModelConfig profile_config(const json& position) {
  json c = tiny_config();  // head_dim 4, 4 heads, hidden 16
  c["position"] = position;
  return parse_model_config(c, "test/config.json");
}

const TensorLookup kNoTensors = [](const std::string&) -> const float* { return nullptr; };

}  // namespace

TEST_CASE("profile: NoPE is the constant sqrt(head_dim)", "[positions][profile]") {
  const auto p = distance_profile(profile_config({{"type", "none"}}), kNoTensors, 40, 40);
  REQUIRE(p.size() == 4);
  for (const auto& head : p) {
    REQUIRE(head.size() == 41);
    for (double v : head) CHECK(v == Approx(2.0).epsilon(1e-6));  // 4 / sqrt(4)
  }
}

TEST_CASE("profile: RoPE is sum over pairs of 2 cos(delta theta_i) / sqrt(hd), the same for every head", "[positions][profile]") {
  const ModelConfig c = profile_config({{"type", "rope"}, {"base", 100.0}});
  const auto p = distance_profile(c, kNoTensors, 50, 30);
  for (int delta = 0; delta <= 30; ++delta) {
    double want = 0;
    for (int i = 0; i < 2; ++i) want += 2 * std::cos(delta * std::pow(100.0, -2.0 * i / 4)) / 2.0;
    for (const auto& head : p) CHECK(head[size_t(delta)] == Approx(want).margin(1e-5));
  }
}

TEST_CASE("profile: KERPLE is sqrt(hd) - r1 log(1 + r2 distance), with the layer's r1 and r2", "[positions][profile]") {
  const ModelConfig c = profile_config({{"type", "kerple"}});
  // Layer l, head h: r1 = 1 + l + h, r2 = 0.5 (h + 1).
  std::vector<std::vector<float>> r1, r2;
  for (int l = 0; l < c.n_layers; ++l) {
    r1.emplace_back(), r2.emplace_back();
    for (int h = 0; h < c.n_heads; ++h) r1.back().push_back(float(1 + l + h)), r2.back().push_back(0.5f * float(h + 1));
  }
  const TensorLookup tensors = [&](const std::string& name) -> const float* {
    for (int l = 0; l < c.n_layers; ++l)
      if (name == "model.layers." + std::to_string(l) + ".self_attn.kerple_r1") return r1[size_t(l)].data();
      else if (name == "model.layers." + std::to_string(l) + ".self_attn.kerple_r2") return r2[size_t(l)].data();
    return nullptr;
  };
  for (int l = 0; l < c.n_layers; ++l) {
    const auto p = distance_profile(c, tensors, 30, 30, l);
    for (int h = 0; h < 4; ++h)
      for (int delta = 0; delta <= 30; ++delta)
        CHECK(p[size_t(h)][size_t(delta)] == Approx(2.0 - (1 + l + h) * std::log(1.0 + 0.5 * (h + 1) * delta)).margin(1e-4));
  }
}

TEST_CASE("profile: ALiBi is sqrt(hd) minus slope times distance, per head", "[positions][profile]") {
  const ModelConfig c = profile_config({{"type", "alibi"}});
  const auto p = distance_profile(c, kNoTensors, 20, 20);
  const std::vector<double> slopes = alibi_slopes(4, 8.0);
  for (int h = 0; h < 4; ++h)
    for (int delta = 0; delta <= 20; ++delta) CHECK(p[size_t(h)][size_t(delta)] == Approx(2.0 - slopes[size_t(h)] * delta).margin(1e-5));
}

TEST_CASE("profile: xPos weighs RoPE's pairs by zeta_i^(delta / scale_base)", "[positions][profile]") {
  const auto p = distance_profile(profile_config({{"type", "rope"}, {"xpos", {{"scale_base", 16.0}}}}), kNoTensors, 64, 64);
  for (int delta = 0; delta <= 64; ++delta) {
    double want = 0;  // q scaled by zeta^(m/b), k by zeta^(-n/b): the product depends on m - n only
    for (int i = 0; i < 2; ++i)
      want += 2 * std::cos(delta * std::pow(10000.0, -2.0 * i / 4)) * std::pow((2.0 * i / 4 + 0.4) / 1.4, delta / 16.0) / 2.0;
    CHECK(p[0][size_t(delta)] == Approx(want).margin(1e-5));
  }
}

TEST_CASE("profile: sinusoidal is p(m).p(n)/sqrt(d), one row", "[positions][profile]") {
  const auto p = distance_profile(profile_config({{"type", "sinusoidal"}}), kNoTensors, 30, 10);
  REQUIRE(p.size() == 1);
  for (int delta = 0; delta <= 10; ++delta) {
    double want = 0;  // sin a sin b + cos a cos b = cos(a - b) for each of the 8 pairs
    for (int i = 0; i < 8; ++i) want += std::cos(delta * std::pow(10000.0, -2.0 * i / 16));
    CHECK(p[0][size_t(delta)] == Approx(want / 4.0).margin(1e-5));
  }
}

TEST_CASE("profile: FoX loses delta ln sigma(b_h) a key, its gates reading a zero input", "[positions][profile][fox]") {
  const ModelConfig c = profile_config({{"type", "fox"}});
  const std::vector<float> weight(size_t(c.n_heads) * size_t(c.hidden_size), 0.7f);  // read a zero input: no effect
  const std::vector<float> bias = {3.0f, 1.0f, 0.0f, -2.0f};                          // per head
  const TensorLookup tensors = [&](const std::string& name) -> const float* {
    return name.find("fgate_proj.weight") != std::string::npos ? weight.data()
           : name.find("fgate_proj.bias") != std::string::npos ? bias.data() : nullptr;
  };
  const auto p = distance_profile(c, tensors, 40, 40);
  REQUIRE(p.size() == 4);
  for (int h = 0; h < 4; ++h)
    for (int delta = 0; delta <= 40; ++delta)  // 4 / sqrt(4) + delta ln sigma(b)
      CHECK(p[size_t(h)][size_t(delta)] == Approx(2.0 - delta * std::log1p(std::exp(-double(bias[size_t(h)])))).margin(1e-4));
}

TEST_CASE("profile: CoPE counts sigma(q.k scale) a key and adds scale q.e(p), interpolated and capped", "[positions][profile][cope]") {
  const ModelConfig c = profile_config({{"type", "cope"}, {"npos_max", 9}});
  // e[t][i] = 0.1 t + 0.01 i on every layer: scale q.e(t) = 0.5 (0.4 t + 0.06), linear in t, so
  // the interpolation at p is the same line at p
  std::vector<float> table;
  for (int t = 0; t < 9; ++t)
    for (int i = 0; i < 4; ++i) table.push_back(0.1f * float(t) + 0.01f * float(i));
  const TensorLookup tensors = [&](const std::string& name) -> const float* {
    return name.find("cope_pos_emb") != std::string::npos ? table.data() : nullptr;
  };
  const auto p = distance_profile(c, tensors, 30, 30);
  const double gate = 1.0 / (1.0 + std::exp(-2.0));  // sigma(4 / sqrt(4))
  for (const auto& head : p)
    for (int delta = 0; delta <= 30; ++delta) {
      const double pos = std::min((delta + 1) * gate, 8.0);  // keys delta..0 back, the query's own counted
      CHECK(head[size_t(delta)] == Approx(2.0 + 0.5 * (0.4 * pos + 0.06)).margin(1e-4));
    }
  // with a window of 8 the keys it hides are -inf and count nothing
  json w = tiny_config();
  w["position"] = {{"type", "cope"}, {"npos_max", 9}};
  w["architectures"] = {"MistralForCausalLM"};
  w["model_type"] = "mistral";
  w["sliding_window"] = 8;
  const auto windowed = distance_profile(parse_model_config(w, "test/config.json"), tensors, 30, 30);
  CHECK(windowed[0][7] == Approx(p[0][7]).margin(1e-6));
  CHECK(std::isinf(windowed[0][8]));
}

TEST_CASE("profile: bad distances are errors", "[positions][profile]") {
  CHECK_THROWS_AS(distance_profile(profile_config({{"type", "none"}}), kNoTensors, 10, 11), Error);
  CHECK_THROWS_AS(distance_profile(profile_config({{"type", "none"}}), kNoTensors, 10, -1), Error);
}
