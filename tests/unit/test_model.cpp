// The forward-pass API: its input checks, the last-logits path, batching, and cache reuse.
// (Numerical agreement with the PyTorch reference is tested by tests/reference/reference_test.py.)
#include <cmath>

#include "pert/attention_stats.hpp"
#include "pert/error.hpp"
#include "pert/model.hpp"
#include "pert/model_dir.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

std::unique_ptr<Model> tiny_model(const TempDir& tmp, const json& position = nullptr) {
  json c = tiny_config();
  if (!position.is_null()) c["position"] = position;
  std::vector<TestTensor> tensors = tiny_tensors();
  if (!position.is_null() && position["type"] == "learned")
    tensors.push_back({"model.embed_positions.weight", "F32", {8, 16}, exact_values(8 * 16, 99)});
  write_model_dir(tmp.path, c, tensors);
  return Model::load(tmp.path);
}

// A model of config c in tmp, every tensor random in [-0.5, 0.5): logits of a few units, not chaos.
std::unique_ptr<Model> random_model(const TempDir& tmp, const json& c, uint32_t seed) {
  std::vector<TestTensor> tensors;
  for (const ExpectedTensor& e : expected_tensors(parse_model_config(c, "c"))) {
    int64_t size = 1;
    for (int64_t d : e.shape) size *= d;
    tensors.push_back({e.name, "F32", e.shape, random_floats(size_t(size), seed++, 0.5f)});
  }
  write_model_dir(tmp.path, c, tensors);
  return Model::load(tmp.path);
}

std::vector<int> some_tokens(int n) {
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 7 + 3) % 32);
  return ids;
}

// A model with local layers (`extra` merged into a tiny config of 1024 trained positions) and
// its logits for `ids` from one prefill with every position cached; `largest`: their magnitude.
std::unique_ptr<Model> local_model(const TempDir& tmp, const json& extra, uint32_t seed) {
  json c = tiny_config();
  c["max_position_embeddings"] = 1024;
  c.merge_patch(extra);
  return random_model(tmp, c, seed);
}
std::vector<float> whole_prefill(const Model& model, const std::vector<int>& ids, CacheType cache, float& largest) {
  const int n = int(ids.size());
  std::vector<float> logits(size_t(n) * size_t(model.config().vocab_size));
  InferenceState all(model, n, n, 1, cache);  // a batch of every position: nothing to drop
  all.forward(ids.data(), n, 0, logits.data(), true);
  largest = 0.0f;
  for (float x : logits) largest = std::max(largest, std::fabs(x));
  return logits;
}

float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("model: bad forward input is an error, never a bad read", "[model]") {
  TempDir tmp;
  auto model = tiny_model(tmp);
  InferenceState state(*model, 16);
  std::vector<float> logits(32 * 16);
  std::vector<int> ids = some_tokens(4);
  REQUIRE_THROWS_NAMING(state.forward(ids.data(), 0, 0, logits.data(), false), Error, "no tokens");
  ids[2] = 32;
  REQUIRE_THROWS_NAMING(state.forward(ids.data(), 4, 0, logits.data(), false), Error, "token id 32", "[0, 32)");
  ids[2] = -1;
  REQUIRE_THROWS_NAMING(state.forward(ids.data(), 4, 0, logits.data(), false), Error, "token id -1");
  ids = some_tokens(17);
  REQUIRE_THROWS_NAMING(state.forward(ids.data(), 17, 0, logits.data(), false), Error, "position", "16", "context size 16");
  REQUIRE_THROWS_NAMING(state.forward(ids.data(), 2, 3, logits.data(), false), Error, "leaves a gap");
  CHECK(state.n_past() == 0);
  REQUIRE_THROWS_NAMING(InferenceState(*model, 0), Error, "context size");
}

TEST_CASE("model: last-token logits, batching and cache reuse agree with one full prefill", "[model]") {
  TempDir tmp;
  auto model = tiny_model(tmp);
  const int n = 13, V = 32;
  const std::vector<int> ids = some_tokens(n);
  std::vector<float> all(size_t(n) * V), last(V), batched(size_t(n) * V), again(size_t(n) * V);

  InferenceState full(*model, 16);
  full.forward(ids.data(), n, 0, all.data(), true);
  CHECK(full.n_past() == n);
  InferenceState one(*model, 16);
  one.forward(ids.data(), n, 0, last.data(), false);
  CHECK(max_abs_diff(last.data(), &all[size_t(n - 1) * V], V) <= 1e-5f);

  InferenceState small_batches(*model, 16, /*n_batch=*/4);  // 13 tokens in chunks of 4
  small_batches.forward(ids.data(), n, 0, batched.data(), true);
  CHECK(max_abs_diff(batched.data(), all.data(), all.size()) <= 1e-4f);
  // One token per step (the decode kernel, GEMV instead of GEMM): the logits reach ~67, so
  // float32 sums in another order differ by a few 1e-6 of that.
  InferenceState decoding(*model, 16, /*n_batch=*/1);
  decoding.forward(ids.data(), n, 0, batched.data(), true);
  float largest = 0.0f;
  for (float x : all) largest = std::max(largest, std::fabs(x));
  CHECK(max_abs_diff(batched.data(), all.data(), all.size()) <= 1e-5f * largest);

  // Rewinding: re-running positions 5.. over a cache that holds 13 replaces them.
  full.forward(ids.data() + 5, n - 5, 5, &again[5 * V], true);
  CHECK(max_abs_diff(&again[5 * V], &all[5 * V], size_t(n - 5) * V) <= 1e-4f);
  for (float x : all) REQUIRE(std::isfinite(x));
}

TEST_CASE("model: a learned table ends in an error unless clamped", "[model]") {
  TempDir tmp;
  auto model = tiny_model(tmp, {{"type", "learned"}, {"max_positions", 8}});
  std::vector<float> logits(32);
  const std::vector<int> ids = some_tokens(9);
  InferenceState state(*model, 16);
  REQUIRE_THROWS_NAMING(state.forward(ids.data(), 9, 0, logits.data(), false), Error, "position 8",
                        "learned position table (8 positions)", "position.beyond=clamp");
  CHECK_NOTHROW(state.forward(ids.data(), 8, 0, logits.data(), false));

  TempDir tmp2;
  auto clamped = tiny_model(tmp2, {{"type", "learned"}, {"max_positions", 8}, {"beyond", "clamp"}});
  InferenceState ok(*clamped, 16);
  CHECK_NOTHROW(ok.forward(ids.data(), 9, 0, logits.data(), false));
}

// Past L a length-dependent rotation gives each query its own frequencies: a prefill runs the
// queries of many length classes in one forward, each turning the cached keys it reads itself
// (Attention::span). That equals one class per forward (decoding token by token) for every
// layout, a partial rotary dim, LongRoPE's two classes, a sliding window and narrower caches,
// over more keys and queries than one block or tile of the kernel holds. (LongRoPE by each
// position's length: by the whole sequence's, the next test, every position has one class.)
TEST_CASE("model: a prefill over several length classes equals decoding token by token", "[model]") {
  const json longrope = {{"type", "longrope"}, {"factor", 4}, {"short_factor", {1.0, 1.5}}, {"long_factor", {2.0, 3.0}},
                         {"longrope_choice", "position"}};
  const std::vector<std::pair<json, json>> cases = {
      {{{"type", "rope"}, {"scaling", {{"type", "dynamic"}, {"factor", 2}}}}, json::object()},
      {{{"type", "rope"}, {"layout", "interleaved"}, {"rotary_dim", 4}, {"scaling", {{"type", "dynamic"}, {"factor", 3}}}},
       {{"hidden_size", 32}, {"num_attention_heads", 4}}},  // head_dim 8, rotary 4
      {{{"type", "rope"}, {"scaling", longrope}}, json::object()},
      {{{"type", "rope"}, {"scaling", {{"type", "dynamic"}, {"factor", 2}}}},
       {{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"sliding_window", 21}}},
  };
  const int n = 150, V = 32;  // L = 64: positions 64.. are 86 classes (dynamic)
  const std::vector<int> ids = some_tokens(n);
  for (const auto& [position, extra] : cases)
    for (CacheType cache : {CacheType::F32, CacheType::Q8}) {
      INFO(position.dump() << " " << extra.dump() << ", cache " << cache_type_name(cache));
      json c = tiny_config();
      c["position"] = position;
      c.merge_patch(extra);
      TempDir tmp;
      const auto model = random_model(tmp, c, 5);
      std::vector<float> prefill(size_t(n) * V), chunks(size_t(n) * V), decoded(size_t(n) * V);
      InferenceState one(*model, n, 512, 1, cache);
      one.forward(ids.data(), n, 0, prefill.data(), true);
      InferenceState sevens(*model, n, 7, 1, cache);  // chunks that straddle L and the kernel's tiles
      sevens.forward(ids.data(), n, 0, chunks.data(), true);
      InferenceState decoding(*model, n, 1, 1, cache);
      decoding.forward(ids.data(), n, 0, decoded.data(), true);
      float largest = 0.0f;
      for (float x : prefill) largest = std::max(largest, std::fabs(x));
      REQUIRE(std::isfinite(largest));
      // The same cached values, summed in another order: decoding's q8 rows 16 lanes at a time
      // (the avx512 cache path) against prefill's widened rows; a build without FMA contraction
      // (the sanitizers') lands just past 1e-5 there.
      const float tolerance = (cache == CacheType::Q8 ? 2e-5f : 1e-5f) * largest;
      CHECK(max_abs_diff(prefill.data(), decoded.data(), prefill.size()) <= tolerance);
      CHECK(max_abs_diff(chunks.data(), decoded.data(), chunks.size()) <= tolerance);
    }
}

// LongRoPE by the whole sequence (transformers' choice, the default): every position of a
// forward and every cached one takes the factors of the sequence's length, the cache re-encoded
// when a forward changes that length's class. So one prefill of N tokens, N fed one by one, and
// forwards of 7 all end with every position encoded for N (the next token's logits agree); a
// rewind or a forward from the middle gives what a fresh prefill of the same tokens gives, below
// L or past it; sequences in step keep their own tokens; and re-encoding adds no statistics.
TEST_CASE("model: LongRoPE by the whole sequence re-encodes the cache when its length crosses L", "[model]") {
  const int L = 24, n = 60, V = 32;
  json rope = {{"type", "rope"},
               {"scaling", {{"type", "longrope"}, {"original_max_position_embeddings", L}, {"factor", 4},
                            {"short_factor", {1.0, 1.5}}, {"long_factor", {2.0, 3.0}}}}};
  json c = tiny_config();
  c["position"] = rope;
  TempDir tmp;
  const auto model = random_model(tmp, c, 21);
  const std::vector<int> ids = some_tokens(n);
  const int next = 5;
  // The last logits of a fresh prefill of `tokens`.
  auto fresh = [&](const std::vector<int>& tokens) {
    std::vector<float> out(V);
    InferenceState s(*model, n + 1);
    s.forward(tokens.data(), int(tokens.size()), 0, out.data(), false);
    return out;
  };
  auto concat = [](std::vector<int> a, const std::vector<int>& b) { return a.insert(a.end(), b.begin(), b.end()), a; };
  float largest = 0.0f;
  const std::vector<float> whole = whole_prefill(*model, ids, CacheType::F32, largest);
  REQUIRE(std::isfinite(largest));
  const float tol = 1e-5f * largest;

  SECTION("one prefill, tokens one by one, forwards of 7") {
    for (CacheType cache : {CacheType::F32, CacheType::Q8}) {
      INFO("cache " << cache_type_name(cache));
      std::vector<float> prefill(size_t(n) * V), decoded(size_t(n) * V), after_prefill(V), after(V);
      InferenceState one(*model, n + 1, 512, 1, cache), decoding(*model, n + 1, 1, 1, cache), sevens(*model, n + 1, 512, 1, cache);
      one.forward(ids.data(), n, 0, prefill.data(), true);
      for (int t = 0; t < n; ++t) decoding.forward(&ids[size_t(t)], 1, t, &decoded[size_t(t) * V], false);
      for (int t = 0; t < n; t += 7) sevens.forward(&ids[size_t(t)], std::min(7, n - t), t, after.data(), false);
      CHECK(max_abs_diff(&prefill[size_t(n - 1) * V], &decoded[size_t(n - 1) * V], V) <= tol);
      CHECK(max_abs_diff(&prefill[size_t(n - 1) * V], after.data(), V) <= tol);
      // past L each step's query reads a cache of long-factor positions, as the prefill's rows
      CHECK(max_abs_diff(&prefill[size_t(L) * V], &decoded[size_t(L) * V], size_t(n - L) * V) <= tol);
      one.forward(&next, 1, n, after_prefill.data(), false);  // the caches hold the same
      decoding.forward(&next, 1, n, after.data(), false);
      CHECK(max_abs_diff(after_prefill.data(), after.data(), V) <= tol);
      sevens.forward(&next, 1, n, after.data(), false);
      CHECK(max_abs_diff(after_prefill.data(), after.data(), V) <= tol);
    }
    // below L a step's logits are a short prefill's; the choice "position" keeps them past L too
    std::vector<float> decoded(size_t(n) * V), by_position(V);
    const std::vector<int> head(ids.begin(), ids.begin() + L);
    CHECK(max_abs_diff(fresh(head).data(), &whole[size_t(L - 1) * V], V) > 1e-3f * largest);  // the choice matters
    json p = c;
    p["position"]["scaling"]["longrope_choice"] = "position";
    TempDir tmp2;
    const auto causal = random_model(tmp2, p, 21);
    InferenceState s(*causal, n);
    s.forward(ids.data(), n, 0, decoded.data(), true);
    InferenceState short_one(*causal, n);
    short_one.forward(head.data(), L, 0, by_position.data(), false);
    CHECK(max_abs_diff(by_position.data(), &decoded[size_t(L - 1) * V], V) <= tol);
    CHECK(max_abs_diff(fresh(head).data(), by_position.data(), V) <= tol);  // below L both choices agree
  }

  SECTION("a rewind or a forward from the middle equals a fresh prefill") {
    const std::vector<int> other = {9, 4, 17, 30, 2, 11};
    std::vector<float> got(size_t(other.size()) * V);
    for (int pos0 : {10, 20, 40}) {  // back below L; from below L past it; staying past L
      INFO("rewind to " << pos0);
      InferenceState s(*model, n + 1);
      s.forward(ids.data(), pos0 == 20 ? 20 : n, 0, got.data(), false);
      s.forward(other.data(), int(other.size()), pos0, got.data(), true);
      const std::vector<int> tokens = concat(std::vector<int>(ids.begin(), ids.begin() + pos0), other);
      std::vector<float> want(tokens.size() * V);
      InferenceState f(*model, n + 1);
      f.forward(tokens.data(), int(tokens.size()), 0, want.data(), true);
      CHECK(max_abs_diff(got.data(), &want[size_t(pos0) * V], got.size()) <= tol);
    }
  }

  SECTION("sequences in step keep their own tokens") {
    std::vector<int> other(ids.rbegin(), ids.rend());
    std::vector<float> both(2 * V);
    InferenceState s(*model, n + 1, 512, 2);
    for (int t = 0; t < n; ++t) {
      const int step[2] = {ids[size_t(t)], other[size_t(t)]};
      s.forward(step, 1, t, both.data(), false);
    }
    CHECK(max_abs_diff(both.data(), fresh(ids).data(), V) <= tol);
    CHECK(max_abs_diff(&both[V], fresh(other).data(), V) <= tol);
  }

  SECTION("re-encoding adds no attention statistics") {
    AttentionStats stats(c["num_hidden_layers"].get<int>(), c["num_attention_heads"].get<int>(), n, L, 1);
    InferenceState s(*model, n);
    s.observe_attention(&stats);
    std::vector<float> out(V);
    for (int t = 0; t < n; ++t) s.forward(&ids[size_t(t)], 1, t, out.data(), false);
    CHECK(stats.means(QueryRange::All).queries == n);
    CHECK(max_abs_diff(out.data(), fresh(ids).data(), V) <= tol);
  }
}

// Local layers (a sliding window, a chunk) keep only their span and a batch of positions, in a
// ring their rows wrap around: over 600 positions (many turns of it) their logits equal one
// prefill's with every position cached, token by token, in chunks of 7 and 64, in F32 and Q8.
TEST_CASE("model: local layers keep their span in a ring and compute as with every position", "[model]") {
  const std::vector<json> cases = {
      {{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"sliding_window", 21}},
      {{"layers", {{"global", {{"every", 2}, {"position", {{"type", "none"}}}, {"temperature", {{"scale", 0.5}, {"floor", 50}}}}},
                   {"local", {{"others", true}, {"chunk", 40}}}}}},
      {{"position", {{"type", "alibi"}}}, {"layers", {{"all", {{"every", 1}, {"window", 33}}}}}},
  };
  const int n = 600, V = 32;
  const std::vector<int> ids = some_tokens(n);
  for (const json& extra : cases)
    for (CacheType cache : {CacheType::F32, CacheType::Q8}) {
      INFO(extra.dump() << ", cache " << cache_type_name(cache));
      TempDir tmp;
      const auto model = local_model(tmp, extra, 9);
      float largest = 0.0f;
      const std::vector<float> whole = whole_prefill(*model, ids, cache, largest);
      std::vector<float> out(size_t(n) * V);
      REQUIRE(std::isfinite(largest));
      const size_t all_bytes = InferenceState(*model, n, n, 1, cache).kv_cache_bytes();  // every position kept
      for (int batch : {1, 7, 64}) {
        InferenceState ring(*model, n, batch, 1, cache);
        CHECK(ring.kv_cache_bytes() < all_bytes);
        ring.forward(ids.data(), n, 0, out.data(), true);
        CHECK(max_abs_diff(whole.data(), out.data(), whole.size()) <= 1e-5f * largest);
        CHECK(!ring.shift(0, 10));  // a ring no longer holds what a shift would keep: re-encode instead
      }
    }
}

// A rewind (forward from pos0 < n_past) on a ring reads the keys from its first query's first
// key on (pos0 − 7 with a window of 8, ⌊pos0/8⌋·8 with a chunk of 8): where the ring still holds
// them its logits equal a fresh prefill's; further back it is refused, never computed from
// overwritten rows, and the n_batch the refusal names is the least that holds them. Rewinds
// follow one another (each leaves stale rows behind n_past); a rewind to 0 starts afresh.
TEST_CASE("model: a rewind on local layers equals a fresh prefill or is refused", "[model]") {
  const std::vector<std::pair<json, int>> cases = {  // (config, the earliest rewind after 120 positions)
      // The ring keeps 7 + 4 = 11 positions, [109, 120): from 116 on a step finds its 7 keys ...
      {{{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"sliding_window", 8}}, 116},
      // ... and from 112 on its chunk's.
      {{{"layers", {{"global", {{"every", 2}, {"position", {{"type", "none"}}}}}, {"local", {{"others", true}, {"chunk", 8}}}}}},
       112},
  };
  const int n = 120, V = 32, batch = 4;
  const std::vector<int> ids = some_tokens(n);
  for (const auto& [extra, earliest] : cases) {
    INFO(extra.dump());
    TempDir tmp;
    const auto model = local_model(tmp, extra, 5);
    float largest = 0.0f;
    const std::vector<float> whole = whole_prefill(*model, ids, CacheType::F32, largest);
    std::vector<float> out(size_t(n) * V);
    const auto matches = [&](int pos0, int count) {
      return max_abs_diff(&whole[size_t(pos0) * V], out.data(), size_t(count) * V) <= 1e-5f * largest;
    };
    const auto fed = [&](int n_batch) {  // n positions fed `batch` at a time
      auto state = std::make_unique<InferenceState>(*model, 512, n_batch, 1, CacheType::F32);
      for (int p = 0; p < n; p += batch) state->forward(&ids[size_t(p)], batch, p, out.data(), true);
      return state;
    };
    const auto ring = fed(batch);
    CHECK(ring->earliest_rewind() == earliest);
    for (int pos0 : {40, 100, 104, 108, 111, 112, 115, 116, 117, 119}) {
      INFO("rewind to " << pos0);
      if (pos0 >= earliest) {
        ring->forward(&ids[size_t(pos0)], 1, pos0, out.data(), true);
        CHECK(matches(pos0, 1));
        if (pos0 + 1 < n) {  // back to n (over stale rows above pos0 + 1)
          ring->forward(&ids[size_t(pos0) + 1], n - pos0 - 1, pos0 + 1, out.data(), /*all_logits=*/false);
          CHECK(matches(n - 1, 1));
        }
        CHECK(ring->earliest_rewind() == earliest);
        continue;
      }
      std::string refusal;
      try {
        ring->forward(&ids[size_t(pos0)], 1, pos0, out.data(), true);
      } catch (const Error& e) {
        refusal = e.what();
      }
      CHECK_THAT(refusal, Catch::Contains("cannot rewind to position " + std::to_string(pos0)));
      CHECK(ring->n_past() == n);  // refused before anything changed
      const size_t at = refusal.find("n_batch >= ");
      REQUIRE(at != std::string::npos);
      const int needed = std::stoi(refusal.substr(at + 11));
      const auto enough = fed(needed), short_one = fed(needed - 1);
      const int count = std::min(8, n - pos0);
      enough->forward(&ids[size_t(pos0)], count, pos0, out.data(), true);
      CHECK(matches(pos0, count));
      CHECK_THROWS_WITH(short_one->forward(&ids[size_t(pos0)], count, pos0, out.data(), true), Catch::Contains("cannot rewind"));
    }
    ring->forward(&ids[0], 48, 0, out.data(), true);  // afresh
    CHECK(matches(0, 48));
  }
}
