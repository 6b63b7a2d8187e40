// AMX on GGML's block panels (src/kernels/amx_blocks.cpp): the tile GEMM through the portable
// tile model against the plain kernel, bit for bit, for every panel type (Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K, MXFP4) over weights from the quantizer, random bytes (every code and
// scale) and every code at its top; a last panel alone in its tile and item, 1 to 3
// (super-)blocks, 1 to 40 rows of x (tiles of 16 with remainders), several products in one call;
// the dispatch; and, where the CPU runs AMX, the instructions against the model (elsewhere that
// case says it skipped).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/amx_blocks.hpp"
#include "kernels/ops.hpp"
#include "kernels/quants.hpp"
#include "kernels/quants_blocks.hpp"
#include "test_util.hpp"

using namespace pert;

namespace amx_blocks_test {

const BlockType kPanelTypes[] = {BlockType::Q4_0, BlockType::Q4_1, BlockType::Q5_0, BlockType::Q5_1,
                                 BlockType::Q4_K, BlockType::Q6_K, BlockType::Q5_K, BlockType::MXFP4};

bool k_quant(BlockType t) { return t == BlockType::Q4_K || t == BlockType::Q5_K || t == BlockType::Q6_K; }

// x quantized as matmul_blocks documents it (quants.hpp, quants_blocks.hpp): per 32 as Q8_0 with
// Σ q (legacy), per 256 with d = max|x| / 127, q = round(x / d) and Σ q per 16 (K-quants). The
// comparison with matmul_blocks below holds only if these are its values.
struct QuantizedRows {
  std::vector<int8_t> q32, q256;
  std::vector<float> d32, d256;
  std::vector<int32_t> sum32;
  std::vector<int16_t> bsum16, bsum32;
  quants::QuantizedX legacy, k;

  QuantizedRows(const std::vector<float>& x, int T, int K) {
    q32.resize(size_t(T) * K), q256.resize(size_t(T) * K);
    d32.resize(size_t(T) * K / 32), sum32.resize(d32.size()), bsum32.resize(d32.size());
    d256.resize(size_t(T) * K / 256), bsum16.resize(size_t(T) * K / 16);
    for (size_t b = 0; b < d32.size(); ++b) {
      d32[b] = quantize_q8_block(x.data() + 32 * b, 32, q32.data() + 32 * b);
      sum32[b] = 0;
      for (int i = 0; i < 32; ++i) sum32[b] += q32[32 * b + size_t(i)];
    }
    for (size_t s = 0; s < d256.size(); ++s) {
      float amax = 0.0f;
      for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[256 * s + size_t(i)]));
      d256[s] = amax / 127.0f;
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int i = 0; i < 256; ++i) q256[256 * s + size_t(i)] = int8_t(std::lrintf(x[256 * s + size_t(i)] * inv));
    }
    for (size_t j = 0; j < bsum16.size(); ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += q256[16 * j + size_t(i)];
      bsum16[j] = int16_t(sum);
    }
    for (size_t j = 0; j < bsum32.size(); ++j) bsum32[j] = int16_t(bsum16[2 * j] + bsum16[2 * j + 1]);
    legacy = {q32.data(), d32.data(), sum32.data(), nullptr, nullptr, x.data(), K};
    k = {q256.data(), d256.data(), nullptr, bsum16.data(), bsum32.data(), x.data(), K};
  }
};

// N rows of K values of a panel type, in panels: pattern 0 quantized gaussians, 1 random bytes
// (every code and 6-bit scale, distinct per sub-block), 2 every byte 0xff (the top codes); the
// random ones with finite scales (F16 d, dmin or m; MXFP4's E8M0 byte 2^−27 .. 2^12).
std::vector<uint8_t> panel_weights(BlockType type, int N, int K, int pattern, uint32_t seed) {
  const size_t bytes = block_type_info(type).block_bytes, row = block_row_bytes(type, K);
  const size_t d_at = type == BlockType::Q6_K ? 208 : 0;
  const bool second = type == BlockType::Q4_K || type == BlockType::Q5_K || type == BlockType::Q4_1 ||
                      type == BlockType::Q5_1;  // dmin or m at byte 2
  std::vector<uint8_t> w(row * size_t(N));
  std::mt19937 rng(seed);
  if (pattern == 0) {
    const std::vector<float> wf = random_floats(size_t(N) * K, seed);
    for (int n = 0; n < N; ++n) quantize_row(type, wf.data() + size_t(n) * K, w.data() + size_t(n) * row, K);
  } else {
    for (uint8_t& b : w) b = pattern == 1 ? uint8_t(rng()) : 0xff;
    for (size_t at = 0; at < w.size(); at += bytes) {
      if (type == BlockType::MXFP4) {
        w[at] = uint8_t(100 + rng() % 40);
        continue;
      }
      const uint16_t d = uint16_t(0x2000 + rng() % 0x1000), m = uint16_t(0x1c00 + rng() % 0x1000);
      std::memcpy(&w[at + d_at], &d, 2);
      if (second) std::memcpy(&w[at + 2], &m, 2);
    }
  }
  std::vector<uint8_t> panels(panel_row_bytes(type, K) * size_t(N));
  repack_panels(type, w.data(), row, N, K, panels.data());
  return panels;
}

struct RestoreBlockKernel {
  std::string name = block_kernel();
  ~RestoreBlockKernel() { select_block_kernel(name); }
};

// The products through matmul_blocks on the plain kernel, and through amx_matmul_blocks on
// `impl` (the x quantized here), from y = 0.75 where accumulating: every output bit for bit.
void check_products(TileImpl impl, const std::vector<float>& x, int T, int K, const std::vector<BlockMatrix>& w,
                    const std::vector<int>& N, bool accumulate) {
  RestoreBlockKernel restore;
  select_block_kernel("plain");
  const QuantizedRows xq(x, T, K);
  std::vector<std::vector<float>> want(w.size()), got(w.size());
  std::vector<BlockProduct> plain, tiles;
  for (size_t i = 0; i < w.size(); ++i) {
    want[i].assign(size_t(T) * N[i], 0.75f);
    got[i].assign(size_t(T) * N[i], accumulate ? 0.75f : -1e30f);
    plain.push_back({want[i].data(), &w[i], N[i], accumulate});
    tiles.push_back({got[i].data(), &w[i], N[i], accumulate});
  }
  matmul_blocks(x.data(), T, K, plain.data(), plain.size());
  amx_matmul_blocks(impl, xq.legacy, xq.k, T, tiles.data(), tiles.size());
  for (size_t i = 0; i < w.size(); ++i) {
    INFO("product " << i << " (" << block_type_info(w[i].type).name << ", N " << N[i] << ")");
    size_t differ = 0, first = 0;
    for (size_t j = 0; j < want[i].size(); ++j)
      if (std::memcmp(&want[i][j], &got[i][j], 4) != 0 && differ++ == 0) first = j;
    INFO(differ << " of " << want[i].size() << " outputs differ; first: row of x " << first / size_t(N[i])
                << ", weight row " << first % size_t(N[i]) << ", plain " << want[i][first] << ", tiles "
                << got[i][first]);
    REQUIRE(differ == 0);
  }
}

// Every panel type at K of 1..3 (super-)blocks, N 8 (one panel: half an A tile), 24 (an item of
// a full and a half tile), 40 (an item of 32 rows and one of 8), rows of x 1..40.
void check_every_type(TileImpl impl) {
  for (const BlockType type : kPanelTypes) {
    const int unit = k_quant(type) ? 256 : 32;
    for (int blocks = 1; blocks <= 3; ++blocks) {
      const int K = blocks * unit;
      for (const int N : {8, 24, 40}) {
        for (int pattern = blocks == 1 ? 0 : 1; pattern < 3; ++pattern) {  // quantized weights at one block
          const BlockMatrix w{nullptr, type, panel_row_bytes(type, K), true};
          const std::vector<uint8_t> panels = panel_weights(type, N, K, pattern, uint32_t(31 * K + N + pattern));
          BlockMatrix m = w;
          m.data = panels.data();
          // Every T at one shape; elsewhere the tile edges: 1, 2, 15..17, 31..33, 40.
          const bool all_rows = N == 40 && blocks == 2 && pattern == 1;
          for (int T = 1; T <= 40; ++T) {
            if (!all_rows && !(T <= 2 || (T >= 15 && T <= 17) || (T >= 31 && T <= 33) || T == 40)) continue;
            std::vector<float> x = random_floats(size_t(T) * K, uint32_t(7 * T + K + pattern), 2.0f);
            if (pattern == 2)  // ±1 per row: x at ±127 against the top codes
              for (size_t i = 0; i < x.size(); ++i) x[i] = i / size_t(K) % 2 ? -1.0f : 1.0f;
            const bool accumulate = T % 2 == 1;
            INFO(block_type_info(type).name << ", K " << K << ", N " << N << ", pattern " << pattern << ", T " << T
                                            << ", accumulate " << accumulate);
            check_products(impl, x, T, K, {m}, {N}, accumulate);
          }
        }
      }
    }
  }
}

// Several products of one x, legacy and K-quant types together (each its own x format).
void check_mixed_products(TileImpl impl) {
  const int K = 512;
  const std::vector<BlockType> types = {BlockType::Q4_K, BlockType::Q5_0, BlockType::Q6_K, BlockType::MXFP4};
  const std::vector<int> N = {24, 8, 40, 16};
  std::vector<std::vector<uint8_t>> panels;
  std::vector<BlockMatrix> w;
  for (size_t i = 0; i < types.size(); ++i) panels.push_back(panel_weights(types[i], N[i], K, 1, uint32_t(50 + i)));
  for (size_t i = 0; i < types.size(); ++i) w.push_back({panels[i].data(), types[i], panel_row_bytes(types[i], K), true});
  for (const int T : {3, 37}) {
    INFO("mixed products, T " << T);
    check_products(impl, random_floats(size_t(T) * K, uint32_t(60 + T), 2.0f), T, K, w, N, T == 37);
  }
}

}  // namespace amx_blocks_test

TEST_CASE("amx blocks: the tile GEMM through the model equals the plain kernel, every panel type", "[amx][blocks]") {
  amx_blocks_test::check_every_type(TileImpl::model);
  amx_blocks_test::check_mixed_products(TileImpl::model);
}

TEST_CASE("amx blocks: products not in panels are refused, the blocks family has amx where AMX runs",
          "[amx][blocks]") {
  const std::vector<float> x = random_floats(2 * 256, 3);
  const amx_blocks_test::QuantizedRows xq(x, 2, 256);
  std::vector<uint8_t> rows(block_row_bytes(BlockType::Q4_K, 256) * 8);
  std::vector<float> y(16);
  const BlockMatrix in_rows{rows.data(), BlockType::Q4_K, block_row_bytes(BlockType::Q4_K, 256), false};
  const BlockProduct product{y.data(), &in_rows, 8};
  CHECK_THROWS_AS(amx_matmul_blocks(TileImpl::model, xq.legacy, xq.k, 2, &product, 1), std::invalid_argument);
  const std::vector<std::string> paths = block_kernels();
  const bool amx = cpu_supports("amx");
  CHECK((std::find(paths.begin(), paths.end(), "amx") != paths.end()) == amx);
  if (!amx) CHECK_THROWS_AS(select_block_kernel("amx"), std::invalid_argument);
}

// The instructions against the model and the plain kernel, and matmul_blocks on the amx path
// (prefill on tiles, decoding on avx512vnni's panels) against plain. Only where AMX runs.
TEST_CASE("amx blocks instructions: the tile GEMM on AMX equals the plain kernel", "[amx][blocks]") {
  if (!cpu_supports("amx")) {
    WARN("skipped: AMX does not run here (" << amx_unavailable_reason() << ")");
    return;
  }
  amx_blocks_test::check_every_type(TileImpl::instructions);
  amx_blocks_test::check_mixed_products(TileImpl::instructions);
  amx_blocks_test::RestoreBlockKernel restore;
  for (const BlockType type : amx_blocks_test::kPanelTypes) {
    const int K = amx_blocks_test::k_quant(type) ? 512 : 96, N = 40;
    const std::vector<uint8_t> panels = amx_blocks_test::panel_weights(type, N, K, 1, 77);
    const BlockMatrix w{panels.data(), type, panel_row_bytes(type, K), true};
    for (const int T : {1, 19}) {
      const std::vector<float> x = random_floats(size_t(T) * K, uint32_t(T), 2.0f);
      std::vector<float> want(size_t(T) * N), got(size_t(T) * N);
      select_block_kernel("plain");
      matmul_blocks(want.data(), x.data(), w, T, K, N);
      select_block_kernel("amx");
      matmul_blocks(got.data(), x.data(), w, T, K, N);
      INFO(block_type_info(type).name << " through matmul_blocks on amx, T " << T);
      CHECK(std::memcmp(want.data(), got.data(), sizeof(float) * want.size()) == 0);
    }
  }
}
