// Positions computed from content (issue 69): FoX's forget gates and stick-breaking's weights,
// their blocks as parsed and refused, and their formulas against loops written here from the
// papers (the whole models against the float64 reference: tests/reference_test.py).
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "attention/attention.hpp"
#include "pert/config.hpp"
#include "pert/error.hpp"
#include "pert/positions.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

const std::string kSource = "test/config.json";

json with_position(const json& position) {
  json c = tiny_config();
  c["position"] = position;
  return c;
}

const float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("content positions: fox and stick_breaking parse, say what they are and what weights they need", "[positions][content]") {
  const ModelConfig fox = parse_model_config(with_position({{"type", "fox"}}), kSource);
  CHECK(fox.position.type() == "fox");
  CHECK(fox.position.scheme->kind() == SchemeKind::Bias);
  CHECK(fox.position.scheme->to_json() == json({{"type", "fox"}}));
  const std::vector<ExpectedTensor> tensors = position_tensors(fox);
  REQUIRE(tensors.size() == 4);  // a weight and a bias per layer
  CHECK(tensors[0].name == "model.layers.0.self_attn.fgate_proj.weight");
  CHECK(tensors[0].shape == std::vector<int64_t>{4, 16});  // [n_heads][hidden]
  CHECK(tensors[3].name == "model.layers.1.self_attn.fgate_proj.bias");
  CHECK(tensors[3].shape == std::vector<int64_t>{4});

  const ModelConfig sb = parse_model_config(with_position({{"type", "stick_breaking"}}), kSource);
  CHECK(sb.position.type() == "stick_breaking");
  CHECK(sb.position.scheme->kind() == SchemeKind::None);
  CHECK(position_tensors(sb).empty());
  auto pe = make_position_encoding(sb, [](const std::string&) -> const float* { return nullptr; });
  CHECK(pe->stick_breaking());
  CHECK_FALSE(pe->has_forget_gates());
  CHECK_FALSE(pe->rotates());
  CHECK_FALSE(pe->has_bias());
}

TEST_CASE("content positions: their blocks' refusals name the key", "[positions][content]") {
  SECTION("a field neither reads") {
    REQUIRE_THROWS_NAMING(parse_model_config(with_position({{"type", "fox"}, {"max_bias", 8}}), kSource), ConfigError,
                          kSource, "position.max_bias");
    REQUIRE_THROWS_NAMING(parse_model_config(with_position({{"type", "stick_breaking"}, {"attend_current", true}}), kSource),
                          ConfigError, kSource, "position.attend_current");
  }
  SECTION("FoX has weights of its own: the model's scheme, not one layer's") {
    json c = tiny_config();
    c["layers"] = {{"gated", {{"layers", {1}}, {"position", {{"type", "fox"}}}}}};
    REQUIRE_THROWS_NAMING(parse_model_config(c, kSource), ConfigError, kSource, "'fox'", "weights of its own");
  }
  SECTION("stick-breaking has no positions to re-encode") {
    json c = with_position({{"type", "stick_breaking"}});
    c["extend"] = {{"self_extend", {{"window", 8}}}};
    REQUIRE_THROWS_NAMING(parse_model_config(c, kSource), ConfigError, kSource, "extend.self_extend", "'stick_breaking'");
  }
}

// FoX: ln σ(w_h·x + b_h) per token and head, from the layer's weights, stable for any logit.
TEST_CASE("content positions: fox's log forget gates per layer and head", "[positions][content]") {
  const ModelConfig c = parse_model_config(with_position({{"type", "fox"}}), kSource);
  const int H = c.n_heads, d = c.hidden_size;
  std::map<std::string, std::vector<float>> w;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.fgate_proj.";
    for (int h = 0; h < H; ++h) {
      for (int i = 0; i < d; ++i) w[p + "weight"].push_back(0.05f * float((i + 3 * h + l) % 7) - 0.1f);
      w[p + "bias"].push_back(h == 3 ? (l == 0 ? 200.0f : -200.0f) : 1.0f + 0.5f * float(h) - float(l));
    }
  }
  auto pe = make_position_encoding(c, [&](const std::string& name) -> const float* {
    return w.count(name) ? w[name].data() : nullptr;
  });
  REQUIRE(pe->has_forget_gates());
  CHECK_FALSE(pe->can_shift());  // a shift would leave the discarded tokens' gates in the sums
  const int n = 3;
  std::vector<float> x(size_t(n) * d);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i));
  for (int l = 0; l < c.n_layers; ++l) {
    std::vector<float> out(size_t(n) * H);
    pe->log_forget_gates(out.data(), x.data(), n, l);
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.fgate_proj.";
    for (int t = 0; t < n; ++t)
      for (int h = 0; h < H; ++h) {
        double z = w[p + "bias"][size_t(h)];
        for (int i = 0; i < d; ++i) z += double(w[p + "weight"][size_t(h * d + i)]) * x[size_t(t * d + i)];
        const double want = z < -30 ? z : std::log(1.0 / (1.0 + std::exp(-z)));  // (ln σ(z) → z far below 0)
        INFO("layer " << l << " token " << t << " head " << h << " z " << z);
        CHECK(std::isfinite(out[size_t(t * H + h)]));
        CHECK(out[size_t(t * H + h)] == Approx(want).epsilon(1e-6).margin(1e-6));
      }
  }
}

// Stick-breaking: key n < m weighs β_n Π_{n<k<m} (1 − β_k), β = σ(score); the last column (the
// query's own key) what is left; masked keys (−inf) take nothing and break nothing.
TEST_CASE("content positions: stick-breaking weights from the nearest key outwards", "[positions][content]") {
  const std::vector<std::vector<float>> rows = {
      {0.3f, -1.2f, 2.5f, 0.0f, -0.7f, 9.9f},      // the last score is the query's own: never read
      {-kInf, 1.0f, -kInf, -kInf, 0.5f, 0.0f},     // a pattern's holes
      {40.0f, -40.0f, 3.0f, 0.0f},                 // saturated sticks
      {kInf, 2.0f, 0.0f},                          // a key that takes all that reaches it
      {0.0f},                                      // the first query: only itself
  };
  for (const std::vector<float>& scores : rows) {
    std::vector<float> got = scores;
    const int seen = int(got.size());
    stick_breaking_weights(got.data(), seen);
    std::vector<double> beta;
    for (int n = 0; n + 1 < seen; ++n) beta.push_back(1.0 / (1.0 + std::exp(-double(scores[size_t(n)]))));
    double sum = 0;
    for (int n = 0; n < seen; ++n) {
      const bool own = n + 1 == seen;  // the query's own key: every stick's remainder
      double want = own ? 1 : beta[size_t(n)];
      for (int k = own ? 0 : n + 1; k + 1 < seen; ++k) want *= 1 - beta[size_t(k)];
      INFO("key " << n << " of " << seen);
      CHECK(got[size_t(n)] == Approx(want).margin(1e-6));
      sum += got[size_t(n)];
    }
    CHECK(sum == Approx(1.0).margin(1e-6));  // the remainder makes them whole
  }
}
