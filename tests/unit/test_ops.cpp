// Unit tests of the numerical kernels (src/kernels/ops.hpp), each against a naive double
// precision version of the formula written here (docs/design.md).
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "pert/bandwidth.hpp"
#include "pert/config.hpp"
#include "pert/error.hpp"
#include "attention/positions/rope.hpp"
#include "kernels/ops.hpp"
#include "pert/positions.hpp"
#include "test_util.hpp"

using namespace pert;

// y[T][N] = x[T][K]·W[N][K]ᵀ (+ y when accumulating), on the GEMV (T = 1) and GEMM (T > 1) paths.
TEST_CASE("ops: matmul matches a triple loop", "[ops]") {
  on_each_path("f32", f32_kernels, f32_kernel, select_f32_kernel, [&] {
    // K = 37 and N = 23 leave remainders in every kernel's steps (and a 7-column last slice of the
    // GEMM's per-thread slices of 16); 4096 rows run threaded; 131 × 200 leaves a 6-row group
    // and a 64-column panel short (AVX-512 GEMM).
    for (const auto& [T, K, N] : {std::tuple{1, 37, 23}, std::tuple{2, 37, 23}, std::tuple{9, 37, 23},
                                  std::tuple{1, 64, 4096}, std::tuple{9, 64, 4096}, std::tuple{1, 7, 3},
                                  std::tuple{131, 75, 200}}) {
      for (bool accumulate : {false, true}) {
        INFO("T " << T << ", K " << K << ", N " << N << ", accumulate " << accumulate);
        const std::vector<float> x = random_floats(size_t(T * K), 1), w = random_floats(size_t(N * K), 2);
        const std::vector<float> y0 = random_floats(size_t(T * N), 3);
        std::vector<float> y = y0;
        matmul(y.data(), x.data(), w.data(), T, K, N, accumulate);
        for (int t = 0; t < T; ++t)
          for (int n = 0; n < N; ++n) {
            double want = accumulate ? y0[size_t(t * N + n)] : 0.0;
            for (int k = 0; k < K; ++k) want += double(x[size_t(t * K + k)]) * w[size_t(n * K + k)];
            CHECK(y[size_t(t * N + n)] == Approx(want).margin(1e-5));
          }
      }
    }
  });
}

// One thread's GEMMs as attention calls them: rows of x, y and W apart by more than their length,
// a scale (gemm_nt), accumulation; N and K leave short blocks, panels and row groups.
TEST_CASE("ops: gemm_nt and gemm_nn match a triple loop", "[ops]") {
  on_each_path("f32", f32_kernels, f32_kernel, select_f32_kernel, [&] {
    for (const auto& [T, K, N] : {std::tuple{1, 5, 3}, std::tuple{7, 37, 23}, std::tuple{13, 64, 70},
                                  std::tuple{6, 16, 64}, std::tuple{20, 75, 130}}) {
      const int ldx = K + 3, ldy = N + 5, ldw = N + 2;
      const std::vector<float> x = random_floats(size_t(T * ldx), 21), w = random_floats(size_t(K * ldw + N * K), 22);
      const std::vector<float> y0 = random_floats(size_t(T * ldy), 23);
      for (bool accumulate : {false, true}) {
        INFO("T " << T << ", K " << K << ", N " << N << ", accumulate " << accumulate);
        std::vector<float> nt = y0, nn = y0;
        gemm_nt(nt.data(), ldy, x.data(), ldx, T, K, w.data(), N, 0.5f, accumulate);  // W [N][K]
        gemm_nn(nn.data(), ldy, x.data(), ldx, T, K, w.data(), ldw, N, accumulate);    // W [K][N], rows ldw apart
        for (int t = 0; t < T; ++t) {
          for (int n = 0; n < N; ++n) {
            double want_nt = 0.0, want_nn = 0.0;
            for (int k = 0; k < K; ++k) {
              want_nt += double(x[size_t(t * ldx + k)]) * w[size_t(n * K + k)];
              want_nn += double(x[size_t(t * ldx + k)]) * w[size_t(k * ldw + n)];
            }
            const double base = accumulate ? y0[size_t(t * ldy + n)] : 0.0;
            CHECK(nt[size_t(t * ldy + n)] == Approx(base + 0.5 * want_nt).margin(1e-5));
            CHECK(nn[size_t(t * ldy + n)] == Approx(base + want_nn).margin(1e-5));
          }
          for (int n = N; n < ldy; ++n) CHECK(nt[size_t(t * ldy + n)] == y0[size_t(t * ldy + n)]);  // past N: untouched
        }
      }
    }
  });
}

// Attention's row products: every row count around the four-row step and widths around the
// vector length (8 or 16 lanes), the accumulator's old value kept.
TEST_CASE("ops: dot_rows and add_weighted_rows match a loop", "[ops]") {
  on_each_path("f32", f32_kernels, f32_kernel, select_f32_kernel, [&] {
    for (int K : {1, 7, 8, 24, 48, 64, 100})
      for (int n : {1, 3, 4, 5, 9, 64}) {
        INFO("K " << K << ", n " << n);
        const std::vector<float> rows = random_floats(size_t(n * K), 31), x = random_floats(size_t(K), 32),
                                 p = random_floats(size_t(n), 33), acc0 = random_floats(size_t(K), 34);
        std::vector<float> y(size_t(n) + 1, -7.0f), acc = acc0;
        dot_rows(y.data(), rows.data(), x.data(), n, K);
        add_weighted_rows(acc.data(), p.data(), rows.data(), n, K);
        for (int j = 0; j < n; ++j) {
          double want = 0.0;
          for (int k = 0; k < K; ++k) want += double(rows[size_t(j * K + k)]) * x[size_t(k)];
          CHECK(y[size_t(j)] == Approx(want).margin(1e-5));
        }
        CHECK(y[size_t(n)] == -7.0f);  // past n: untouched
        for (int k = 0; k < K; ++k) {
          double want = acc0[size_t(k)];
          for (int j = 0; j < n; ++j) want += double(p[size_t(j)]) * rows[size_t(j * K + k)];
          CHECK(acc[size_t(k)] == Approx(want).margin(1e-5));
        }
      }
  });
}

namespace {

// matmul_shared of three products of one x (q, k, v) against a triple loop per product, for T =
// 1, 2 and 33: x drawn from `seed`, product i's weights from seed + 1 + i and its old y from
// seed + 4 + i; product 1 accumulates. keep(values, N, storage) gives the Weight a product runs
// on, rounding the values in place to what it holds; x is multiplied as round(x).
template <class Keep>
void check_shared_products(int K, const int (&Ns)[3], uint32_t seed, Keep keep, float (*round)(float)) {
  const bool accumulate[3] = {false, true, false};
  for (int T : {1, 2, 33}) {
    INFO("T " << T);
    const std::vector<float> x = random_floats(size_t(T * K), seed);
    std::vector<std::vector<float>> w, y0, y;
    std::vector<std::vector<uint16_t>> storage(3);
    std::vector<Weight> weights(3);
    for (int i = 0; i < 3; ++i) {
      w.push_back(random_floats(size_t(Ns[i] * K), seed + 1 + uint32_t(i)));
      weights[size_t(i)] = keep(w.back(), Ns[i], storage[size_t(i)]);
      y0.push_back(random_floats(size_t(T * Ns[i]), seed + 4 + uint32_t(i)));
    }
    y = y0;
    matmul_shared(x.data(), T, K, {{y[0].data(), &weights[0], Ns[0], accumulate[0]},
                                   {y[1].data(), &weights[1], Ns[1], accumulate[1]},
                                   {y[2].data(), &weights[2], Ns[2], accumulate[2]}});
    for (int i = 0; i < 3; ++i)
      for (int t = 0; t < T; ++t)
        for (int n = 0; n < Ns[i]; ++n) {
          double want = accumulate[i] ? y0[size_t(i)][size_t(t * Ns[i] + n)] : 0.0;
          for (int k = 0; k < K; ++k) want += double(round(x[size_t(t * K + k)])) * w[size_t(i)][size_t(n * K + k)];
          CHECK(y[size_t(i)][size_t(t * Ns[i] + n)] == Approx(want).margin(1e-5));
        }
  }
}

float exact(float v) { return v; }
float to_bf16(float v) { return bf16_to_f32_value(f32_to_bf16(v)); }

}  // namespace

// Products of one x (q, k, v) in one call: the columns of all three cut into per-thread slices,
// a slice crossing from one product into the next; one product accumulates.
TEST_CASE("ops: a Weight carries its layout, and a product of one without data throws", "[ops]") {
  const float f = 1.0f;
  const uint16_t h = 0;
  const uint8_t q = 0;
  CHECK(Weight::of_f32(&f).layout == Weight::F32);
  CHECK(Weight::of_bf16(&h).layout == Weight::BF16);
  CHECK(Weight::of_q8(&q, &h).layout == Weight::Q8);
  CHECK(Weight::of_blocks(BlockMatrix{&q, BlockType::Q4_0, 18}).layout == Weight::Blocks);
  CHECK(!Weight::of_f32(nullptr));
  CHECK(std::string(layout_name(Weight::Blocks)) == "blocks");
  float y = 0.0f;
  CHECK_THROWS_AS(matmul(&y, &f, Weight{}, 1, 1, 1), std::invalid_argument);
}

TEST_CASE("ops: matmul_shared with F32 weights matches a triple loop per product", "[ops]") {
  on_each_path("f32", f32_kernels, f32_kernel, select_f32_kernel, [&] {
    const int Ns[3] = {41, 100, 16};
    check_shared_products(37, Ns, 11, [](std::vector<float>& w, int, std::vector<uint16_t>&) {
      return Weight::of_f32(w.data());
    }, exact);
  });
}

// BF16 weights (packed): x is rounded to BF16 too, products of BF16 pairs summed in F32. Odd K
// and N = 41 exercise the padding; T = 17 the 6-row kernel's remainders.
TEST_CASE("ops: matmul with BF16 weights matches a triple loop over the rounded values", "[ops]") {
  on_each_path("bf16", bf16_kernels, bf16_kernel, select_bf16_kernel, [&] {
    const int K = 75, N = 41;
    CHECK(f32_to_bf16(1.0f) == 0x3f80);
    CHECK(f32_to_bf16(1.00390625f) == 0x3f80);  // halfway: to even
    CHECK(f32_to_bf16(1.01171875f) == 0x3f82);  // halfway: to even (up)
    CHECK(bf16_to_f32_value(0x3f80) == 1.0f);
    for (int T : {1, 3, 17}) {
      for (bool accumulate : {false, true}) {
        INFO("T " << T << ", accumulate " << accumulate);
        const std::vector<float> x = random_floats(size_t(T * K), 4), wf = random_floats(size_t(N * K), 5);
        std::vector<uint16_t> w(wf.size());
        for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
        const std::vector<float> y0 = random_floats(size_t(T * N), 6);
        std::vector<float> y = y0;
        std::vector<uint16_t> packed(bf16_packed_size(N, K));
        pack_bf16(packed.data(), w.data(), N, K);
        for (int n = 0; n < N; ++n)
          for (int k = 0; k < K; ++k) REQUIRE(bf16_packed_at(packed.data(), K, n, k) == w[size_t(n * K + k)]);
        matmul(y.data(), x.data(), Weight::of_bf16(packed.data()), T, K, N, accumulate);
        for (int t = 0; t < T; ++t)
          for (int n = 0; n < N; ++n) {
            double want = accumulate ? y0[size_t(t * N + n)] : 0.0;
            for (int k = 0; k < K; ++k) {
              const float xk = x[size_t(t * K + k)];
              want += double(bf16_to_f32_value(f32_to_bf16(xk))) * bf16_to_f32_value(w[size_t(n * K + k)]);
            }
            CHECK(y[size_t(t * N + n)] == Approx(want).margin(1e-5));
          }
      }
    }
  });
}

// BF16 products of one x in one call (prefill widens each thread's slice of all three): a product
// of 300 rows crosses the 256-row chunks of the widening, one accumulates.
TEST_CASE("ops: matmul_shared with BF16 weights matches a triple loop per product", "[ops]") {
  on_each_path("bf16", bf16_kernels, bf16_kernel, select_bf16_kernel, [&] {
    const int K = 75;
    const int Ns[3] = {41, 300, 16};
    check_shared_products(K, Ns, 51, [&](std::vector<float>& w, int N, std::vector<uint16_t>& packed) {
      std::vector<uint16_t> rows(w.size());
      for (size_t j = 0; j < w.size(); ++j) rows[j] = f32_to_bf16(w[j]), w[j] = bf16_to_f32_value(rows[j]);
      packed.resize(bf16_packed_size(N, K));
      pack_bf16(packed.data(), rows.data(), N, K);
      return Weight::of_bf16(packed.data());
    }, to_bf16);
  });
}

// BF16 prefill through matmul and matmul_shared at model-like sizes: odd K = 601 (a padded last
// pair), T = 13 (two 6-row steps and one row), products of 140 (9 blocks, the last 12 wide: even
// panels of 3), 300 and 16 rows, one accumulating. Row 10 of x holds rounding ties (to even, down
// and up) and values rounding up to the next power of two, row 11 one rounding to infinity, row
// 12 a signalling NaN. Each path
// against a double loop over the rounded values; on vdpbf16ps each row bit for bit what decoding
// that row alone gives (one sum per output, pair after pair), x's 16-wide rounding included.
TEST_CASE("ops: BF16 prefill at model sizes, on vdpbf16ps each row with decoding's bits", "[ops]") {
  const int T = 13, K = 601;
  const int Ns[3] = {140, 300, 16};
  const bool accumulate[3] = {false, true, false};
  std::vector<float> x = random_floats(size_t(T * K), 71);
  const float ties[] = {1.00390625f, 1.01171875f, -1.00390625f, -1.01171875f, 0.99999994f, 1.9999999f, -3.9999998f};
  for (int k = 0; k < K; ++k) x[size_t(10 * K + k)] = ties[k % 7] * (k % 3 == 0 ? 0.25f : 1.0f);
  x[size_t(11 * K + 5)] = std::nextafter(std::numeric_limits<float>::max(), 0.0f);  // rounds to infinity
  const uint32_t nan_bits = 0x7f800001u;  // a NaN that the rounding's carry alone would make infinite
  std::memcpy(&x[size_t(12 * K + 9)], &nan_bits, sizeof nan_bits);
  std::vector<std::vector<float>> w(3), y0(3);
  std::vector<std::vector<uint16_t>> packed(3);
  std::vector<Weight> weights(3);
  for (int i = 0; i < 3; ++i) {
    w[size_t(i)] = random_floats(size_t(Ns[i] * K), 72 + uint32_t(i));
    std::vector<uint16_t> rows(w[size_t(i)].size());
    for (size_t j = 0; j < rows.size(); ++j) rows[j] = f32_to_bf16(w[size_t(i)][j]), w[size_t(i)][j] = bf16_to_f32_value(rows[j]);
    packed[size_t(i)].resize(bf16_packed_size(Ns[i], K));
    pack_bf16(packed[size_t(i)].data(), rows.data(), Ns[i], K);
    weights[size_t(i)] = Weight::of_bf16(packed[size_t(i)].data());
    y0[size_t(i)] = random_floats(size_t(T * Ns[i]), 75 + uint32_t(i));
  }
  on_each_path("bf16", bf16_kernels, bf16_kernel, select_bf16_kernel, [&] {
    std::vector<std::vector<float>> shared = y0, single = y0, decoded = y0;
    matmul_shared(x.data(), T, K, {{shared[0].data(), &weights[0], Ns[0], accumulate[0]},
                                   {shared[1].data(), &weights[1], Ns[1], accumulate[1]},
                                   {shared[2].data(), &weights[2], Ns[2], accumulate[2]}});
    for (int i = 0; i < 3; ++i) {
      matmul(single[size_t(i)].data(), x.data(), weights[size_t(i)], T, K, Ns[i], accumulate[i]);
      for (int t = 0; t < T; ++t)
        matmul(decoded[size_t(i)].data() + size_t(t * Ns[i]), x.data() + size_t(t * K), weights[size_t(i)], 1, K, Ns[i],
               accumulate[i]);
    }
    for (int i = 0; i < 3; ++i) {
      INFO("product " << i);
      CHECK(std::memcmp(shared[size_t(i)].data(), single[size_t(i)].data(), single[size_t(i)].size() * sizeof(float)) == 0);
      if (bf16_kernel() == "avx512bf16")
        CHECK(std::memcmp(single[size_t(i)].data(), decoded[size_t(i)].data(), single[size_t(i)].size() * sizeof(float)) == 0);
      for (int t = 0; t < 11; ++t)  // not rows 11 and 12 (infinities, NaN): bit for bit only
        for (int n = 0; n < Ns[i]; ++n) {
          double want = accumulate[i] ? y0[size_t(i)][size_t(t * Ns[i] + n)] : 0.0;
          for (int k = 0; k < K; ++k) want += double(to_bf16(x[size_t(t * K + k)])) * w[size_t(i)][size_t(n * K + k)];
          CHECK(single[size_t(i)][size_t(t * Ns[i] + n)] == Approx(want).margin(1e-4));
        }
    }
    CHECK(std::isinf(single[0][size_t(11 * Ns[0])]));
    CHECK(std::isnan(single[0][size_t(12 * Ns[0])]));
  });
}

// The prefetch hint moves data, never arithmetic: decoding gives the same bits under each.
TEST_CASE("ops: F32 decoding gives the same bits under every prefetch hint", "[ops]") {
  const std::string before = f32_prefetch();
  const int K = 300, N = 4096;
  const std::vector<float> x = random_floats(size_t(K), 61), w = random_floats(size_t(N * K), 62);
  on_each_path("f32", f32_kernels, f32_kernel, select_f32_kernel, [&] {
    std::vector<std::vector<float>> ys;
    for (const char* hint : {"nta", "t0", "none", "stream"}) {
      select_f32_prefetch(hint);
      REQUIRE(f32_prefetch() == hint);
      ys.emplace_back(size_t(N));
      matmul(ys.back().data(), x.data(), w.data(), 1, K, N);
    }
    CHECK(ys[0] == ys[1]);
    CHECK(ys[0] == ys[2]);
    CHECK(ys[0] == ys[3]);
  });
  select_f32_prefetch(before);
  CHECK_THROWS_AS(select_f32_prefetch("l2"), std::invalid_argument);
}

// The paths: every family lists what this CPU runs, best first and plain last; select_kernels
// puts each at its best at or below a level; names it does not know are refused.
TEST_CASE("kernels: paths by level, chosen and listed", "[ops][kernels]") {
  const auto& levels = kernel_levels();
  REQUIRE(levels.front() == "plain");
  CHECK(cpu_supports("plain"));
  CHECK_FALSE(cpu_supports("avx9000"));
  CHECK_FALSE(cpu_info().model.empty());
  std::vector<std::string> before;
  for (const KernelFamily& f : kernel_families()) {
    INFO(f.name);
    before.push_back(f.selected);
    REQUIRE_FALSE(f.available.empty());
    CHECK(f.available.back() == "plain");
    for (const std::string& path : f.available) CHECK(cpu_supports(path));
  }
  select_kernels("plain");
  for (const KernelFamily& f : kernel_families()) CHECK(f.selected == "plain");
  select_kernels(levels.back());  // the best of each
  for (const KernelFamily& f : kernel_families()) CHECK(f.selected == f.available.front());
  CHECK_THROWS_AS(select_kernels("avx9000"), std::invalid_argument);
  CHECK_THROWS_AS(select_f32_kernel("avx9000"), std::invalid_argument);
  CHECK_THROWS_AS(select_bf16_kernel("avx9000"), std::invalid_argument);
  CHECK_THROWS_AS(select_cache_kernel("avx9000"), std::invalid_argument);
  const std::vector<KernelFamily> now = kernel_families();
  select_f32_kernel(before[0]);
  select_bf16_kernel(before[1]);
  select_q8_kernel(before[2]);
  select_block_kernel(before[3]);
  select_cache_kernel(before[4]);
  CHECK(kernel_summary().find("f32 " + before[0]) == 0);
}

// RMSNorm: out = x / sqrt(mean(x²) + eps) · weight, row by row; a zero row stays finite.
TEST_CASE("ops: rmsnorm matches the formula", "[ops]") {
  const int T = 4, d = 19;
  const float eps = 1e-5f;
  std::vector<float> x = random_floats(size_t(T * d), 4, 3.0f);
  for (int i = 0; i < d; ++i) x[size_t(2 * d + i)] = 0.0f;  // row 2: zeros
  const std::vector<float> w = random_floats(size_t(d), 5, 2.0f);
  std::vector<float> out(size_t(T * d), -7.0f);
  rmsnorm(out.data(), x.data(), w.data(), T, d, eps);
  for (int t = 0; t < T; ++t) {
    double ss = 0.0;
    for (int i = 0; i < d; ++i) ss += double(x[size_t(t * d + i)]) * x[size_t(t * d + i)];
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int i = 0; i < d; ++i)
      CHECK(out[size_t(t * d + i)] == Approx(x[size_t(t * d + i)] * inv * w[size_t(i)]).epsilon(1e-5).margin(1e-6));
  }
}

// SwiGLU (Shazeer 2020): gate ← silu(gate)·up with silu(g) = g / (1 + e^(−g)), also at large |g|.
TEST_CASE("ops: swiglu matches the formula", "[ops]") {
  std::vector<float> gate = random_floats(100, 6, 6.0f);
  gate.insert(gate.end(), {0.0f, -90.0f, 90.0f, -1000.0f, 1000.0f});
  const std::vector<float> up = random_floats(gate.size(), 7, 2.0f), g0 = gate;
  swiglu(gate.data(), up.data(), gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    INFO("gate " << g0[i] << ", up " << up[i]);
    const double g = g0[i];
    CHECK(std::isfinite(gate[i]));
    CHECK(gate[i] == Approx(g / (1.0 + std::exp(-g)) * up[i]).epsilon(1e-5).margin(1e-6));
  }
}

// Cohere's LayerNorm: (x − mean) / √(var + eps) · w, no bias; rows of large offset too.
TEST_CASE("ops: layernorm matches the formula", "[ops]") {
  const int T = 5, d = 37;
  std::vector<float> x = random_floats(size_t(T) * d, 11, 3.0f), w = random_floats(size_t(d), 12, 1.0f), out(x.size());
  for (int i = 0; i < d; ++i) x[size_t(3 * d + i)] += 1000.0f;  // a row far from 0
  layernorm(out.data(), x.data(), w.data(), T, d, 1e-5f);
  for (int t = 0; t < T; ++t) {
    double mean = 0, var = 0;
    for (int i = 0; i < d; ++i) mean += x[size_t(t * d + i)] / double(d);
    for (int i = 0; i < d; ++i) var += (x[size_t(t * d + i)] - mean) * (x[size_t(t * d + i)] - mean) / d;
    for (int i = 0; i < d; ++i)
      CHECK(out[size_t(t * d + i)] == Approx((x[size_t(t * d + i)] - mean) / std::sqrt(var + 1e-5) * w[size_t(i)]).epsilon(1e-4).margin(1e-5));
  }
}

// GeGLU with the tanh GELU (Gemma, HF's gelu_pytorch_tanh) and Gemma 2's soft cap, against the
// formulas in double, at large |g| too.
TEST_CASE("ops: geglu_tanh and softcap match the formulas", "[ops]") {
  std::vector<float> gate = random_floats(200, 8, 6.0f);
  gate.insert(gate.end(), {0.0f, 1e-4f, -1e-4f, -30.0f, 30.0f, -1000.0f, 1000.0f});
  const std::vector<float> up = random_floats(gate.size(), 9, 2.0f), g0 = gate;
  geglu_tanh(gate.data(), up.data(), gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    INFO("gate " << g0[i] << ", up " << up[i]);
    const double g = g0[i], want = 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
    CHECK(gate[i] == Approx(want).epsilon(1e-5).margin(1e-6));
  }
  std::vector<float> x = random_floats(200, 10, 200.0f);
  x.insert(x.end(), {0.0f, 1e-3f, -1e-3f, 1e6f, -1e6f});
  const std::vector<float> x0 = x;
  softcap(x.data(), x.size(), 50.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("x " << x0[i]);
    CHECK(x[i] == Approx(50.0 * std::tanh(x0[i] / 50.0)).epsilon(1e-6).margin(5e-6));
  }
}

// Softmax: e^(x_i) / Σ e^(x_j); sums to 1 and stays finite for inputs like ±1000 (max subtracted).
TEST_CASE("ops: exp_nonpositive is e^x to 2e-7 relative over [-87, 0], 0 below, NaN kept", "[ops]") {
  for (double x = -87.0; x <= 0.0; x += 0.00731) {
    const double want = std::exp(double(float(x)));
    CHECK(std::abs(exp_nonpositive(float(x)) - want) <= 2e-7 * want);
  }
  CHECK(exp_nonpositive(0.0f) == 1.0f);
  CHECK(exp_nonpositive(-88.0f) == 0.0f);
  CHECK(exp_nonpositive(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(exp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("ops: softmax matches the formula and is stable", "[ops]") {
  SECTION("moderate inputs against the direct formula") {
    std::vector<float> x = random_floats(33, 8, 5.0f);
    const std::vector<float> x0 = x;
    softmax(x.data(), int(x.size()));
    double z = 0.0, sum = 0.0;
    for (float v : x0) z += std::exp(double(v));
    for (size_t i = 0; i < x.size(); ++i) {
      CHECK(x[i] == Approx(std::exp(double(x0[i])) / z).epsilon(1e-5));
      sum += x[i];
    }
    CHECK(sum == Approx(1.0).epsilon(1e-6));
  }
  SECTION("large inputs") {
    std::vector<float> x = {1000.0f, -1000.0f, 999.0f, 0.0f, 1000.0f};
    softmax(x.data(), int(x.size()));
    const double z = 2.0 + std::exp(-1.0);  // relative to the maximum 1000
    CHECK(x[0] == Approx(1.0 / z).epsilon(1e-6));
    CHECK(x[4] == Approx(1.0 / z).epsilon(1e-6));
    CHECK(x[2] == Approx(std::exp(-1.0) / z).epsilon(1e-6));
    CHECK(x[1] == 0.0f);
    CHECK(x[3] == 0.0f);  // e^-1000 underflows
  }
  SECTION("only the first n entries") {
    std::vector<float> x = {-3.0f, -3.0f, -3.0f, -3.0f, 42.0f};
    softmax(x.data(), 4);
    for (int i = 0; i < 4; ++i) CHECK(x[size_t(i)] == Approx(0.25));
    CHECK(x[4] == 42.0f);
  }
}

// The read-bandwidth probe of pert bench --roof: a positive, finite rate for any thread count,
// and a buffer past the memory available refused by name before anything is allocated.
TEST_CASE("ops: read_bandwidth measures a rate and refuses what would not fit", "[ops]") {
  for (int threads : {1, 2, 3}) {
    const double rate = read_bandwidth(threads, size_t(1) << 20, 2);
    CHECK(std::isfinite(rate));
    CHECK(rate > 1e6);  // bytes per second: a megabyte in under a second, even with its threads descheduled
                        // (1e8 failed once beside two training runs and a build, 3 threads on 2 cores)
  }
  REQUIRE_THROWS_NAMING(read_bandwidth(1, size_t(1) << 60), Error, "the read-bandwidth probe needs", "MiB");
}
