// evaluate_perplexity against a brute-force computation written here: every window run from a
// fresh cache, log-softmax in double, the documented windowing and scoring rules.
#include <omp.h>

#include <cmath>
#include <numeric>
#include <set>

#include "pert/error.hpp"
#include "pert/model_dir.hpp"
#include "pert/perplexity.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

constexpr int kVocab = 32;

// Sets the OpenMP thread count for a scope (one thread keeps the brute-force cases fast on a
// busy machine; the thread case compares 1 and 2).
struct Threads {
  int saved = omp_get_max_threads();
  explicit Threads(int n) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved); }
};

// tiny_config() with small random weights (so the NLLs stay O(1) and PPL finite).
std::unique_ptr<Model> small_model(const TempDir& tmp) {
  json c = tiny_config();
  std::vector<TestTensor> tensors;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  for (const ExpectedTensor& e : expected_tensors(parse_model_config(c, "c"))) {
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = e.shape.size() == 1 ? 1.0f + normal(rng) * 0.1f : normal(rng);
    tensors.push_back({e.name, "F32", e.shape, v});
  }
  write_model_dir(tmp.path, c, tensors);
  return Model::load(tmp.path);
}

std::vector<int> text(int n) {
  std::mt19937 rng(17);
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) ids.push_back(int(rng() % kVocab));
  return ids;
}

PerplexityOptions opts(int n_ctx, PerplexityMode mode, int stride, int bos, int n_buckets = 4) {
  PerplexityOptions o;
  o.n_ctx = n_ctx;
  o.mode = mode;
  o.stride = stride;
  o.bos = bos;
  o.n_buckets = n_buckets;
  return o;
}

// The same numbers the slow way: each window's logits from one fresh forward over all n_ctx
// positions; window position q >= first scored from row q - 1. llama: windows are the stream's
// n_ctx tokens with the first set to BOS, and q from n_ctx/2 + 1 (llama-perplexity reads the
// logits from row n_ctx/2 on).
PerplexityResult brute_force(const Model& model, const std::vector<int>& tokens, const PerplexityOptions& o,
                             std::vector<size_t>* scored_text = nullptr) {
  const bool llama = o.mode == PerplexityMode::Llama;
  const int has_bos = o.bos >= 0 && !llama, per = o.n_ctx - has_bos;
  const int S = o.mode == PerplexityMode::Sliding ? (o.stride ? o.stride : o.n_ctx / 2) : per;
  const int nb = std::min(o.n_buckets, o.n_ctx);
  std::vector<double> nll, bsum(size_t(nb), 0.0);
  std::vector<long long> bcount(size_t(nb), 0);
  PerplexityResult r;
  for (size_t start = 0; start + size_t(per) <= tokens.size(); start += size_t(S)) {
    if (o.max_windows && r.windows == o.max_windows) break;
    std::vector<int> ids;
    if (has_bos) ids.push_back(o.bos);
    ids.insert(ids.end(), tokens.begin() + ptrdiff_t(start), tokens.begin() + ptrdiff_t(start) + per);
    if (llama && o.bos >= 0) ids[0] = o.bos;
    REQUIRE(int(ids.size()) == o.n_ctx);
    std::vector<float> logits(ids.size() * kVocab);
    InferenceState state(model, o.n_ctx);
    state.forward(ids.data(), o.n_ctx, 0, logits.data(), true);
    const int first = llama ? o.n_ctx / 2 + 1 : (o.mode == PerplexityMode::Chunks || r.windows == 0) ? 1 : o.n_ctx - S;
    for (int q = first; q < o.n_ctx; ++q) {
      const float* row = &logits[size_t(q - 1) * kVocab];
      double z = 0;
      for (int i = 0; i < kVocab; ++i) z += std::exp(double(row[i]));
      const double v = std::log(z) - double(row[ids[size_t(q)]]);
      nll.push_back(v);
      bsum[size_t(q * nb / o.n_ctx)] += v;
      ++bcount[size_t(q * nb / o.n_ctx)];
      if (scored_text) scored_text->push_back(start + size_t(q - has_bos));
    }
    ++r.windows;
  }
  r.tokens = (long long)nll.size();
  r.nll = std::accumulate(nll.begin(), nll.end(), 0.0) / double(nll.size());
  r.ppl = std::exp(r.nll);
  double ss = 0;
  for (double v : nll) ss += (v - r.nll) * (v - r.nll);
  r.ppl_stderr = r.ppl * std::sqrt(ss / double(nll.size()) / double(nll.size() - 1));
  for (int b = 0; b < nb; ++b) r.buckets.push_back({0, 0, bcount[size_t(b)], bsum[size_t(b)] / double(bcount[size_t(b)])});
  return r;
}

void check_same(const PerplexityResult& got, const PerplexityResult& want, double rel) {
  CHECK(got.windows == want.windows);
  CHECK(got.tokens == want.tokens);
  CHECK(got.nll == Approx(want.nll).epsilon(rel));
  CHECK(got.ppl == Approx(want.ppl).epsilon(rel));
  CHECK(got.ppl_stderr == Approx(want.ppl_stderr).epsilon(rel * 10));
  REQUIRE(got.buckets.size() == want.buckets.size());
  long long total = 0;
  for (size_t b = 0; b < got.buckets.size(); ++b) {
    INFO("bucket " << b);
    CHECK(got.buckets[b].tokens == want.buckets[b].tokens);
    if (want.buckets[b].tokens) CHECK(got.buckets[b].nll == Approx(want.buckets[b].nll).epsilon(rel));
    total += got.buckets[b].tokens;
  }
  CHECK(total == got.tokens);
}

}  // namespace

TEST_CASE("perplexity: windows and text tokens per window", "[perplexity]") {
  using M = PerplexityMode;
  CHECK(window_text_tokens(opts(16, M::Chunks, 0, 1)) == 15);
  CHECK(window_text_tokens(opts(16, M::Chunks, 0, -1)) == 16);
  CHECK(count_windows(14, opts(16, M::Chunks, 0, 1)) == 0);
  CHECK(count_windows(15, opts(16, M::Chunks, 0, 1)) == 1);
  CHECK(count_windows(44, opts(16, M::Chunks, 0, 1)) == 2);
  CHECK(count_windows(45, opts(16, M::Chunks, 0, 1)) == 3);
  CHECK(count_windows(15, opts(16, M::Chunks, 0, -1)) == 0);
  CHECK(count_windows(47, opts(16, M::Chunks, 0, -1)) == 2);
  CHECK(count_windows(48, opts(16, M::Chunks, 0, -1)) == 3);
  // sliding: 1 + (n - per) / stride; stride 0 means n_ctx / 2
  CHECK(count_windows(15, opts(16, M::Sliding, 4, 1)) == 1);
  CHECK(count_windows(18, opts(16, M::Sliding, 4, 1)) == 1);
  CHECK(count_windows(19, opts(16, M::Sliding, 4, 1)) == 2);
  CHECK(count_windows(31, opts(16, M::Sliding, 0, 1)) == 3);
  CHECK(count_windows(16, opts(16, M::Sliding, 4, -1)) == 1);
  CHECK(count_windows(20, opts(16, M::Sliding, 4, -1)) == 2);
  CHECK(count_windows(15, opts(16, M::Sliding, 4, -1)) == 0);
  // llama: the stream's n_ctx tokens a window (BOS replaces the first), tokens / n_ctx windows
  CHECK(window_text_tokens(opts(16, M::Llama, 0, 1)) == 16);
  CHECK(window_text_tokens(opts(16, M::Llama, 0, -1)) == 16);
  CHECK(count_windows(15, opts(16, M::Llama, 0, 1)) == 0);
  CHECK(count_windows(47, opts(16, M::Llama, 0, 1)) == 2);
  CHECK(count_windows(48, opts(16, M::Llama, 0, -1)) == 3);
  CHECK(std::string(perplexity_mode_name(M::Llama)) == "llama");
}

TEST_CASE("perplexity: log-spaced buckets of four an octave", "[perplexity]") {
  // round(2^(k/4)) from 2 on, written out: 2^(5/4) = 2.38, 2^(11/4) = 6.73, 2^(13/4) = 9.51, ...
  const std::vector<int> at128 = {0, 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 16, 19, 23, 27, 32, 38, 45, 54, 64, 76, 91, 108};
  CHECK(bucket_starts(128, kLogBuckets) == at128);
  std::vector<int> at1024 = at128;
  for (int s : {128, 152, 181, 215, 256, 304, 362, 431, 512, 609, 724, 861}) at1024.push_back(s);
  CHECK(bucket_starts(1024, kLogBuckets) == at1024);
  CHECK(bucket_starts(2, kLogBuckets) == std::vector<int>{0});
  CHECK(bucket_starts(3, kLogBuckets) == std::vector<int>{0, 2});
  CHECK(bucket_starts(1 << 30, kLogBuckets).size() == 1 + 4 * 30 - 4 - 2);  // 2^1 .. 2^(29.75), less 1 and 2 twice
  CHECK(bucket_starts(12, 5) == std::vector<int>{0, 3, 5, 8, 10});              // q * 5 / 12
  CHECK(bucket_starts(12, 100).size() == 12);

  // The default: one bucket per position, merged by those edges, is the same curve.
  Threads one(1);
  TempDir tmp;
  auto model = small_model(tmp);
  const std::vector<int> tokens = text(75);
  PerplexityOptions o = opts(20, PerplexityMode::Chunks, 0, 1, kLogBuckets);
  CHECK(PerplexityOptions().n_buckets == kLogBuckets);
  const PerplexityResult got = evaluate_perplexity(*model, tokens, o);
  o.n_buckets = 20;
  const PerplexityResult each = evaluate_perplexity(*model, tokens, o);
  const std::vector<std::pair<int, int>> spans = {{0, 1}, {2, 2},   {3, 3},   {4, 4},   {5, 5},   {6, 6}, {7, 7},
                                                  {8, 9}, {10, 10}, {11, 12}, {13, 15}, {16, 18}, {19, 19}};
  REQUIRE(got.buckets.size() == spans.size());
  for (size_t b = 0; b < spans.size(); ++b) {
    INFO("bucket " << b);
    CHECK(got.buckets[b].first == spans[b].first);
    CHECK(got.buckets[b].last == spans[b].second);
    double sum = 0;
    long long n = 0;
    for (int q = spans[b].first; q <= spans[b].second; ++q) {
      n += each.buckets[size_t(q)].tokens;
      if (each.buckets[size_t(q)].tokens) sum += each.buckets[size_t(q)].nll * double(each.buckets[size_t(q)].tokens);
    }
    CHECK(got.buckets[b].tokens == n);
    CHECK(got.buckets[b].nll == Approx(sum / double(n)).epsilon(1e-12));
  }
}

TEST_CASE("perplexity: equals a brute-force evaluation, chunks, sliding and llama, with and without BOS", "[perplexity]") {
  Threads one(1);
  TempDir tmp;
  auto model = small_model(tmp);
  const std::vector<int> tokens = text(75);
  for (int bos : {1, -1}) {
    for (auto [mode, stride] : {std::pair{PerplexityMode::Chunks, 0}, {PerplexityMode::Sliding, 5},
                                {PerplexityMode::Sliding, 0}, {PerplexityMode::Sliding, 1},
                                {PerplexityMode::Llama, 0}}) {
      for (int buckets : {4, 5, 100}) {
        INFO("bos " << bos << " mode " << perplexity_mode_name(mode) << " stride " << stride << " buckets " << buckets);
        const PerplexityOptions o = opts(12, mode, stride, bos, buckets);
        std::vector<size_t> scored;
        const PerplexityResult want = brute_force(*model, tokens, o, &scored);
        const PerplexityResult got = evaluate_perplexity(*model, tokens, o);
        check_same(got, want, 1e-6);
        CHECK(got.windows == count_windows(tokens.size(), o));
        CHECK(got.stride == (mode == PerplexityMode::Llama    ? 12
                             : mode == PerplexityMode::Chunks ? 12 - (bos >= 0)
                             : stride                         ? stride
                                                              : 6));
        CHECK(got.buckets.size() == size_t(std::min(buckets, 12)));
        for (const PositionBucket& b : got.buckets)  // [first, last] is where q * B / n_ctx lands
          for (int q = b.first; q <= b.last; ++q) CHECK(&b == &got.buckets[size_t(q * got.buckets.size() / 12)]);
        // each text token scored at most once; sliding scores a contiguous run
        CHECK(std::set<size_t>(scored.begin(), scored.end()).size() == scored.size());
        if (mode == PerplexityMode::Sliding) CHECK(scored.back() - scored.front() + 1 == scored.size());
      }
    }
  }
}

TEST_CASE("perplexity: sliding at stride n_ctx-1 is chunks, and max_windows, n_batch and threads", "[perplexity]") {
  Threads threads(1);
  TempDir tmp;
  auto model = small_model(tmp);
  const std::vector<int> tokens = text(90);
  const PerplexityOptions chunks = opts(16, PerplexityMode::Chunks, 0, 1);
  const PerplexityResult base = evaluate_perplexity(*model, tokens, chunks);
  CHECK(base.windows == 6);
  check_same(evaluate_perplexity(*model, tokens, opts(16, PerplexityMode::Sliding, 15, 1)), base, 1e-12);

  PerplexityOptions limited = chunks;
  limited.max_windows = 2;
  const PerplexityResult two = evaluate_perplexity(*model, tokens, limited);
  CHECK(two.windows == 2);
  CHECK(two.tokens == 30);
  check_same(two, brute_force(*model, tokens, limited), 1e-6);
  limited.max_windows = 100;
  CHECK(evaluate_perplexity(*model, tokens, limited).windows == 6);

  for (PerplexityOptions o : {chunks, opts(16, PerplexityMode::Sliding, 3, -1)}) {
    const PerplexityResult full = evaluate_perplexity(*model, tokens, o);
    for (int n_batch : {1, 4, 7}) {
      INFO("n_batch " << n_batch);
      o.n_batch = n_batch;
      check_same(evaluate_perplexity(*model, tokens, o), full, 1e-6);
    }
  }

  // Two threads cut each F32 GEMM's columns in two (ops.cpp's matmul_f32), as n_batch cuts its
  // rows: OpenBLAS's kernels then round the edge tiles differently, so close, not equal.
  const PerplexityResult one = evaluate_perplexity(*model, tokens, chunks);
  omp_set_num_threads(2);
  check_same(evaluate_perplexity(*model, tokens, chunks), one, 1e-6);
}

// Progress: at the end of every window (windows, running PPL), and within one, batch by batch
// (positions run), so a bar moves before a long window ends.
TEST_CASE("perplexity: progress by window and by batch, and bad options or short text are errors", "[perplexity]") {
  Threads one(1);
  TempDir tmp;
  auto model = small_model(tmp);
  const std::vector<int> tokens = text(40);
  PerplexityOptions o = opts(8, PerplexityMode::Sliding, 3, 1);
  o.max_windows = 5;
  std::vector<std::pair<int, int>> calls;
  evaluate_perplexity(*model, tokens, o, [&](const PerplexityStep& s) {
    if (s.window_end) calls.push_back({s.windows, s.total_windows});
  });
  CHECK(calls == std::vector<std::pair<int, int>>{{1, 5}, {2, 5}, {3, 5}, {4, 5}, {5, 5}});
  {
    const std::vector<int> long_text = text(75);
    PerplexityOptions batched = opts(33, PerplexityMode::Chunks, 0, 2);
    batched.n_batch = 8;  // 32 positions a window: 4 batches
    std::vector<PerplexityStep> steps;
    const PerplexityResult r = evaluate_perplexity(*model, long_text, batched, [&](const PerplexityStep& s) { steps.push_back(s); });
    REQUIRE(steps.size() == 2 * (4 + 1));
    for (size_t i = 0; i < steps.size(); ++i) {
      INFO("step " << i);
      const PerplexityStep& s = steps[i];
      const int window = int(i) / 5, batch = int(i) % 5;  // four batches, then the window's end
      CHECK(s.total_positions == 2 * 32);
      CHECK(s.total_windows == 2);
      CHECK(s.window_end == (batch == 4));
      CHECK(s.positions == 32 * window + 8 * std::min(batch + 1, 4));
      CHECK(s.windows == window + (batch == 4));
      if (s.window_end) CHECK(s.running_ppl == r.running_ppl[size_t(window)]);
      else if (window == 0) CHECK(std::isnan(s.running_ppl));
      else CHECK(s.running_ppl == r.running_ppl[0]);
    }
    CHECK(steps.back().windows_text() == "2/2 windows");
  }

  REQUIRE_THROWS_NAMING(evaluate_perplexity(*model, tokens, opts(1, PerplexityMode::Chunks, 0, 1)), Error, "`n_ctx`", "1");
  REQUIRE_THROWS_NAMING(evaluate_perplexity(*model, tokens, opts(0, PerplexityMode::Chunks, 0, -1)), Error, "`n_ctx`");
  REQUIRE_THROWS_NAMING(evaluate_perplexity(*model, tokens, opts(8, PerplexityMode::Sliding, 8, 1)), Error, "`stride`",
                        "8");
  CHECK_NOTHROW(evaluate_perplexity(*model, tokens, opts(8, PerplexityMode::Sliding, 7, 1)));
  REQUIRE_THROWS_NAMING(evaluate_perplexity(*model, text(6), opts(8, PerplexityMode::Chunks, 0, 1)), Error, "6 tokens",
                        "one window");
  REQUIRE_THROWS_NAMING(evaluate_perplexity(*model, text(7), opts(8, PerplexityMode::Chunks, 0, -1)), Error, "7 tokens");
  REQUIRE_THROWS_NAMING(evaluate_perplexity(*model, {}, opts(8, PerplexityMode::Sliding, 2, 1)), Error, "0 tokens");
  CHECK_NOTHROW(evaluate_perplexity(*model, text(7), opts(8, PerplexityMode::Chunks, 0, 1)));
}

// --mode llama, as llama.cpp's tools/perplexity/perplexity.cpp perplexity(): chunks of the
// stream's n_ctx tokens (the rest dropped), BOS in place of each chunk's first token, and the
// tokens at n_ctx/2 + 1 .. n_ctx - 1 scored from the logits at n_ctx/2 .. n_ctx - 2.
TEST_CASE("perplexity: llama mode's chunks, scored count and BOS in place of the first token", "[perplexity]") {
  Threads one(1);
  using M = PerplexityMode;
  TempDir tmp;
  auto model = small_model(tmp);
  std::vector<int> tokens = text(100);
  tokens[0] = 1;  // the stream starts with the BOS its tokenizer adds
  for (int n_ctx : {12, 11, 3}) {
    for (int bos : {1, -1}) {
      INFO("n_ctx " << n_ctx << " bos " << bos);
      const PerplexityOptions o = opts(n_ctx, M::Llama, 0, bos, 100);
      const int n_chunk = int(tokens.size()) / n_ctx;
      std::vector<size_t> scored;
      const PerplexityResult got = evaluate_perplexity(*model, tokens, o);
      check_same(got, brute_force(*model, tokens, o, &scored), 1e-6);
      CHECK(got.windows == n_chunk);
      CHECK(got.stride == n_ctx);
      CHECK(got.tokens == (long long)n_chunk * (n_ctx - n_ctx / 2 - 1));  // 255 a chunk at -c 512
      CHECK(scored.front() == size_t(n_ctx / 2 + 1));
      CHECK(scored.back() == size_t(n_chunk * n_ctx - 1));  // the remainder is never scored
      for (const PositionBucket& b : got.buckets)  // only the second half's positions
        CHECK((b.tokens == 0) == (b.last <= n_ctx / 2));
      // llama's running "[i]ppl": one a chunk, the last the result
      REQUIRE(got.running_ppl.size() == size_t(n_chunk));
      CHECK(got.running_ppl.back() == Approx(got.ppl).epsilon(1e-12));

      // The first token of each chunk is BOS: what stands there in the text does not matter,
      // and without a BOS it does (it is context for the scored half).
      std::vector<int> changed = tokens;
      for (size_t c = 0; c < changed.size(); c += size_t(n_ctx)) changed[c] = (changed[c] + 7) % kVocab;
      const PerplexityResult other = evaluate_perplexity(*model, changed, o);
      if (bos >= 0)
        check_same(other, got, 1e-12);
      else
        CHECK(other.nll != Approx(got.nll).epsilon(1e-9));
    }
  }

  PerplexityOptions capped = opts(12, M::Llama, 0, 1);
  capped.max_windows = 3;
  const PerplexityResult three = evaluate_perplexity(*model, tokens, capped);
  CHECK(three.windows == 3);
  CHECK(three.tokens == 3 * 5);
  check_same(three, brute_force(*model, tokens, capped), 1e-6);

  std::vector<std::pair<int, double>> running;
  evaluate_perplexity(*model, tokens, opts(16, M::Llama, 0, 1),
                      [&](const PerplexityStep& s) {
                        CHECK(s.total_windows == 6);
                        if (s.window_end) running.push_back({s.windows, s.running_ppl});
                      });
  REQUIRE(running.size() == 6);
  CHECK(running[0].first == 1);
  CHECK(running[5].first == 6);

  // llama-perplexity refuses a text of fewer than 2 * n_ctx tokens, and -c 2 scores nothing
  CHECK_NOTHROW(evaluate_perplexity(*model, text(16), opts(8, M::Llama, 0, 1)));
  REQUIRE_THROWS_NAMING(evaluate_perplexity(*model, text(15), opts(8, M::Llama, 0, 1)), Error, "`mode` llama",
                        "2 * c = 16", "15");
  REQUIRE_THROWS_NAMING(evaluate_perplexity(*model, text(7), opts(8, M::Llama, 0, 1)), Error, "7 tokens");
  REQUIRE_THROWS_NAMING(evaluate_perplexity(*model, text(40), opts(2, M::Llama, 0, 1)), Error, "`mode` llama",
                        "at least 3", "2");
}

// A model whose logits depend only on the current token, so the NLLs are known by hand:
// attention and MLP weights zero (the residual stream is the embedding), embedding row t the
// unit vector e_t (t < 16), lm_head row v = e_{v-1} for v in 1..16. After the final RMSNorm
// (weight 1) the hidden state is s·e_t, s = 1 / sqrt(1/16 + eps), so token t + 1 gets logit s and
// every other token 0: predicted, NLL = log(e^s + 31) - s; any other, NLL = log(e^s + 31).
TEST_CASE("perplexity: llama mode by hand on a next-token-is-t+1 model", "[perplexity]") {
  Threads one(1);
  TempDir tmp;
  const json c = tiny_config();
  std::vector<TestTensor> tensors;
  for (const ExpectedTensor& e : expected_tensors(parse_model_config(c, "c"))) {
    int64_t n = 1;
    for (int64_t d : e.shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n), e.shape.size() == 1 ? 1.0f : 0.0f);
    if (e.name == "model.embed_tokens.weight")
      for (int t = 0; t < 16; ++t) v[size_t(t) * 16 + size_t(t)] = 1;
    if (e.name == "lm_head.weight")
      for (int t = 1; t <= 16; ++t) v[size_t(t) * 16 + size_t(t - 1)] = 1;
    tensors.push_back({e.name, "F32", e.shape, v});
  }
  write_model_dir(tmp.path, c, tensors);
  const auto model = Model::load(tmp.path);

  const double s = 1 / std::sqrt(1.0 / 16 + 1e-5);
  const double hit = std::log(std::exp(s) + 31) - s, miss = std::log(std::exp(s) + 31);
  // -c 8: positions 5, 6, 7 scored from the logits at 4, 5, 6 (llama's first = 4). A chunk
  // [x 5 6 7 3 4 9 10]: 3 -> 4 predicted, 4 -> 9 not, 9 -> 10 predicted; and 7 -> 3 (position 4
  // from 3) not, so scoring one position early would count 1 predicted of 3, not 2.
  const std::vector<int> chunk = {12, 5, 6, 7, 3, 4, 9, 10};
  std::vector<int> tokens;  // 3 chunks, then 7 tokens left over (dropped)
  for (int i = 0; i < 3 * 8 + 7; ++i) tokens.push_back(i < 3 * 8 ? chunk[size_t(i % 8)] : i - 3 * 8);
  tokens[0] = 1;  // the stream's BOS
  PerplexityOptions o = opts(8, PerplexityMode::Llama, 0, 1, 8);
  const PerplexityResult r = evaluate_perplexity(*model, tokens, o);
  CHECK(r.windows == 3);
  CHECK(r.tokens == 9);
  const double mean = (2 * hit + miss) / 3, ppl = std::exp(mean);
  const double var = (2 * hit * hit + miss * miss) / 3 - mean * mean;  // 6 predicted, 3 not
  CHECK(r.nll == Approx(mean).epsilon(1e-5));
  CHECK(r.ppl == Approx(ppl).epsilon(1e-5));
  CHECK(r.ppl_stderr == Approx(ppl * std::sqrt(var / 8)).epsilon(1e-4));
  for (const PositionBucket& b : r.buckets) {
    INFO("position " << b.first);
    CHECK(b.first == b.last);
    CHECK(b.tokens == (b.first >= 5 ? 3 : 0));
    if (b.first == 5 || b.first == 7) CHECK(b.nll == Approx(hit).epsilon(1e-5));
    if (b.first == 6) CHECK(b.nll == Approx(miss).epsilon(1e-5));
  }
  for (double p : r.running_ppl) CHECK(p == Approx(ppl).epsilon(1e-5));  // every chunk alike
}

namespace {

// -ln p(ids[n - 1] | ids[0 .. n - 1)) from one fresh forward, in double.
double last_token_nll(const Model& model, const std::vector<int>& ids) {
  const int n = int(ids.size());
  std::vector<float> logits(size_t(n - 1) * kVocab);
  InferenceState state(model, n - 1);
  state.forward(ids.data(), n - 1, 0, logits.data(), true);
  const float* row = &logits[size_t(n - 2) * kVocab];
  double z = 0;
  for (int i = 0; i < kVocab; ++i) z += std::exp(double(row[i]));
  return std::log(z) - double(row[ids.back()]);
}

// LongPPL's key tokens by hand (perplexity.hpp, KeyTokenOptions), every token its own passes: the
// long context is the window before it; the short one, for q past q_first = h + N + 1, [BOS where
// h] + the window's text from q0 - N to q, q0 = q_first + S * ((q - q_first) / S). Returns the key
// tokens' stream indices and, in `near`, those whose LSD or LCL lies within 1e-4 of a threshold.
std::set<long long> key_tokens_by_hand(const Model& model, const std::vector<int>& tokens, const PerplexityOptions& o,
                                       std::set<long long>& near) {
  const bool llama = o.mode == PerplexityMode::Llama;
  const int has_bos = o.bos >= 0 && !llama, h = o.bos >= 0, per = o.n_ctx - has_bos;
  const int S = o.mode == PerplexityMode::Sliding ? o.stride : per, N = o.key.short_len, step = o.key.step;
  std::set<long long> key;
  int w = 0;
  for (size_t start = 0; start + size_t(per) <= tokens.size(); start += size_t(S), ++w) {
    std::vector<int> win(tokens.begin() + ptrdiff_t(start), tokens.begin() + ptrdiff_t(start) + per);
    if (has_bos) win.insert(win.begin(), o.bos);
    if (llama && o.bos >= 0) win[0] = o.bos;
    const int first = llama ? o.n_ctx / 2 + 1 : (o.mode == PerplexityMode::Chunks || w == 0) ? 1 : o.n_ctx - S;
    for (int q = first; q < o.n_ctx; ++q) {
      const double lcl = -last_token_nll(model, std::vector<int>(win.begin(), win.begin() + q + 1));
      double lsd = 0;
      if (q - h > N) {
        const int q_first = h + N + 1, q0 = q_first + step * ((q - q_first) / step);
        std::vector<int> short_ids(win.begin(), win.begin() + h);
        short_ids.insert(short_ids.end(), win.begin() + (q0 - N), win.begin() + q + 1);
        lsd = lcl + last_token_nll(model, short_ids);
      }
      const long long index = (long long)start + q - has_bos;
      if (std::abs(lsd - o.key.alpha) < 1e-4 || std::abs(lcl - o.key.beta) < 1e-4) near.insert(index);
      if (lsd > o.key.alpha && lcl > o.key.beta) key.insert(index);
    }
  }
  return key;
}

}  // namespace

TEST_CASE("perplexity: key tokens (LongPPL) as chosen by hand, in every mode", "[perplexity][longppl]") {
  Threads one(1);
  TempDir tmp;
  const auto model = small_model(tmp);
  const std::vector<int> tokens = text(260);
  struct Case {
    PerplexityMode mode;
    int stride, bos, step;
  };
  for (const Case& c : {Case{PerplexityMode::Chunks, 0, 1, 3}, Case{PerplexityMode::Chunks, 0, -1, 1},
                        Case{PerplexityMode::Sliding, 12, 1, 4}, Case{PerplexityMode::Llama, 0, 1, 2}}) {
    PerplexityOptions o = opts(40, c.mode, c.stride, c.bos);
    o.key.enabled = true;
    o.key.short_len = 8;
    o.key.step = c.step;
    o.key.alpha = 0.2;
    o.key.beta = -4.0;
    INFO("mode " << perplexity_mode_name(c.mode) << " bos " << c.bos << " step " << c.step);
    const PerplexityResult r = evaluate_perplexity(*model, tokens, o);
    std::set<long long> near;
    const std::set<long long> want = key_tokens_by_hand(*model, tokens, o, near);
    REQUIRE(r.has_key);
    CHECK(r.key.tokens > 0);
    CHECK(r.key.tokens == (long long)r.key.indices.size());
    CHECK(std::is_sorted(r.key.indices.begin(), r.key.indices.end()));
    std::set<long long> got(r.key.indices.begin(), r.key.indices.end());
    for (long long i : near) got.erase(i);
    std::set<long long> want_far = want;
    for (long long i : near) want_far.erase(i);
    CHECK(got == want_far);

    // The evaluator given as a model of its own (its own long pass) chooses the same tokens.
    PerplexityOptions same = o;
    same.key.evaluator = model.get();
    const PerplexityResult s = evaluate_perplexity(*model, tokens, same);
    CHECK(s.key.indices == r.key.indices);
    CHECK(s.key.ppl == Approx(r.key.ppl).epsilon(1e-6));
    // Batches, threads: the same choice.
    PerplexityOptions batched = o;
    batched.n_batch = 7;
    Threads two(2);
    CHECK(evaluate_perplexity(*model, tokens, batched).key.indices == r.key.indices);
  }
}

TEST_CASE("perplexity: every scored token key at thresholds far below, none past the short context",
          "[perplexity][longppl]") {
  Threads one(1);
  TempDir tmp;
  const auto model = small_model(tmp);
  const std::vector<int> tokens = text(200);
  PerplexityOptions o = opts(32, PerplexityMode::Chunks, 0, 1);
  o.key.enabled = true;
  o.key.short_len = 6;  // step 0: 6 / 4 = 1
  o.key.alpha = o.key.beta = -1e30;
  const PerplexityResult all = evaluate_perplexity(*model, tokens, o);
  CHECK(all.key.step == 1);
  CHECK(all.key.tokens == all.tokens);
  CHECK(all.key.candidates == (long long)all.windows * (32 - 1 - 7));  // positions 8 .. 31 of each window
  CHECK(all.key.ppl == Approx(all.ppl).epsilon(1e-9));
  CHECK(all.key.ppl_stderr == Approx(all.ppl_stderr).epsilon(1e-6));
  o.key.short_len = 30;  // BOS + 31 text tokens: the last has 30 before it, no more
  o.key.alpha = 0;
  const PerplexityResult none = evaluate_perplexity(*model, tokens, o);
  CHECK(none.key.candidates == 0);
  CHECK(none.key.tokens == 0);
  CHECK(std::isnan(none.key.ppl));
  o.key.short_len = 0;
  CHECK_THROWS_WITH(evaluate_perplexity(*model, tokens, o), Catch::Contains("key_short"));
  o.key.short_len = 4;
  o.key.step = -1;
  CHECK_THROWS_WITH(evaluate_perplexity(*model, tokens, o), Catch::Contains("key_step"));
}
