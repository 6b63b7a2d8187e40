// AMX (src/kernels/amx_tiles.hpp, amx_gemm.cpp): the portable tile model against loops written
// from the instructions' definitions, the tile GEMMs through the model against the plain kernels
// (Q8 bit for bit), the permission's fallback, and where the CPU runs AMX the instructions
// against the model (elsewhere that case says it skipped).
#include <cerrno>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/amx_gemm.hpp"
#include "kernels/amx_tiles.hpp"
#include "kernels/ops.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

std::vector<uint8_t> amx_random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = uint8_t(rng());
  return v;
}

// BF16 bits of small random values (normal, finite), so sums stay far from overflow.
std::vector<uint8_t> amx_random_bf16_tile(uint32_t seed) {
  const std::vector<float> v = random_floats(16 * 32, seed, 2.0f);
  std::vector<uint8_t> out(16 * 64);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = f32_to_bf16(v[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

float amx_bf16_value(const uint8_t* row, int index) {
  uint16_t h;
  std::memcpy(&h, row + 2 * index, 2);
  return bf16_to_f32_value(h);
}

// C (tile 0) of rows × 4·cols bytes, A (tile 1) rows × 4·depth, B (tile 2) depth × 4·cols.
TileConfig amx_product_config(int rows, int depth, int cols) {
  TileConfig c;
  c.set(0, rows, 4 * cols);
  c.set(1, rows, 4 * depth);
  c.set(2, depth, 4 * cols);
  return c;
}

struct AmxRelease {  // the model's tiles released whatever a case does
  ~AmxRelease() { TileModel::release(); }
};

template <class T>
T amx_cell(const std::vector<uint8_t>& tile, int row, int col) {  // rows of 64 bytes
  T v;
  std::memcpy(&v, tile.data() + size_t(row) * 64 + size_t(col) * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

TEST_CASE("amx model: configuration, loads, stores and zeroing", "[amx]") {
  AmxRelease release;
  TileConfig config;
  config.set(3, 10, 40);
  TileModel::configure(config);
  const std::vector<uint8_t> memory = amx_random_bytes(16 * 100, 1);
  TileModel::load<3>(memory.data(), 100);  // 10 rows of 40 bytes, 100 apart
  std::vector<uint8_t> out(16 * 64, 0xee);
  TileModel::store<3>(out.data(), 64);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 64; ++c) {
      INFO("row " << r << ", byte " << c);
      REQUIRE(out[size_t(r * 64 + c)] == (r < 10 && c < 40 ? memory[size_t(r * 100 + c)] : 0xee));
    }
  // The bytes past rows × colsb read back as zero: a wider configuration of the same tile would
  // see them, so the model keeps them zero.
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 64; ++c)
      REQUIRE(tile_model::registers().data[3][r][c] == (r < 10 && c < 40 ? memory[size_t(r * 100 + c)] : 0));
  TileModel::zero<3>();
  TileModel::store<3>(out.data(), 64);
  for (int r = 0; r < 10; ++r)
    for (int c = 0; c < 40; ++c) REQUIRE(out[size_t(r * 64 + c)] == 0);

  CHECK_THROWS_WITH(TileModel::load<2>(memory.data(), 64), Catch::Contains("tile 2 is not configured"));
  TileConfig too_big;
  too_big.set(0, 17, 64);
  CHECK_THROWS_WITH(TileModel::configure(too_big), Catch::Contains("at most 8 tiles of 16 x 64"));
  too_big = TileConfig{};
  too_big.set(0, 16, 65);
  CHECK_THROWS(TileModel::configure(too_big));
  TileConfig palette0;
  palette0.palette = 0;
  CHECK_THROWS_WITH(TileModel::configure(palette0), Catch::Contains("palette 0"));
  TileModel::configure(amx_product_config(4, 3, 5));
  TileModel::dpbusd<0, 1, 2>();  // fits
  TileModel::configure(amx_product_config(4, 3, 5));
  CHECK_THROWS_WITH((TileModel::dpbusd<0, 2, 1>()), Catch::Contains("do not fit"));
  TileModel::release();
  CHECK_THROWS_WITH(TileModel::zero<0>(), Catch::Contains("before a configuration"));
}

// tdpbusd: every shape from 1 × 1 × 1 to 16 × 16 × 16 dwords (a sample), C starting anywhere,
// against int64 sums wrapped to 32 bits; a sum past INT32_MAX wraps (no saturation).
TEST_CASE("amx model: tdpbusd is u8 x s8 quads summed into int32, wrapping", "[amx]") {
  AmxRelease release;
  for (const auto& [rows, depth, cols] : {std::tuple{16, 16, 16}, std::tuple{1, 1, 1}, std::tuple{5, 3, 7},
                                          std::tuple{16, 8, 16}, std::tuple{9, 16, 2}, std::tuple{16, 1, 16}}) {
    INFO("rows " << rows << ", depth " << depth << ", cols " << cols);
    TileModel::configure(amx_product_config(rows, depth, cols));
    const std::vector<uint8_t> c0 = amx_random_bytes(16 * 64, 2), a = amx_random_bytes(16 * 64, 3),
                               b = amx_random_bytes(16 * 64, 4);
    TileModel::load<0>(c0.data(), 64);
    TileModel::load<1>(a.data(), 64);
    TileModel::load<2>(b.data(), 64);
    TileModel::dpbusd<0, 1, 2>();
    std::vector<uint8_t> c(16 * 64);
    TileModel::store<0>(c.data(), 64);
    for (int m = 0; m < rows; ++m)
      for (int n = 0; n < cols; ++n) {
        int64_t want = amx_cell<int32_t>(c0, m, n);
        for (int k = 0; k < 4 * depth; ++k) want += int64_t(a[size_t(m * 64 + k)]) * int8_t(b[size_t((k / 4) * 64 + 4 * n + k % 4)]);
        REQUIRE(amx_cell<int32_t>(c, m, n) == int32_t(uint32_t(uint64_t(want))));
      }
  }
  // 2147483647 + 255 · 127 · 4 wraps to a negative number.
  TileModel::configure(amx_product_config(1, 1, 1));
  const int32_t top = 2147483647;
  const uint8_t a[4] = {255, 255, 255, 255}, b[4] = {127, 127, 127, 127};
  TileModel::load<0>(&top, 4);
  TileModel::load<1>(a, 4);
  TileModel::load<2>(b, 4);
  TileModel::dpbusd<0, 1, 2>();
  int32_t got;
  TileModel::store<0>(&got, 4);
  CHECK(got == int32_t(uint32_t(top) + uint32_t(255 * 127 * 4)));
  CHECK(got < 0);
}

// tdpbf16ps: near a double sum for random tiles; exactly the integer sum where every product and
// sum is exact; and the definition's own rounding: even and odd halves summed apart from zero,
// then joined and added to C; denormal inputs read as zero, denormal results flushed.
TEST_CASE("amx model: tdpbf16ps sums BF16 pairs' even and odd halves apart, DAZ and FTZ", "[amx]") {
  AmxRelease release;
  for (const auto& [rows, depth, cols] : {std::tuple{16, 16, 16}, std::tuple{3, 1, 5}, std::tuple{16, 7, 9}}) {
    INFO("rows " << rows << ", depth " << depth << ", cols " << cols);
    TileModel::configure(amx_product_config(rows, depth, cols));
    const std::vector<uint8_t> a = amx_random_bf16_tile(5), b = amx_random_bf16_tile(6);
    const std::vector<float> c0 = random_floats(16 * 16, 7);
    TileModel::load<0>(c0.data(), 64);
    TileModel::load<1>(a.data(), 64);
    TileModel::load<2>(b.data(), 64);
    TileModel::dpbf16ps<0, 1, 2>();
    std::vector<float> c(16 * 16);
    TileModel::store<0>(c.data(), 64);
    for (int m = 0; m < rows; ++m)
      for (int n = 0; n < cols; ++n) {
        double want = c0[size_t(m * 16 + n)];
        for (int k = 0; k < 2 * depth; ++k)
          want += double(amx_bf16_value(a.data() + m * 64, k)) * amx_bf16_value(b.data() + (k / 2) * 64, 2 * n + k % 2);
        REQUIRE(c[size_t(m * 16 + n)] == Approx(want).margin(1e-5));
      }
  }
  // One element: A's pairs (a0, a1), (a2, a3) against B's column (b0, b1), (b2, b3).
  auto one = [](float c, std::vector<float> a, std::vector<float> b) {
    TileModel::configure(amx_product_config(1, int(a.size() / 2), 1));
    std::vector<uint16_t> ab(a.size()), bb(b.size());
    for (size_t i = 0; i < a.size(); ++i) ab[i] = f32_to_bf16(a[i]), bb[i] = f32_to_bf16(b[i]);
    TileModel::load<0>(&c, 4);
    TileModel::load<1>(ab.data(), 64);
    TileModel::load<2>(bb.data(), 4);  // B's rows: one pair each
    TileModel::dpbf16ps<0, 1, 2>();
    float out;
    TileModel::store<0>(&out, 4);
    return out;
  };
  CHECK(one(1.0f, {2, -3, 4, 5}, {1, 2, -3, 0.5f}) == 1.0f + (2 * 1 - 3 * 2 + 4 * -3 + 5 * 0.5f));
  // 2^24 and 1 in different halves: even 2^24 − 2^24 = 0, odd 1 + 1 = 2. One running sum over
  // the pairs in order (vdpbf16ps's) would give 1: 2^24 + 1 rounds back to 2^24.
  const float big = 16777216.0f;
  CHECK(one(0.0f, {big, 1, -big, 1}, {1, 1, 1, 1}) == 2.0f);
  // C joins once: 2^24 + (1 + 1) = 2^24 + 2, where adding the halves to C one at a time gives 2^24.
  CHECK(one(big, {1, 1}, {1, 1}) == big + 2.0f);
  // DAZ: a denormal BF16 (0x0001, 2^-133) times 2^100 would be 2^-33; it is read as zero.
  {
    TileModel::configure(amx_product_config(1, 1, 1));
    const uint16_t a[2] = {0x0001, 0}, b[2] = {f32_to_bf16(std::ldexp(1.0f, 100)), 0};
    const float c = 0.0f;
    TileModel::load<0>(&c, 4);
    TileModel::load<1>(a, 4);
    TileModel::load<2>(b, 4);
    TileModel::dpbf16ps<0, 1, 2>();
    float out;
    TileModel::store<0>(&out, 4);
    CHECK(out == 0.0f);
  }
  // FTZ: 2^-70 · 2^-70 = 2^-140 is denormal in F32: flushed to zero (the product of normals).
  CHECK(one(0.0f, {std::ldexp(1.0f, -70), 0}, {std::ldexp(1.0f, -70), 0}) == 0.0f);
  CHECK(one(0.0f, {std::ldexp(1.0f, -60), 0}, {std::ldexp(1.0f, -60), 0}) == std::ldexp(1.0f, -120));
  // A denormal C is read as zero.
  CHECK(one(std::ldexp(1.0f, -130), {0, 0}, {0, 0}) == 0.0f);
}

namespace {

struct AmxRestoreQ8 {  // leaves the q8 kernel as it found it
  std::string name = q8_kernel();
  ~AmxRestoreQ8() { select_q8_kernel(name); }
};

// Products of one x through amx_matmul_q8 against the same products on `path` (matmul_shared).
// from_q8_0: the weights written as GGML's Q8_0 rows (F16 d, 32 int8 a block) and repacked as a
// GGUF file's are (K a multiple of 32).
void amx_check_q8(TileImpl impl, const std::string& path, int T, int K, const std::vector<int>& Ns, uint32_t seed,
                  bool from_q8_0 = false) {
  AmxRestoreQ8 restore;
  std::vector<std::vector<uint8_t>> packed;
  std::vector<std::vector<uint16_t>> scales;
  std::vector<Weight> weights;
  for (size_t i = 0; i < Ns.size(); ++i) {
    const std::vector<float> w = random_floats(size_t(Ns[i]) * K, seed + 1 + uint32_t(i));
    packed.emplace_back(q8_packed_size(Ns[i], K));
    scales.emplace_back(q8_scales_size(Ns[i], K));
    if (from_q8_0) {
      const size_t row_stride = size_t(K / 32) * 34;
      std::vector<uint8_t> rows(size_t(Ns[i]) * row_stride);
      for (int n = 0; n < Ns[i]; ++n)
        for (int b = 0; b < K / 32; ++b) {
          uint8_t* block = rows.data() + size_t(n) * row_stride + size_t(b) * 34;
          int8_t q[32];
          const uint16_t d = f32_to_f16(quantize_q8_block(w.data() + size_t(n) * K + b * 32, 32, q) * 1.01f);
          std::memcpy(block, &d, 2);
          std::memcpy(block + 2, q, 32);
        }
      repack_q8_0(packed[i].data(), scales[i].data(), rows.data(), row_stride, Ns[i], K);
    } else {
      quantize_q8(packed[i].data(), scales[i].data(), w.data(), Ns[i], K);
    }
    weights.push_back(Weight::of_q8(packed[i].data(), scales[i].data()));
  }
  std::vector<float> x = random_floats(size_t(T) * K, seed, 3.0f);
  if (K >= 32) std::fill(x.begin(), x.begin() + 32, 0.0f);  // a zero block of x: d = 0
  std::vector<std::vector<float>> want, got;
  for (size_t i = 0; i < Ns.size(); ++i) want.push_back(random_floats(size_t(T) * Ns[i], seed + 10 + uint32_t(i)));
  got = want;
  std::vector<Projection> on_path, on_tiles;
  for (size_t i = 0; i < Ns.size(); ++i) {
    on_path.push_back({want[i].data(), &weights[i], Ns[i], i == 1});
    on_tiles.push_back({got[i].data(), &weights[i], Ns[i], i == 1});
  }
  select_q8_kernel(path);
  matmul_q8(x.data(), T, K, on_path.data(), on_path.size());
  amx_matmul_q8(impl, x.data(), T, K, on_tiles.data(), on_tiles.size());
  for (size_t i = 0; i < Ns.size(); ++i) {
    INFO("product " << i << " (N " << Ns[i] << ")");
#if !defined(__FMA__)
    // A build without FMA (the sanitizers', no -march=native) rounds the plain kernel's
    // float(dot)·(dw·dx) + acc twice where every other path fuses it: within a rounding, not bit for bit.
    if (path == "plain") {
      for (size_t k = 0; k < got[i].size(); ++k) CHECK(got[i][k] == Approx(want[i][k]).epsilon(1e-5).margin(1e-5));
      continue;
    }
#endif
    REQUIRE(got[i] == want[i]);
  }
}

// amx_matmul_bf16 against a double sum over the BF16-rounded values; with small integers
// (every sum exact) against the plain kernel bit for bit.
void amx_check_bf16(TileImpl impl, int T, int K, int N, bool accumulate, uint32_t seed) {
  INFO("T " << T << ", K " << K << ", N " << N << ", accumulate " << accumulate);
  for (bool integers : {false, true}) {
    std::vector<float> x = random_floats(size_t(T) * K, seed, 2.0f), wf = random_floats(size_t(N) * K, seed + 1);
    if (integers) {
      for (float& v : x) v = std::round(v * 2);
      for (float& v : wf) v = std::round(v * 4);
    }
    std::vector<uint16_t> w(wf.size());
    for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
    std::vector<uint16_t> packed(bf16_packed_size(N, K));
    pack_bf16(packed.data(), w.data(), N, K);
    const std::vector<float> y0 = random_floats(size_t(T) * N, seed + 2);
    std::vector<float> y = y0, plain = y0;
    amx_matmul_bf16(impl, y.data(), x.data(), packed.data(), T, K, N, accumulate);
    if (integers) {
      on_each_path("bf16", bf16_kernels, bf16_kernel, select_bf16_kernel, [&] {
        if (bf16_kernel() != "plain") return;
        matmul(plain.data(), x.data(), Weight::of_bf16(packed.data()), T, K, N, accumulate);
      });
      REQUIRE(y == plain);
      continue;
    }
    for (int t = 0; t < T; ++t)
      for (int n = 0; n < N; ++n) {
        double want = accumulate ? y0[size_t(t) * N + n] : 0.0;
        for (int k = 0; k < K; ++k)
          want += double(bf16_to_f32_value(f32_to_bf16(x[size_t(t) * K + k]))) * bf16_to_f32_value(w[size_t(n) * K + k]);
        REQUIRE(y[size_t(t) * N + n] == Approx(want).margin(1e-5));
      }
  }
}

}  // namespace

// The tile GEMMs through the model: M (rows of x), N and K off the tiles' 16 / 32 / 32, odd K
// (a BF16 pair padded with zero), one and two tiles a step, a last run of pairs shorter than 16.
TEST_CASE("amx GEMM (model): BF16 through tdpbf16ps matches the sums, the plain kernel where exact", "[amx]") {
  for (const auto& [T, K, N] : {std::tuple{2, 75, 41}, std::tuple{17, 75, 41}, std::tuple{16, 32, 16},
                                std::tuple{33, 64, 32}, std::tuple{40, 33, 50}, std::tuple{5, 1, 3},
                                std::tuple{70, 130, 100}})
    for (bool accumulate : {false, true}) amx_check_bf16(TileImpl::model, T, K, N, accumulate, uint32_t(T + K + N));
}

TEST_CASE("amx GEMM (model): Q8 through tdpbusd gives every q8 path's floats bit for bit", "[amx][q8]") {
  for (const std::string& path : q8_kernels()) {
    if (path == "amx") continue;
    for (const auto& [T, K] : {std::tuple{1, 75}, std::tuple{3, 75}, std::tuple{17, 75}, std::tuple{40, 64},
                               std::tuple{33, 256}, std::tuple{130, 96}, std::tuple{16, 32}}) {
      INFO("path " << path << ", T " << T << ", K " << K);
      amx_check_q8(TileImpl::model, path, T, K, {41, 100, 16}, uint32_t(T * 7 + K));
    }
    INFO("path " << path << ", GGML Q8_0 rows");
    amx_check_q8(TileImpl::model, path, 37, 96, {40, 17}, 77, true);
  }
}

// Without AMX, or with the OS's permission refused, the amx paths are not offered and the
// features say why; the level still names a cap for PERT_KERNELS.
TEST_CASE("amx: the permission and the fallback", "[amx][kernels]") {
  CHECK(amx_refusal(false, false, false, [] { return 0; }) == "no AMX-TILE on this CPU");
  CHECK(amx_refusal(true, false, true, [] { return 0; }) == "AMX without AMX-BF16");
  CHECK(amx_refusal(true, true, false, [] { return 0; }) == "AMX without AMX-INT8");
  const std::string refused = amx_refusal(true, true, true, [] { return EPERM; });
  CHECK_THAT(refused, Catch::Contains("ARCH_REQ_XCOMP_PERM") && Catch::Contains(std::strerror(EPERM)));
  CHECK(amx_refusal(true, true, true, [] { return 0; }).empty());
  CHECK(amx_refusal(true, true, true, [] { return ENOSYS; }) != "");

  const auto& levels = kernel_levels();
  CHECK(std::find(levels.begin(), levels.end(), "amx") != levels.end());
  const bool amx = cpu_supports("amx");
  CHECK(amx == amx_unavailable_reason().empty());
  const std::vector<std::string> q8 = q8_kernels(), bf16 = bf16_kernels();
  CHECK((std::find(q8.begin(), q8.end(), "amx") != q8.end()) == amx);
  CHECK((std::find(bf16.begin(), bf16.end(), "amx") != bf16.end()) == amx);
  if (!amx) {
    CHECK_THROWS_AS(select_q8_kernel("amx"), std::invalid_argument);
    CHECK_THROWS_AS(select_bf16_kernel("amx"), std::invalid_argument);
    if (cpu_info().features.find("AMX") != std::string::npos)  // AMX in cpuid, refused by the OS
      CHECK_THAT(cpu_info().features, Catch::Contains("amx off: " + amx_unavailable_reason()));
  }
}

// The instructions against the model, bit for bit: tiles, then both GEMMs. Only where AMX runs.
TEST_CASE("amx instructions: tdpbusd, tdpbf16ps and the GEMMs equal the model", "[amx]") {
  if (!cpu_supports("amx")) {
    WARN("skipped: AMX does not run here (" << amx_unavailable_reason() << ")");
    return;
  }
  AmxRelease release;
  for (const auto& [rows, depth, cols] : {std::tuple{16, 16, 16}, std::tuple{5, 3, 7}, std::tuple{16, 8, 16}}) {
    INFO("rows " << rows << ", depth " << depth << ", cols " << cols);
    const TileConfig config = amx_product_config(rows, depth, cols);
    for (bool bf16 : {false, true}) {
      const std::vector<uint8_t> c0 = bf16 ? amx_random_bf16_tile(8) : amx_random_bytes(16 * 64, 8);
      const std::vector<uint8_t> a = bf16 ? amx_random_bf16_tile(9) : amx_random_bytes(16 * 64, 9);
      const std::vector<uint8_t> b = bf16 ? amx_random_bf16_tile(10) : amx_random_bytes(16 * 64, 10);
      std::vector<uint8_t> model(16 * 64, 0), real(16 * 64, 0);
      auto run = [&](auto tiles, std::vector<uint8_t>& out) {
        using Tiles = decltype(tiles);
        Tiles::configure(config);
        Tiles::template load<0>(c0.data(), 64);
        Tiles::template load<1>(a.data(), 64);
        Tiles::template load<2>(b.data(), 64);
        if (bf16)
          Tiles::template dpbf16ps<0, 1, 2>();
        else
          Tiles::template dpbusd<0, 1, 2>();
        Tiles::template store<0>(out.data(), 64);
        Tiles::release();
      };
      run(TileModel{}, model);
#if defined(__x86_64__)
      run(TileIntrinsics{}, real);
#endif
      INFO("bf16 " << bf16);
      CHECK(real == model);
    }
  }
  for (const auto& [T, K, N] : {std::tuple{17, 75, 41}, std::tuple{70, 130, 100}}) {
    const std::vector<float> x = random_floats(size_t(T) * K, 11, 2.0f), wf = random_floats(size_t(N) * K, 12);
    std::vector<uint16_t> w(wf.size()), packed(bf16_packed_size(N, K));
    for (size_t i = 0; i < w.size(); ++i) w[i] = f32_to_bf16(wf[i]);
    pack_bf16(packed.data(), w.data(), N, K);
    std::vector<float> on_model(size_t(T) * N), on_real(size_t(T) * N);
    amx_matmul_bf16(TileImpl::model, on_model.data(), x.data(), packed.data(), T, K, N, false);
    amx_matmul_bf16(TileImpl::instructions, on_real.data(), x.data(), packed.data(), T, K, N, false);
    CHECK(on_real == on_model);
    amx_check_q8(TileImpl::instructions, "plain", T, K, {41, 100, 16}, 13);
  }
}
