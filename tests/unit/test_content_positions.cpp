// Positions computed from content (issue 69): FoX's forget gates, stick-breaking's weights and
// CoPE's counted positions, their blocks as parsed and refused, and their formulas against loops written here from the
// papers (the whole models against the float64 reference: tests/reference/reference_test.py).
#include <algorithm>
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

// ---- CoPE (Golovneva et al. 2024) ----

TEST_CASE("content positions: cope parses, fills npos_max and names its table per layer", "[positions][content][cope]") {
  const ModelConfig c = parse_model_config(with_position({{"type", "cope"}}), kSource);
  CHECK(c.position.type() == "cope");
  CHECK(c.position.scheme->kind() == SchemeKind::Bias);
  CHECK(c.position.scheme->positions_from_content());
  CHECK(c.position.scheme->to_json() == json({{"type", "cope"}, {"npos_max", 65}}));  // L + 1: counts 0..L
  const std::vector<ExpectedTensor> tensors = position_tensors(c);
  REQUIRE(tensors.size() == 2);  // one table per layer, shared by its heads
  CHECK(tensors[1].name == "model.layers.1.self_attn.cope_pos_emb");
  CHECK(tensors[1].shape == std::vector<int64_t>{65, 4});  // [npos_max][head_dim]

  const ModelConfig small = parse_model_config(with_position({{"type", "cope"}, {"npos_max", 8}}), kSource);
  CHECK(position_tensors(small)[0].shape == std::vector<int64_t>{8, 4});
  std::vector<float> table(8 * 4, 0.0f);
  auto pe = make_position_encoding(small, [&](const std::string&) -> const float* { return table.data(); });
  CHECK(pe->has_contextual_positions());
  CHECK_FALSE(pe->has_bias());
  CHECK_FALSE(pe->has_forget_gates());
  CHECK(pe->can_shift());  // nothing is kept with the keys: a shift drops keys, moves nothing
}

TEST_CASE("content positions: cope's refusals name the key", "[positions][content][cope]") {
  SECTION("npos_max must be a positive count") {
    REQUIRE_THROWS_NAMING(parse_model_config(with_position({{"type", "cope"}, {"npos_max", 0}}), kSource), ConfigError,
                          kSource, "position.npos_max");
    REQUIRE_THROWS_NAMING(parse_model_config(with_position({{"type", "cope"}, {"npos", 8}}), kSource), ConfigError,
                          kSource, "position.npos");
  }
  SECTION("its table is the model's: not one layer's scheme") {
    json c = tiny_config();
    c["layers"] = {{"counted", {{"layers", {1}}, {"position", {{"type", "cope"}}}}}};
    REQUIRE_THROWS_NAMING(parse_model_config(c, kSource), ConfigError, kSource, "'cope'", "weights of its own");
  }
  SECTION("methods that move positions: there are none to move (nor for FoX, whose gates' sums no index moves)") {
    for (const char* scheme : {"cope", "fox"})
      for (const char* method : {"self_extend", "rerope", "leaky_rerope", "dca", "streaming"}) {
        json c = with_position({{"type", scheme}});
        c["extend"] = {{method, json::object()}};  // (streaming: its sinks at cache positions by default)
        INFO(scheme << " " << method);
        REQUIRE_THROWS_NAMING(parse_model_config(c, kSource), ConfigError, kSource, std::string("extend.") + method,
                              std::string("'") + scheme + "'", "none to move");
      }
  }
  SECTION("masks and query factors apply: streaming's sinks and window as they stand, blockwise, log-n") {
    for (const char* scheme : {"cope", "fox"}) {
      json c = with_position({{"type", scheme}});
      c["extend"] = {{"streaming", {{"sinks", 2}, {"window", 8}, {"positions", "original"}}}, {"logn", json::object()}};
      CHECK_NOTHROW(parse_model_config(c, kSource));
      c["extend"] = {{"blockwise", {{"block", 8}}}};
      CHECK_NOTHROW(parse_model_config(c, kSource));
    }
  }
}

// CoPE's term: p_j = Σ_{j<=k<=m} σ(z_k) over the keys the query sees (its own last), capped at
// npos_max − 1; the score gains scale · q·e(p), e interpolated between e[⌊p⌋] and e[⌈p⌉]. The
// loop here is the paper's formula, pair by pair, in double.
TEST_CASE("content positions: cope counts from the query back and interpolates its positions", "[positions][content][cope]") {
  const int npos = 5, hd = 4;
  const ModelConfig c = parse_model_config(with_position({{"type", "cope"}, {"npos_max", npos}}), kSource);
  REQUIRE(c.head_dim == hd);
  std::map<std::string, std::vector<float>> w;
  for (int l = 0; l < c.n_layers; ++l)
    for (int i = 0; i < npos * hd; ++i)
      w["model.layers." + std::to_string(l) + ".self_attn.cope_pos_emb"].push_back(std::cos(1.3f * float(i) + float(l)));
  auto pe = make_position_encoding(c, [&](const std::string& name) -> const float* {
    return w.count(name) ? w[name].data() : nullptr;
  });
  const std::vector<float> q = {0.7f, -1.1f, 0.4f, 2.0f};
  const float scale = 0.5f;
  const std::vector<std::vector<float>> rows = {
      {0.3f, -1.2f, 2.5f, 0.0f, -0.7f, 1.9f},              // fractional positions, within the table
      {-kInf, 1.0f, -kInf, -kInf, 0.5f, 0.0f},             // keys the query does not see count nothing
      {40.0f, 40.0f, 40.0f, 40.0f, 40.0f, 40.0f, 40.0f},  // gates of 1: integer positions, then the cap
      {3.0f, 2.0f, 1.5f, 4.0f, 0.2f, 2.2f, 3.1f, 1.0f},    // the cap reached midway
      {-3.0f},                                             // the first query: only itself
  };
  for (int layer = 0; layer < c.n_layers; ++layer)
    for (const std::vector<float>& scores : rows) {
      std::vector<float> got = scores;
      const int seen = int(got.size());
      pe->add_contextual_positions(got.data(), seen, layer, q.data(), scale);
      const float* e = w["model.layers." + std::to_string(layer) + ".self_attn.cope_pos_emb"].data();
      for (int j = 0; j < seen; ++j) {
        INFO("layer " << layer << " key " << j << " of " << seen);
        if (scores[size_t(j)] == -kInf) {
          CHECK(got[size_t(j)] == -kInf);
          continue;
        }
        double p = 0;
        for (int k = j; k < seen; ++k)
          if (scores[size_t(k)] != -kInf) p += 1.0 / (1.0 + std::exp(-double(scores[size_t(k)])));
        p = std::min(p, double(npos - 1));
        const int lo = int(std::floor(p)), hi = int(std::ceil(p));
        double term = 0;
        for (int i = 0; i < hd; ++i) {
          const double ep = lo == hi ? e[lo * hd + i] : (hi - p) * e[lo * hd + i] + (p - lo) * e[hi * hd + i];
          term += double(q[size_t(i)]) * ep;
        }
        CHECK(got[size_t(j)] == Approx(double(scores[size_t(j)]) + scale * term).margin(2e-6));
      }
    }
}
