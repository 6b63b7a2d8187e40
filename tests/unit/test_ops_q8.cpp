// Unit tests of the 8-bit path (ops.hpp's Q8 layout, src/kernels/ops_q8.cpp): F32 -> F16 rounding, the
// quantizer and packing, and every kernel this CPU has against a triple loop over the same
// rounded values (the quantization written out again here, from its definition).
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/fp16.hpp"
#include "kernels/ops.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

// One row's blocks of 32 as the definition says: d = max|v| / 127, q = round(v / d).
struct Blocks {
  std::vector<float> d;
  std::vector<int> q;  // [blocks·32], zero past K
};
Blocks quantize_row(const float* v, int K, bool scale_to_f16) {
  const int blocks = (K + 31) / 32;
  Blocks b{std::vector<float>(size_t(blocks)), std::vector<int>(size_t(blocks) * 32)};
  for (int i = 0; i < blocks; ++i) {
    float amax = 0.0f;
    for (int k = i * 32; k < std::min(K, i * 32 + 32); ++k) amax = std::max(amax, std::fabs(v[k]));
    const float d = amax / 127.0f;
    for (int k = i * 32; k < std::min(K, i * 32 + 32); ++k) b.q[size_t(k)] = d > 0 ? int(std::nearbyint(v[k] / d)) : 0;
    b.d[size_t(i)] = scale_to_f16 ? f16_to_f32(f32_to_f16(d)) : d;
  }
  return b;
}

struct RestoreQ8Kernel {  // leaves the kernel as it found it
  std::string name = q8_kernel();
  ~RestoreQ8Kernel() { select_q8_kernel(name); }
};

}  // namespace

TEST_CASE("fp16: F32 to F16 rounds to nearest even, round-trips every finite F16", "[fp16][q8]") {
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // positive finite values, then their negatives
    for (uint32_t sign : {0u, 0x8000u}) {
      INFO("bits 0x" << std::hex << (h | sign));
      REQUIRE(f32_to_f16(f16_to_f32(uint16_t(h | sign))) == uint16_t(h | sign));
    }
    if (h + 1 < 0x7c00) {  // the midpoint to the next value (exact in F32) goes to the even one
      const float lo = f16_to_f32(uint16_t(h)), hi = f16_to_f32(uint16_t(h + 1)), mid = (lo + hi) / 2;
      INFO("between 0x" << std::hex << h << " and the next");
      REQUIRE(f32_to_f16(mid) == uint16_t(h % 2 == 0 ? h : h + 1));
      REQUIRE(f32_to_f16(std::nextafter(mid, 0.0f)) == uint16_t(h));
      REQUIRE(f32_to_f16(std::nextafter(mid, 1e9f)) == uint16_t(h + 1));
    }
  }
  CHECK(f32_to_f16(65519.0f) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);  // halfway past the largest: to infinity
  CHECK(f32_to_f16(1e9f) == 0x7c00);
  CHECK(f32_to_f16(-INFINITY) == 0xfc00);
  CHECK(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0);  // half the smallest subnormal: to even, zero
  CHECK(f32_to_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == 1);
  CHECK(f32_to_f16(-0.0f) == 0x8000);
}

TEST_CASE("q8: quantize_q8 packs d·round(w/d) per row and block of 32, d in F16", "[ops][q8]") {
  for (const auto& [N, K] : {std::tuple{41, 75}, std::tuple{16, 32}, std::tuple{3, 5}}) {
    INFO("N " << N << ", K " << K);
    std::vector<float> w = random_floats(size_t(N * K), 7);
    w[0] = 0.0f;
    if (K >= 32)
      for (int k = 0; k < 32; ++k) w[size_t(K + k)] = 0.0f;  // a zero block: d = 0
    std::vector<uint8_t> packed(q8_packed_size(N, K));
    std::vector<uint16_t> scales(q8_scales_size(N, K));
    quantize_q8(packed.data(), scales.data(), w.data(), N, K);
    for (int n = 0; n < N; ++n) {
      const Blocks b = quantize_row(w.data() + size_t(n) * K, K, true);
      for (int k = 0; k < K; ++k) {
        const float want = b.d[size_t(k / 32)] * float(b.q[size_t(k)]);
        REQUIRE(q8_value_at(packed.data(), scales.data(), K, n, k) == want);
        // half a step, plus q times the F16 scale's rounding (2^-11 relative, |q| <= 127)
        REQUIRE(std::fabs(want - w[size_t(n * K + k)]) <= b.d[size_t(k / 32)] * (0.5f + 127.0f / 2048.0f) + 1e-7f);
      }
    }
  }
}

// Every kernel: K = 75 and N = 41 leave a short last block and group; T = 1 is the decoding
// kernel (4 groups a call), T = 3, 5 and 17 the 4-row kernel's remainders, T = 130 three chunks of
// rows (the last 2); N = 4096 runs threaded.
TEST_CASE("q8: matmul matches a triple loop over the quantized values, every kernel", "[ops][q8]") {
  RestoreQ8Kernel restore;
  const std::vector<std::string> kernels = q8_kernels();
  REQUIRE(kernels.back() == "plain");
  for (const std::string& kernel : kernels) {
    select_q8_kernel(kernel);
    for (const auto& [T, K, N] : {std::tuple{1, 75, 41}, std::tuple{3, 75, 41}, std::tuple{5, 75, 41},
                                  std::tuple{17, 75, 41}, std::tuple{130, 75, 41}, std::tuple{1, 64, 4096},
                                  std::tuple{9, 256, 100}}) {
      for (bool accumulate : {false, true}) {
        INFO("kernel " << kernel << ", T " << T << ", K " << K << ", N " << N << ", accumulate " << accumulate);
        const std::vector<float> x = random_floats(size_t(T * K), 8, 3.0f), w = random_floats(size_t(N * K), 9);
        const std::vector<float> y0 = random_floats(size_t(T * N), 10);
        std::vector<uint8_t> packed(q8_packed_size(N, K));
        std::vector<uint16_t> scales(q8_scales_size(N, K));
        quantize_q8(packed.data(), scales.data(), w.data(), N, K);
        std::vector<float> y = y0;
        matmul(y.data(), x.data(), Weight::of_q8(packed.data(), scales.data()), T, K, N, accumulate);
        for (int t = 0; t < T; ++t) {
          const Blocks xb = quantize_row(x.data() + size_t(t) * K, K, false);
          for (int n = 0; n < N; ++n) {
            const Blocks wb = quantize_row(w.data() + size_t(n) * K, K, true);
            double want = accumulate ? y0[size_t(t * N + n)] : 0.0, exact = want;
            for (int b = 0; b < (K + 31) / 32; ++b) {
              long dot = 0;
              for (int k = b * 32; k < b * 32 + 32; ++k) dot += long(xb.q[size_t(k)]) * wb.q[size_t(k)];
              want += double(xb.d[size_t(b)]) * wb.d[size_t(b)] * double(dot);
            }
            for (int k = 0; k < K; ++k) exact += double(x[size_t(t * K + k)]) * w[size_t(n * K + k)];
            REQUIRE(y[size_t(t * N + n)] == Approx(want).margin(1e-5).epsilon(1e-5));
            // and 8 bits are close to the F32 product (|x| <= 3, |w| <= 1: steps of ~1/42 and 1/127)
            REQUIRE(std::fabs(y[size_t(t * N + n)] - exact) < 0.05 * std::sqrt(double(K)));
          }
        }
      }
    }
  }
  CHECK_THROWS_AS(select_q8_kernel("avx9000"), std::invalid_argument);
}

// Products of one x in one call (q, k, v) are the separate products exactly: x is quantized once
// and the work items of all three share one parallel region.
TEST_CASE("q8: matmul_shared equals one matmul per weight, every kernel", "[ops][q8]") {
  RestoreQ8Kernel restore;
  const int K = 75;
  const std::vector<int> Ns = {41, 100, 16};
  std::vector<std::vector<uint8_t>> packed;
  std::vector<std::vector<uint16_t>> scales;
  std::vector<Weight> weights;
  for (size_t i = 0; i < Ns.size(); ++i) {
    const std::vector<float> w = random_floats(size_t(Ns[i] * K), uint32_t(20 + i));
    packed.emplace_back(q8_packed_size(Ns[i], K));
    scales.emplace_back(q8_scales_size(Ns[i], K));
    quantize_q8(packed[i].data(), scales[i].data(), w.data(), Ns[i], K);
    weights.push_back(Weight::of_q8(packed[i].data(), scales[i].data()));
  }
  for (const std::string& kernel : q8_kernels()) {
    select_q8_kernel(kernel);
    for (int T : {1, 70, 300}) {
      INFO("kernel " << kernel << ", T " << T);
      const std::vector<float> x = random_floats(size_t(T * K), 30, 2.0f);
      std::vector<std::vector<float>> want, got;
      for (size_t i = 0; i < Ns.size(); ++i) want.push_back(random_floats(size_t(T * Ns[i]), uint32_t(40 + i)));
      got = want;
      const bool accumulate[3] = {false, true, false};
      for (size_t i = 0; i < Ns.size(); ++i) matmul(want[i].data(), x.data(), weights[i], T, K, Ns[i], accumulate[i]);
      matmul_shared(x.data(), T, K, {{got[0].data(), &weights[0], Ns[0], accumulate[0]},
                                     {got[1].data(), &weights[1], Ns[1], accumulate[1]},
                                     {got[2].data(), &weights[2], Ns[2], accumulate[2]}});
      for (size_t i = 0; i < Ns.size(); ++i) REQUIRE(got[i] == want[i]);
    }
  }
}

// A GGUF file's Q8_0 rows repacked into the Q8 layout hold the same numbers: every value equals
// GGML's dequantization, and the Q8 kernels' products equal the block kernels' on the rows.
TEST_CASE("q8: GGML Q8_0 rows repack into the same values and products", "[q8]") {
  const int N = 37, K = 96, T = 5;
  const std::vector<float> rows = random_floats(size_t(N * K), 71), x = random_floats(size_t(T * K), 72);
  const size_t row_bytes = block_row_bytes(BlockType::Q8_0, K);
  std::vector<uint8_t> blocks(size_t(N) * row_bytes);
  for (int n = 0; n < N; ++n)
    pert::quantize_row(BlockType::Q8_0, rows.data() + size_t(n) * K, blocks.data() + size_t(n) * row_bytes, K);
  std::vector<uint8_t> packed(q8_packed_size(N, K));
  std::vector<uint16_t> scales(q8_scales_size(N, K));
  repack_q8_0(packed.data(), scales.data(), blocks.data(), row_bytes, N, K);
  std::vector<float> row(static_cast<size_t>(K));
  for (int n = 0; n < N; ++n) {
    dequantize_row(BlockType::Q8_0, blocks.data() + size_t(n) * row_bytes, row.data(), K);
    for (int k = 0; k < K; ++k) REQUIRE(q8_value_at(packed.data(), scales.data(), K, n, k) == row[size_t(k)]);
  }
  const BlockMatrix m{blocks.data(), BlockType::Q8_0, row_bytes};
  const Weight w = Weight::of_q8(packed.data(), scales.data());
  for (int t : {1, T}) {
    std::vector<float> by_blocks(size_t(t * N)), by_q8(size_t(t * N));
    matmul_blocks(by_blocks.data(), x.data(), m, t, K, N);
    matmul(by_q8.data(), x.data(), w, t, K, N);
    for (size_t i = 0; i < by_q8.size(); ++i) CHECK(by_q8[i] == Approx(by_blocks[i]).margin(1e-5));
  }
}
