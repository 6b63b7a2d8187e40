// Sampling and generation: the sampler's rules, and the context shift.
#include <cmath>
#include <map>

#include "pert/evaluation.hpp"
#include "pert/generate.hpp"
#include "pert/model_dir.hpp"
#include "pert/passkey.hpp"
#include "pert/sampler.hpp"
#include "pert/text_generation.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(float(std::log(p)));
  return l;
}

SamplerParams plain(float temperature, uint64_t seed = 1) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

int draw(SamplerParams p, std::vector<float> logits, const std::vector<int>& history = {}) {
  Sampler s(p);
  return s.sample(logits.data(), int(logits.size()), history);
}

}  // namespace

TEST_CASE("sampler: greedy, top-k, top-p and min-p keep the best token", "[sampler]") {
  const std::vector<float> l = {0.1f, 2.0f, 2.0f, -1.0f, 1.9f};
  CHECK(draw(plain(0.0f), l) == 1);  // argmax, first of ties
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SamplerParams k1 = plain(5.0f, seed);
    k1.top_k = 1;
    CHECK(draw(k1, l) == 1);
    SamplerParams p = plain(5.0f, seed);
    p.top_p = 1e-4f;
    CHECK(draw(p, l) == 1);
    SamplerParams m = plain(5.0f, seed);
    m.min_p = 0.99f;
    CHECK((draw(m, l) == 1 || draw(m, l) == 2));  // both have the top probability
  }
}

TEST_CASE("sampler: draws follow the tempered distribution, and a seed repeats them", "[sampler]") {
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  const int n = 40000;
  Sampler s(plain(1.0f, 42));
  std::map<int, int> count;
  std::vector<int> first;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = logits_of(probs);
    const int t = s.sample(l.data(), 4, {});
    ++count[t];
    if (i < 100) first.push_back(t);
  }
  for (int t = 0; t < 4; ++t) CHECK(count[t] / double(n) == Approx(probs[size_t(t)]).margin(0.01));

  Sampler again(plain(1.0f, 42)), other(plain(1.0f, 43));
  std::vector<int> repeat, different;
  for (int i = 0; i < 100; ++i) {
    std::vector<float> l = logits_of(probs), l2 = logits_of(probs);
    repeat.push_back(again.sample(l.data(), 4, {}));
    different.push_back(other.sample(l2.data(), 4, {}));
  }
  CHECK(repeat == first);
  CHECK(different != first);

  // Temperature 0.5 squares the odds: p ∝ probs².
  Sampler cold(plain(0.5f, 7));
  int top = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = logits_of(probs);
    top += cold.sample(l.data(), 4, {}) == 0;
  }
  CHECK(top / double(n) == Approx(0.25 / (0.25 + 0.09 + 0.0225 + 0.0025)).margin(0.01));
}

TEST_CASE("sampler: top-p and min-p cut the tail", "[sampler]") {
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  for (uint64_t seed = 0; seed < 300; ++seed) {
    SamplerParams p = plain(1.0f, seed);
    p.top_p = 0.75f;  // 0.5 + 0.3 reaches it: tokens 0 and 1 only
    CHECK(draw(p, logits_of(probs)) <= 1);
    SamplerParams m = plain(1.0f, seed);
    m.min_p = 0.31f;  // p >= 0.155: tokens 0 and 1 only
    CHECK(draw(m, logits_of(probs)) <= 1);
  }
}

TEST_CASE("sampler: the repetition penalty divides positive and multiplies negative logits", "[sampler]") {
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 2;
  CHECK(draw(p, {3.0f, 2.0f, -1.0f}, {0}) == 1);     // 3/2 < 2
  CHECK(draw(p, {3.0f, 2.0f, -1.0f}, {0, 5, 1}) == 0);  // 0 is out of the last 2; 1 halves
  std::vector<float> l = {-1.0f, -1.5f};
  Sampler s(p);
  CHECK(s.sample(l.data(), 2, {0}) == 1);  // -1·2 = -2 < -1.5
  CHECK(l[0] == -2.0f);
}

namespace {

// A one-layer model with random weights for `position` (the cache of a single layer depends
// on nothing but its own tokens, so a shifted cache can equal a fresh one exactly).
std::unique_ptr<Model> one_layer_model(const TempDir& tmp, const json& position, const json& extra = json::object()) {
  json c = tiny_config();
  c["num_hidden_layers"] = 1;
  c["max_position_embeddings"] = 8;
  c["position"] = position;
  c.merge_patch(extra);
  std::vector<TestTensor> tensors;
  uint32_t seed = 11;
  for (const ExpectedTensor& e : expected_tensors(parse_model_config(c, "c"))) {
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    tensors.push_back({e.name, "F32", e.shape, exact_values(n, seed++)});
  }
  write_model_dir(tmp.path, c, tensors);
  return Model::load(tmp.path);
}

}  // namespace

TEST_CASE("context shift: the next logits equal a fresh prefill of the kept tokens", "[generate]") {
  const json longrope = {{"type", "longrope"}, {"factor", 4}, {"short_factor", {1.0, 1.5}}, {"long_factor", {2.0, 3.0}}};
  const std::vector<json> positions = {
      {{"type", "none"}},
      {{"type", "learned"}, {"max_positions", 64}},
      {{"type", "sinusoidal"}},
      {{"type", "rope"}},
      {{"type", "rope"}, {"layout", "interleaved"}, {"rotary_dim", 2}},
      {{"type", "rope"}, {"scaling", {{"type", "yarn"}, {"factor", 4}}}},
      {{"type", "rope"}, {"xpos", {{"scale_base", 16}}}},
      {{"type", "rope"}, {"scaling", {{"type", "dynamic"}, {"factor", 2}}}},
      {{"type", "rope"}, {"scaling", longrope}},
      {{"type", "alibi"}},
      {{"type", "t5"}, {"num_buckets", 8}, {"max_distance", 12}},
      {{"type", "rope"}, {"window", 5}},  // a Mistral model with a sliding window of 5 (below)
      {{"type", "rope"}, {"window", 5}, {"batch", 2}},  // ... its cache a ring of 4 + 2 positions: re-encoded
  };
  for (json position : positions) {
    INFO(position.dump());
    json extra = json::object();
    if (position.contains("window")) {
      extra = {{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"sliding_window", position["window"]}};
      position.erase("window");
    }
    const int n_batch = position.value("batch", 512);
    position.erase("batch");
    TempDir tmp;
    auto model = one_layer_model(tmp, position, extra);
    std::vector<int> tokens;
    for (int i = 0; i < 20; ++i) tokens.push_back((i * 11 + 5) % 32);
    const int n_keep = 3, n_discard = 8, next = 17;
    std::vector<float> shifted(32), fresh(32), scratch(32);

    InferenceState state(*model, 32, n_batch);
    state.forward(tokens.data(), 20, 0, scratch.data(), false);
    std::vector<int> kept(tokens.begin(), tokens.begin() + n_keep);
    kept.insert(kept.end(), tokens.begin() + n_keep + n_discard, tokens.end());
    const bool moved = state.shift(n_keep, n_discard);
    CHECK(moved == (position["type"] != "learned" && position["type"] != "sinusoidal" && n_batch == 512));
    if (!moved) state.forward(kept.data(), int(kept.size()), 0, scratch.data(), false);  // re-encode
    REQUIRE(state.n_past() == int(kept.size()));
    state.forward(&next, 1, state.n_past(), shifted.data(), false);

    kept.push_back(next);
    InferenceState clean(*model, 32);
    clean.forward(kept.data(), int(kept.size()), 0, fresh.data(), false);
    float diff = 0.0f;
    for (size_t i = 0; i < 32; ++i) diff = std::max(diff, std::fabs(shifted[i] - fresh[i]));
    CHECK(diff <= 1e-4f);
  }
}

// LongRoPE by the whole sequence (the default): a shift that leaves at most L positions changes
// the length's class, so the next forward re-encodes the kept tokens, moved with their positions,
// with the short factors: its logits equal a fresh prefill of them.
TEST_CASE("context shift: LongRoPE by the sequence back below L re-encodes the kept tokens", "[generate]") {
  const json longrope = {{"type", "longrope"}, {"factor", 4}, {"short_factor", {1.0, 1.5}}, {"long_factor", {2.0, 3.0}}};
  TempDir tmp;
  auto model = one_layer_model(tmp, {{"type", "rope"}, {"scaling", longrope}});  // L = 8
  std::vector<int> tokens;
  for (int i = 0; i < 12; ++i) tokens.push_back((i * 5 + 3) % 32);
  std::vector<float> shifted(32), fresh(32);
  InferenceState state(*model, 16);
  state.forward(tokens.data(), 12, 0, shifted.data(), false);
  REQUIRE(state.shift(2, 6));
  const int next = 17;
  state.forward(&next, 1, state.n_past(), shifted.data(), false);  // 7 positions: short factors
  std::vector<int> kept = {tokens[0], tokens[1], tokens[8], tokens[9], tokens[10], tokens[11], next};
  InferenceState clean(*model, 16);
  clean.forward(kept.data(), int(kept.size()), 0, fresh.data(), false);
  for (size_t i = 0; i < 32; ++i) CHECK(shifted[i] == Approx(fresh[i]).margin(1e-4));
}

TEST_CASE("generate: shifts the context to go on past it, and stops at EOS", "[generate]") {
  TempDir tmp;
  auto model = one_layer_model(tmp, {{"type", "rope"}});
  InferenceState state(*model, 16);
  GenerateOptions o;
  o.n_predict = 40;
  o.n_keep = 2;
  Sampler greedy(plain(0.0f));
  std::vector<int> seen;
  const GenerateResult r = generate(state, {1, 5, 9}, o, greedy, [&](int id) { seen.push_back(id); });
  CHECK(r.tokens.size() == 40);
  CHECK(seen == r.tokens);
  CHECK(r.stop == "length");
  CHECK(r.context_shifts >= 3);  // 3 + 40 tokens through 16 positions, 7 freed per shift

  InferenceState again(*model, 16);
  o.eos = {r.tokens[4]};
  Sampler greedy2(plain(0.0f));
  const GenerateResult stopped = generate(again, {1, 5, 9}, o, greedy2, [](int) {});
  CHECK(stopped.stop == "eos");
  CHECK(stopped.tokens.size() <= 5);
  CHECK(stopped.tokens.back() == r.tokens[4]);
}

// The tasks' settings check themselves and word their errors by field (error.hpp): each front
// end renders the names as its flags or keywords (the CLI's and the module's tests).
TEST_CASE("settings: generation, evaluation and pass-key settings validate themselves, by field", "[settings]") {
  TextGenerationSettings s;
  CHECK_NOTHROW(validate(s));
  auto with = [](auto change) {
    TextGenerationSettings t;
    change(t);
    return t;
  };
  REQUIRE_THROWS_NAMING(validate(with([](auto& t) { t.n_predict = 0; })), Error, "`n_predict`", "got 0");
  REQUIRE_THROWS_NAMING(validate(with([](auto& t) { t.n_keep = -2; })), Error, "`n_keep`", "got -2");
  REQUIRE_THROWS_NAMING(validate(with([](auto& t) { t.sampling.temperature = -1; })), Error, "`temperature`", "got -1");
  REQUIRE_THROWS_NAMING(validate(with([](auto& t) { t.sampling.temperature = NAN; })), Error, "`temperature`", "nan");
  REQUIRE_THROWS_NAMING(validate(with([](auto& t) { t.sampling.top_p = 1.5f; })), Error, "`top_p`", "[0, 1]");
  REQUIRE_THROWS_NAMING(validate(with([](auto& t) { t.sampling.repeat_penalty = 0; })), Error, "`repeat_penalty`");
  REQUIRE_THROWS_NAMING(validate(with([](auto& t) { t.sampling.repeat_last_n = -1; })), Error, "`repeat_last_n`");

  EvalSpec e;
  CHECK_NOTHROW(e.validate());
  e.stride = 8;
  REQUIRE_THROWS_NAMING(e.validate(), Error, "`stride` only with `mode` sliding", "chunks");
  e.mode = "sliding";
  CHECK_NOTHROW(e.validate());
  e.mode = "sideways";
  REQUIRE_THROWS_NAMING(e.validate(), Error, "`mode`", "sideways");
  e = EvalSpec{};
  CHECK(e.buckets == kLogBuckets);
  CHECK(e.settings()["buckets"] == "log");
  e.buckets = -1;
  REQUIRE_THROWS_NAMING(e.options(16, -1), Error, "`buckets`", "got -1");  // options() checks first
  e.buckets = 7;
  CHECK(e.settings()["buckets"] == 7);
  CHECK(buckets_from_json("log") == kLogBuckets);
  CHECK(buckets_from_json(1048576) == 1048576);
  for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json(1048577), nlohmann::json("Log"), nlohmann::json(2.5),
                                    nlohmann::json(nullptr)})
    REQUIRE_THROWS_NAMING(buckets_from_json(bad, "out.json: settings.buckets"), Error, "out.json: settings.buckets",
                          "\"log\" or a count from 1 to 1048576");
  e = EvalSpec{};
  e.mode = "llama", e.split_docs = true;
  REQUIRE_THROWS_NAMING(e.validate(), Error, "`split_docs` not with `mode` llama");

  PasskeySettings p;
  REQUIRE_THROWS_NAMING(validate(p), Error, "`lengths` is empty");
  p.lengths = {64, 1};
  REQUIRE_THROWS_NAMING(validate(p), Error, "`lengths` must be at least 2", "got 1");
  p.lengths = {64};
  CHECK_NOTHROW(validate(p));
  p.depths = {0.5, 1.25};
  REQUIRE_THROWS_NAMING(validate(p), Error, "`depths` must be in [0, 1]", "got 1.25");
  p.depths = {0.5};
  p.trials = 0;
  REQUIRE_THROWS_NAMING(validate(p), Error, "`trials`", "got 0");
}
