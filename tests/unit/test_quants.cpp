// Unit tests of GGML's block types (quants.hpp, src/quants*.cpp): the table; every type's
// dequantization of a block built by hand from the published layout, against values worked out
// by hand; the legacy quantizers' rounding rules; quantize → dequantize error per type; and
// matmul_blocks against the float64 product of the dequantized weights with x, for every
// kernel this CPU has (which must agree bit for bit on the quantized types).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "pert/error.hpp"
#include "kernels/quants_blocks.hpp"
#include "kernels/quants.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

// Every type of the traits table: a type added there runs through every test below.
const std::vector<BlockType> kAll = [] {
  std::vector<BlockType> out;
  for (const BlockTypeInfo& t : block_types()) out.push_back(t.type);
  return out;
}();

bool is_float(BlockType t) { return t == BlockType::F32 || t == BlockType::F16 || t == BlockType::BF16; }
bool is_k(BlockType t) { return t == BlockType::Q4_K || t == BlockType::Q5_K || t == BlockType::Q6_K; }

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> dequantized(BlockType type, const std::vector<uint8_t>& blocks) {
  const BlockTypeInfo& info = block_type_info(type);
  std::vector<float> out(blocks.size() / info.block_bytes * size_t(info.block_size));
  dequantize_row(type, blocks.data(), out.data(), int64_t(out.size()));
  return out;
}

void put16(std::vector<uint8_t>& b, size_t at, uint16_t v) { std::memcpy(b.data() + at, &v, 2); }
void put32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }

// Q4_K's and Q5_K's 12 scale bytes for scales {1, 2, 3, 4, 33, 40, 50, 63} and mins
// {0, 1, 2, 3, 17, 20, 48, 63}, packed by hand: bytes 0–3 scale j | (scale j+4 >> 4) << 6,
// bytes 4–7 min j | (min j+4 >> 4) << 6, bytes 8–11 (scale j+4 & 15) | (min j+4 & 15) << 4.
const uint8_t kScales12[12] = {1 | 2 << 6, 2 | 2 << 6, 3 | 3 << 6, 4 | 3 << 6, 0 | 1 << 6, 1 | 1 << 6,
                               2 | 3 << 6, 3 | 3 << 6, 1 | 1 << 4, 8 | 4 << 4, 2 | 0 << 4, 15 | 15 << 4};

struct RestoreBlockKernel {  // leaves the kernel as it found it
  std::string name = block_kernel();
  ~RestoreBlockKernel() { select_block_kernel(name); }
};

}  // namespace

TEST_CASE("quants: the table has GGML's numbers, names and sizes", "[quants]") {
  struct Row {
    uint32_t number;
    const char* name;
    int size;
    size_t bytes;
  };
  for (const Row& r : {Row{0, "F32", 1, 4}, Row{1, "F16", 1, 2}, Row{2, "Q4_0", 32, 18}, Row{3, "Q4_1", 32, 20},
                       Row{6, "Q5_0", 32, 22}, Row{7, "Q5_1", 32, 24}, Row{8, "Q8_0", 32, 34}, Row{12, "Q4_K", 256, 144},
                       Row{13, "Q5_K", 256, 176}, Row{14, "Q6_K", 256, 210}, Row{30, "BF16", 1, 2},
                       Row{39, "MXFP4", 32, 17}}) {
    const BlockTypeInfo* info = block_type_info(r.number);
    REQUIRE(info);
    CHECK(std::string(info->name) == r.name);
    CHECK(info->block_size == r.size);
    CHECK(info->block_bytes == r.bytes);
    CHECK(ggml_type_name(r.number) == r.name);
  }
  CHECK(block_type_info(10u) == nullptr);  // Q2_K: GGML's, not read
  CHECK(ggml_type_name(10) == "Q2_K");
  CHECK(ggml_type_name(20) == "IQ4_NL");
  CHECK(ggml_type_name(4) == "type 4");  // removed from GGML
  CHECK(ggml_type_name(1000) == "type 1000");
  CHECK(block_row_bytes(BlockType::Q4_K, 4096) == 16 * 144);
  CHECK(block_row_bytes(BlockType::F16, 7) == 14);
  CHECK_THROWS_AS(block_row_bytes(BlockType::Q4_K, 4000), Error);
  CHECK_THROWS_AS(block_row_bytes(BlockType::Q8_0, 33), Error);
  CHECK_THROWS_AS(block_type_info(BlockType(10)), Error);
}

TEST_CASE("quants: each row's --dtype spelling, family, fallback and scale layout are GGML's", "[quants]") {
  struct Row {
    BlockType type;
    const char* flag;
    BlockFamily family;
    BlockType fallback;
    std::vector<uint16_t> f16_scales;  // byte offsets of the F16 scales (d; d and m or dmin)
  };
  using F = BlockFamily;
  const Row rows[] = {
      {BlockType::F32, nullptr, F::Float, BlockType::F32, {}},     {BlockType::F16, nullptr, F::Float, BlockType::F16, {}},
      {BlockType::BF16, nullptr, F::Float, BlockType::BF16, {}},   {BlockType::Q8_0, "q8_0", F::Legacy, BlockType::Q8_0, {0}},
      {BlockType::Q4_0, "q4_0", F::Legacy, BlockType::Q4_0, {0}},  {BlockType::Q4_1, "q4_1", F::Legacy, BlockType::Q4_1, {0, 2}},
      {BlockType::Q5_0, "q5_0", F::Legacy, BlockType::Q5_0, {0}},  {BlockType::Q5_1, "q5_1", F::Legacy, BlockType::Q5_1, {0, 2}},
      {BlockType::Q4_K, "q4_k", F::KQuant, BlockType::Q5_0, {0, 2}}, {BlockType::Q5_K, "q5_k", F::KQuant, BlockType::Q5_1, {0, 2}},
      {BlockType::Q6_K, "q6_k", F::KQuant, BlockType::Q8_0, {208}}, {BlockType::MXFP4, nullptr, F::Legacy, BlockType::MXFP4, {}}};
  REQUIRE(block_types().size() == sizeof rows / sizeof rows[0]);
  for (const Row& r : rows) {
    const BlockTypeInfo& t = block_type_info(r.type);
    INFO(t.name);
    CHECK((t.dtype_flag ? std::string(t.dtype_flag) : "") == (r.flag ? r.flag : ""));
    CHECK(t.family == r.family);
    CHECK(t.fallback == r.fallback);
    if (r.type == BlockType::MXFP4) {
      CHECK((t.scales.kind == BlockScales::E8M0 && t.scales.count == 1 && t.scales.at[0] == 0));
      continue;
    }
    CHECK(t.scales.kind == (r.f16_scales.empty() ? BlockScales::None : BlockScales::F16));
    REQUIRE(size_t(t.scales.count) == r.f16_scales.size());
    for (size_t i = 0; i < r.f16_scales.size(); ++i) CHECK(t.scales.at[i] == r.f16_scales[i]);
  }
  CHECK(block_type_names() == "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, MXFP4");
}

TEST_CASE("quants: a block's values are finite exactly when the scales its row names are", "[quants]") {
  // What the loaders' check (require_finite) rests on: an Inf written at a named scale makes the
  // block's values non-finite; every other byte at 0xff, with the scales at 1, leaves them finite.
  for (const BlockTypeInfo& t : block_types()) {
    if (t.scales.kind != BlockScales::F16) continue;
    INFO(t.name);
    const std::vector<float> v = gaussian(size_t(t.block_size), 17);
    std::vector<uint8_t> block(t.block_bytes);
    t.from_float(v.data(), block.data());
    std::vector<float> out(size_t(t.block_size));
    for (int i = 0; i < t.scales.count; ++i) {
      std::vector<uint8_t> bad = block;
      put16(bad, t.scales.at[i], 0x7c00);
      t.to_float(bad.data(), out.data());
      CHECK(std::any_of(out.begin(), out.end(), [](float x) { return !std::isfinite(x); }));
    }
    std::vector<uint8_t> ones(t.block_bytes, 0xff);
    for (int i = 0; i < t.scales.count; ++i) put16(ones, t.scales.at[i], 0x3c00);
    t.to_float(ones.data(), out.data());
    CHECK(std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); }));
  }
}

TEST_CASE("quants: blocks built by hand dequantize to the values their layout gives", "[quants]") {
  SECTION("F32, F16, BF16") {
    std::vector<uint8_t> f16(6), bf16(4), f32(4);
    put16(f16, 0, 0x3c00), put16(f16, 2, 0xc000), put16(f16, 4, 0x3555);
    CHECK(dequantized(BlockType::F16, f16) == std::vector<float>{1.0f, -2.0f, 0.333251953125f});
    put16(bf16, 0, 0x3f80), put16(bf16, 2, 0xc040);
    CHECK(dequantized(BlockType::BF16, bf16) == std::vector<float>{1.0f, -3.0f});
    put32(f32, 0, 0x40490fdb);
    CHECK(dequantized(BlockType::F32, f32) == std::vector<float>{3.14159274101257324f});
  }
  SECTION("Q8_0: d = 0.5, q = i − 16") {
    std::vector<uint8_t> b(34);
    put16(b, 0, 0x3800);
    for (int i = 0; i < 32; ++i) b[size_t(2 + i)] = uint8_t(int8_t(i - 16));
    const std::vector<float> v = dequantized(BlockType::Q8_0, b);
    CHECK(v[0] == -8.0f);
    CHECK(v[16] == 0.0f);
    CHECK(v[31] == 7.5f);
  }
  // The 4-bit blocks: qs[i] = i | (15 − i) << 4, so value i (i < 16) has code i and value 16 + i code 15 − i.
  auto nibbles = [](std::vector<uint8_t>& b, size_t at) {
    for (int i = 0; i < 16; ++i) b[at + size_t(i)] = uint8_t(i | (15 - i) << 4);
  };
  SECTION("Q4_0: d = 2, value 2·(code − 8)") {
    std::vector<uint8_t> b(18);
    put16(b, 0, 0x4000);
    nibbles(b, 2);
    const std::vector<float> v = dequantized(BlockType::Q4_0, b);
    CHECK(v[0] == -16.0f);   // code 0
    CHECK(v[15] == 14.0f);   // code 15
    CHECK(v[16] == 14.0f);   // code 15
    CHECK(v[31] == -16.0f);  // code 0
    CHECK(v[20] == 6.0f);    // code 11
  }
  SECTION("Q4_1: d = 0.5, m = −1, value 0.5·code − 1") {
    std::vector<uint8_t> b(20);
    put16(b, 0, 0x3800), put16(b, 2, 0xbc00);
    nibbles(b, 4);
    const std::vector<float> v = dequantized(BlockType::Q4_1, b);
    CHECK(v[0] == -1.0f);
    CHECK(v[15] == 6.5f);
    CHECK(v[17] == 6.0f);  // code 14
  }
  SECTION("Q5_0: d = 1, qh = 0x0000ffff: the first 16 values have the fifth bit") {
    std::vector<uint8_t> b(22);
    put16(b, 0, 0x3c00), put32(b, 2, 0x0000ffffu);
    nibbles(b, 6);
    const std::vector<float> v = dequantized(BlockType::Q5_0, b);
    CHECK(v[0] == 0.0f);     // 0 + 16 − 16
    CHECK(v[15] == 15.0f);   // 15 + 16 − 16
    CHECK(v[16] == -1.0f);   // 15 − 16
    CHECK(v[31] == -16.0f);  // 0 − 16
  }
  SECTION("Q5_1: d = 1, m = 0.5, qh = 0xffff0000: the last 16 have the fifth bit") {
    std::vector<uint8_t> b(24);
    put16(b, 0, 0x3c00), put16(b, 2, 0x3800), put32(b, 4, 0xffff0000u);
    nibbles(b, 8);
    const std::vector<float> v = dequantized(BlockType::Q5_1, b);
    CHECK(v[0] == 0.5f);
    CHECK(v[15] == 15.5f);
    CHECK(v[16] == 31.5f);  // 15 + 16 + 0.5
    CHECK(v[31] == 16.5f);
  }
  // K-quants: the scales of kScales12; every qs byte 0x53, so sub-blocks 2c have code 3 and 2c + 1 code 5.
  SECTION("Q4_K: d = 1, dmin = 0.5, value s_j·code − 0.5·m_j") {
    std::vector<uint8_t> b(144, 0x53);
    put16(b, 0, 0x3c00), put16(b, 2, 0x3800);
    std::memcpy(b.data() + 4, kScales12, 12);
    const std::vector<float> v = dequantized(BlockType::Q4_K, b);
    CHECK(v[0] == 3.0f);          // j 0: 1·3 − 0
    CHECK(v[32 + 5] == 9.5f);     // j 1: 2·5 − 0.5
    CHECK(v[128 + 31] == 90.5f);  // j 4: 33·3 − 8.5
    CHECK(v[160] == 190.0f);      // j 5: 40·5 − 10
    CHECK(v[192 + 7] == 126.0f);  // j 6: 50·3 − 24
    CHECK(v[255] == 283.5f);      // j 7: 63·5 − 31.5
  }
  SECTION("Q5_K: as Q4_K, qh = 0xa5: sub-blocks 0, 2, 5, 7 have the fifth bit") {
    std::vector<uint8_t> b(176, 0x53);
    put16(b, 0, 0x3c00), put16(b, 2, 0x3800);
    std::memcpy(b.data() + 4, kScales12, 12);
    std::memset(b.data() + 16, 0xa5, 32);
    const std::vector<float> v = dequantized(BlockType::Q5_K, b);
    CHECK(v[3] == 19.0f);         // j 0: 1·(3 + 16)
    CHECK(v[40] == 9.5f);         // j 1: 2·5 − 0.5
    CHECK(v[64] == 56.0f);        // j 2: 3·19 − 1
    CHECK(v[128] == 90.5f);       // j 4: 33·3 − 8.5
    CHECK(v[170] == 830.0f);      // j 5: 40·21 − 10
    CHECK(v[255] == 1291.5f);     // j 7: 63·21 − 31.5
  }
  SECTION("Q6_K: d = 0.5, scales j − 8, ql 0x21, qh 0xe4") {
    // Per 128 values, part p = 0..3 (32 values each) takes ql's low nibble (p < 2: 1) or high
    // (p >= 2: 2) and qh's bits 2p..2p+1 (0, 1, 2, 3): codes 1, 17, 34, 50, minus 32.
    std::vector<uint8_t> b(210);
    std::memset(b.data(), 0x21, 128);
    std::memset(b.data() + 128, 0xe4, 64);
    for (int j = 0; j < 16; ++j) b[size_t(192 + j)] = uint8_t(int8_t(j - 8));
    put16(b, 208, 0x3800);
    const std::vector<float> v = dequantized(BlockType::Q6_K, b);
    CHECK(v[0] == 124.0f);     // j 0: 0.5·−8·−31
    CHECK(v[52] == 37.5f);     // j 3: 0.5·−5·−15
    CHECK(v[64 + 20] == -3.0f);    // j 5: 0.5·−3·2
    CHECK(v[197] == 4.0f);     // 128 + 64 + 5, j 12: 0.5·4·2
    CHECK(v[255] == 63.0f);    // j 15: 0.5·7·18
  }
}

TEST_CASE("quants: the legacy quantizers round as GGML's reference does", "[quants]") {
  std::vector<float> x(32, 0.0f);
  std::vector<uint8_t> b(34);
  SECTION("Q8_0: d = max|x| / 127, q = round half away from zero") {
    x[0] = 127.0f, x[1] = 2.5f, x[2] = -2.5f, x[3] = 0.49f, x[4] = -127.0f;
    quantize_row(BlockType::Q8_0, x.data(), b.data(), 32);
    CHECK(b[0] == 0x00);
    CHECK(b[1] == 0x3c);  // d = 1
    CHECK(int8_t(b[3]) == 3);
    CHECK(int8_t(b[4]) == -3);
    CHECK(int8_t(b[5]) == 0);
    CHECK(int8_t(b[6]) == -127);
  }
  SECTION("Q4_0: d = the signed extreme / −8, codes ⌊x/d + 8.5⌋ capped at 15") {
    x[0] = -8.0f, x[1] = 7.0f, x[2] = 0.5f, x[3] = -0.5f, x[16] = 1.49f, x[17] = 7.9f;
    quantize_row(BlockType::Q4_0, x.data(), b.data(), 32);
    CHECK(b[0] == 0x00);
    CHECK(b[1] == 0x3c);       // d = −8 / −8 = 1
    CHECK(b[2] == (0 | 9 << 4));   // x[0] → 0; x[16] = 1.49 → ⌊9.99⌋
    CHECK(b[3] == (15 | 15 << 4)); // x[1] = 7 → 15; x[17] = 7.9 → ⌊16.4⌋ capped
    CHECK(b[4] == (9 | 8 << 4));   // x[2] = 0.5 → 9; x[18] = 0 → 8
    CHECK((b[5] & 15) == 8);       // x[3] = −0.5 → ⌊8.0⌋
  }
  SECTION("Q4_1 and Q5_1: min and (max − min) / top, codes ⌊(x − min)/d + ½⌋") {
    for (int i = 0; i < 32; ++i) x[size_t(i)] = float(i) / 31.0f * 15.0f - 3.0f;  // d = 1, min −3 for Q4_1
    std::vector<uint8_t> b4(20), b5(24);
    quantize_row(BlockType::Q4_1, x.data(), b4.data(), 32);
    quantize_row(BlockType::Q5_1, x.data(), b5.data(), 32);
    const std::vector<float> v4 = dequantized(BlockType::Q4_1, b4), v5 = dequantized(BlockType::Q5_1, b5);
    for (int i = 0; i < 32; ++i) {
      INFO("i " << i);
      CHECK(v4[size_t(i)] == float(std::floor(double(i) / 31.0 * 15.0 + 0.5)) - 3.0f);
      CHECK(v5[size_t(i)] == Approx(x[size_t(i)]).margin(0.01));  // code i, but d = 15/31 rounded to F16
    }
  }
}

TEST_CASE("quants: quantize then dequantize loses little, per type", "[quants]") {
  // Relative RMS error on Gaussian rows (K = 4096), with GGML's usual ordering of the types.
  struct Bound {
    BlockType type;
    double max_rel_rms;
  };
  const std::vector<float> x = gaussian(8 * 4096, 7);
  double previous_4 = 0.0;
  // Bounds: about 10% above what pert's quantizers give (GGML's reference quantizers give the same
  // to within a few per cent on such data; MXFP4's quantizer is GGML's reference rule).
  for (const Bound& b : {Bound{BlockType::F32, 0.0}, Bound{BlockType::F16, 3e-4}, Bound{BlockType::BF16, 3e-3},
                         Bound{BlockType::Q8_0, 0.006}, Bound{BlockType::Q6_K, 0.0195}, Bound{BlockType::Q5_K, 0.04},
                         Bound{BlockType::Q5_1, 0.042}, Bound{BlockType::Q5_0, 0.048}, Bound{BlockType::Q4_K, 0.079},
                         Bound{BlockType::Q4_1, 0.086}, Bound{BlockType::Q4_0, 0.095}, Bound{BlockType::MXFP4, 0.126}}) {
    std::vector<uint8_t> blocks(block_row_bytes(b.type, int64_t(x.size())));
    quantize_row(b.type, x.data(), blocks.data(), int64_t(x.size()));
    const std::vector<float> y = dequantized(b.type, blocks);
    double err = 0.0, norm = 0.0;
    for (size_t i = 0; i < x.size(); ++i) err += double(y[i] - x[i]) * (y[i] - x[i]), norm += double(x[i]) * x[i];
    const double rel = std::sqrt(err / norm);
    INFO(block_type_info(b.type).name << ": relative RMS error " << rel);
    CHECK(rel <= b.max_rel_rms);
    if (b.type == BlockType::Q4_K) previous_4 = rel;
    if (b.type == BlockType::Q4_0) CHECK(previous_4 < rel);  // the K-quant's search pays
  }
  // All zero, a constant, and one outlier stay finite and exact where they can.
  for (const BlockType type : kAll) {
    const int n = 512;
    for (int pattern = 0; pattern < 3; ++pattern) {
      std::vector<float> v(size_t(n), pattern == 1 ? 0.25f : 0.0f);
      if (pattern == 2) v[77] = -3.0f;
      std::vector<uint8_t> blocks(block_row_bytes(type, n));
      quantize_row(type, v.data(), blocks.data(), n);
      const std::vector<float> y = dequantized(type, blocks);
      INFO(block_type_info(type).name << " pattern " << pattern);
      for (int i = 0; i < n; ++i) REQUIRE(y[size_t(i)] == Approx(v[size_t(i)]).margin(0.02));
    }
  }
}

TEST_CASE("quants: matmul_blocks matches the float64 product of the dequantized weights, every kernel", "[quants]") {
  // x is quantized per block (32 values, or 256 for the K-quants) with d = max|x| / 127, so each
  // x[k] is off by at most d/2: |error| <= Σ_k |w[k]|·d(k)/2, plus F32 rounding (1e-5 of Σ |w·x|).
  RestoreBlockKernel restore;
  for (const BlockType type : kAll) {
    const BlockTypeInfo& info = block_type_info(type);
    for (const int K : {is_k(type) ? 256 : 96, is_k(type) ? 1280 : 416}) {
      for (const auto& [T, N] : {std::pair{1, 37}, std::pair{3, 17}, std::pair{70, 19}, std::pair{5, 1}}) {
        const size_t row = block_row_bytes(type, K);
        const std::vector<float> wf = gaussian(size_t(N) * K, uint32_t(K + N)), x = gaussian(size_t(T) * K, uint32_t(T), 2.0f);
        std::vector<uint8_t> w(row * size_t(N));
        for (int n = 0; n < N; ++n) quantize_row(type, wf.data() + size_t(n) * K, w.data() + size_t(n) * row, K);
        std::vector<float> wd(size_t(N) * K);
        for (int n = 0; n < N; ++n) dequantize_row(type, w.data() + size_t(n) * row, wd.data() + size_t(n) * K, K);
        const int xblock = is_float(type) ? 1 : is_k(type) ? 256 : 32;
        std::vector<float> y_first;
        for (const std::string& kernel : block_kernels()) {
          select_block_kernel(kernel);
          for (const bool accumulate : {false, true}) {
            INFO(info.name << ", kernel " << kernel << ", T " << T << ", K " << K << ", N " << N << ", accumulate " << accumulate);
            std::vector<float> y(size_t(T) * N, accumulate ? 0.75f : -1e30f);
            matmul_blocks(y.data(), x.data(), BlockMatrix{w.data(), type, row}, T, K, N, accumulate);
            for (int t = 0; t < T; ++t)
              for (int n = 0; n < N; ++n) {
                double want = accumulate ? 0.75 : 0.0, bound = 0.0, size = 0.0;
                for (int k = 0; k < K; ++k) {
                  const double wk = wd[size_t(n) * K + k], xk = x[size_t(t) * K + k];
                  want += wk * xk;
                  size += std::fabs(wk * xk);
                  if (xblock > 1 && k % xblock == 0) {
                    float amax = 0.0f;
                    for (int i = k; i < k + xblock; ++i) amax = std::max(amax, std::fabs(x[size_t(t) * K + i]));
                    for (int i = k; i < k + xblock; ++i) bound += std::fabs(wd[size_t(n) * K + i]) * amax / 127.0 / 2.0;
                  }
                }
                REQUIRE(std::fabs(y[size_t(t) * N + n] - want) <= bound + 1e-5 * size + 1e-6);
              }
            if (!accumulate && is_float(type)) continue;
            if (!accumulate) {
              if (y_first.empty()) y_first = y;
              else REQUIRE(y == y_first);  // the kernels agree bit for bit
            }
          }
        }
      }
    }
  }
  CHECK_THROWS_AS(select_block_kernel("avx9000"), std::invalid_argument);
}

TEST_CASE("quants: panels hold the rows' bytes and give their floats bit for bit, every kernel", "[quants]") {
  // Rows from the quantizer, random bytes (every code and 6-bit scale), and the int16 extremes:
  // every code at its top (all bits set) against x at ±127, where a sub-block's int16 sums peak.
  RestoreBlockKernel restore;
  for (const BlockType type : kAll) {
    REQUIRE(has_panels(type) == !(is_float(type) || type == BlockType::Q8_0));
    if (!has_panels(type)) continue;
    const size_t bytes = block_type_info(type).block_bytes, d_at = type == BlockType::Q6_K ? 208 : 0;
    const bool second_scale = type == BlockType::Q4_K || type == BlockType::Q5_K || type == BlockType::Q4_1 ||
                              type == BlockType::Q5_1;  // dmin or m at byte 2
    for (const int K : {256, 1280}) {
      const int N = K == 256 ? 16 : 24;  // two panels (avx512vnni's pair kernels); at 1280 a pair and an odd one
      const size_t row = block_row_bytes(type, K), prow = panel_row_bytes(type, K);
      for (int pattern = 0; pattern < 3; ++pattern) {
        std::vector<uint8_t> w(row * size_t(N));
        std::mt19937 rng(uint32_t(K + pattern));
        if (pattern == 0) {
          const std::vector<float> wf = gaussian(size_t(N) * K, uint32_t(K));
          for (int n = 0; n < N; ++n) quantize_row(type, wf.data() + size_t(n) * K, w.data() + size_t(n) * row, K);
        } else {
          for (uint8_t& b : w) b = pattern == 1 ? uint8_t(rng()) : 0xff;
          for (size_t at = 0; at < w.size(); at += bytes) {  // finite F16 scales: d, and dmin or m
            if (type == BlockType::MXFP4) {  // its E8M0 scale byte, 2^−27 to 2^12
              w[at] = uint8_t(100 + rng() % 40);
              continue;
            }
            put16(w, at + d_at, uint16_t(0x2000 + rng() % 0x1000));
            if (second_scale) put16(w, at + 2, uint16_t(0x1c00 + rng() % 0x1000));
          }
        }
        std::vector<uint8_t> panels(prow * size_t(N)), back(row * size_t(N));
        repack_panels(type, w.data(), row, N, K, panels.data());
        for (int n = 0; n < N; n += 8)  // every byte back where it was
          quants::unpack_panel(int(type), panels.data() + size_t(n) * prow, K, back.data() + size_t(n) * row, row);
        REQUIRE(back == w);
        for (const int T : {1, 3, 5, 70}) {  // 5: 4 rows and 1 (pairs run from 2 rows); 70: a second chunk of x, and 2 rows left over
          std::vector<float> x = gaussian(size_t(T) * K, uint32_t(T + pattern), 2.0f);
          if (pattern == 2)
            for (size_t i = 0; i < x.size(); ++i) x[i] = i / size_t(K) % 2 ? -1.0f : 1.0f;
          for (const bool accumulate : {false, true}) {
            std::vector<float> want(size_t(T) * N, 0.75f);
            select_block_kernel("plain");
            matmul_blocks(want.data(), x.data(), BlockMatrix{w.data(), type, row}, T, K, N, accumulate);
            for (const std::string& kernel : block_kernels()) {
              select_block_kernel(kernel);
              INFO(block_type_info(type).name << ", kernel " << kernel << ", K " << K << ", pattern " << pattern
                                              << ", T " << T << ", accumulate " << accumulate);
              std::vector<float> y(size_t(T) * N, accumulate ? 0.75f : -1e30f);
              matmul_blocks(y.data(), x.data(), BlockMatrix{panels.data(), type, prow, true}, T, K, N, accumulate);
              REQUIRE(std::memcmp(y.data(), want.data(), sizeof(float) * y.size()) == 0);
            }
          }
        }
      }
    }
  }
  std::vector<uint8_t> w(144 * 12), panels(148 * 12);
  CHECK_THROWS_AS(repack_panels(BlockType::Q4_K, w.data(), 144, 12, 256, panels.data()), Error);  // not whole panels
  CHECK_THROWS_AS(panel_row_bytes(BlockType::Q4_K, 200), Error);
  CHECK_THROWS_AS(panel_row_bytes(BlockType::Q5_0, 200), Error);
  CHECK_THROWS_AS(panel_row_bytes(BlockType::Q8_0, 256), Error);
  std::vector<float> x(256), y(12);
  CHECK_THROWS_AS(matmul_blocks(y.data(), x.data(), BlockMatrix{panels.data(), BlockType::Q4_K, 148, true}, 1, 256, 12), Error);
}

TEST_CASE("quants: matmul_blocks of several products equals one call per product, bad shapes refused", "[quants]") {
  const int K = 512, T = 6;
  const std::vector<float> x = gaussian(size_t(T) * K, 3);
  const BlockType types[] = {BlockType::Q4_K, BlockType::Q6_K, BlockType::Q8_0, BlockType::F16};
  const int Ns[] = {40, 23, 17, 9};
  std::vector<std::vector<uint8_t>> w(4);
  std::vector<BlockMatrix> m(4);
  for (int i = 0; i < 4; ++i) {
    const size_t row = block_row_bytes(types[i], K);
    const std::vector<float> wf = gaussian(size_t(Ns[i]) * K, uint32_t(10 + i));
    w[size_t(i)].resize(row * size_t(Ns[i]));
    for (int n = 0; n < Ns[i]; ++n) quantize_row(types[i], wf.data() + size_t(n) * K, w[size_t(i)].data() + n * row, K);
    m[size_t(i)] = BlockMatrix{w[size_t(i)].data(), types[i], row};
  }
  for (const int t : {1, T}) {
    std::vector<std::vector<float>> one(4), all(4);
    std::vector<BlockProduct> products;
    for (int i = 0; i < 4; ++i) {
      one[size_t(i)].resize(size_t(t) * Ns[i]);
      all[size_t(i)].assign(size_t(t) * Ns[i], 0.0f);
      matmul_blocks(one[size_t(i)].data(), x.data(), m[size_t(i)], t, K, Ns[i]);
      products.push_back({all[size_t(i)].data(), &m[size_t(i)], Ns[i], false});
    }
    matmul_blocks(x.data(), t, K, products.data(), products.size());
    for (int i = 0; i < 4; ++i) CHECK(one[size_t(i)] == all[size_t(i)]);
  }
  std::vector<float> y(64);
  CHECK_THROWS_AS(matmul_blocks(y.data(), x.data(), m[0], 1, 500, 1), Error);  // 500: not whole Q4_K blocks
  CHECK_THROWS_AS(matmul_blocks(y.data(), x.data(), BlockMatrix{w[2].data(), BlockType::Q8_0, 10}, 1, K, 2), Error);
}

// Decoding and prefill speed per type (not run by default: pert_tests "[.bench]"): T = 1 on a
// K = 2048, N = 5632 matrix (a 1B model's FFN), rotating over copies of it that together pass
// 128 MB so each call streams its weights from memory, not from L3 — GB/s of weight bytes;
// T = 128 — GFLOP/s.
TEST_CASE("quants: matmul_blocks speed", "[.bench]") {
  const int K = 2048, N = 5632;
  const std::vector<float> wf = gaussian(size_t(N) * K, 1), x = gaussian(size_t(128) * K, 2);
  std::vector<float> y(size_t(128) * N);
  for (const BlockType type : kAll)
  for (const bool panels : {false, true}) {
    if (panels && !has_panels(type)) continue;
    const size_t row = panels ? panel_row_bytes(type, K) : block_row_bytes(type, K), bytes = row * N,
                 copies = (size_t(128) << 20) / bytes + 1;
    std::vector<uint8_t> w(bytes * copies);
    if (panels) {
      std::vector<uint8_t> rows(block_row_bytes(type, K) * N);
      for (int n = 0; n < N; ++n) quantize_row(type, wf.data() + size_t(n) * K, rows.data() + n * block_row_bytes(type, K), K);
      repack_panels(type, rows.data(), block_row_bytes(type, K), N, K, w.data());
    } else {
      for (int n = 0; n < N; ++n) quantize_row(type, wf.data() + size_t(n) * K, w.data() + n * row, K);
    }
    for (size_t c = 1; c < copies; ++c) std::memcpy(w.data() + c * bytes, w.data(), bytes);
    size_t next = 0;
    auto seconds = [&](int T, int reps) {
      double best = 1e30;
      for (int r = 0; r <= reps; ++r) {  // the first a warm-up
        const BlockMatrix m{w.data() + (next++ % copies) * bytes, type, row, panels};
        const auto t0 = std::chrono::steady_clock::now();
        matmul_blocks(y.data(), x.data(), m, T, K, N);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r) best = std::min(best, s);
      }
      return best;
    };
    const double decode = seconds(1, 30), prefill = seconds(128, 3);
    WARN(block_type_info(type).name << (panels ? " panels" : "") << " (" << block_kernel() << "): T=1 " << double(bytes) / decode / 1e9 << " GB/s, "
                                    << decode * 1e3 << " ms; T=128 " << 2.0 * 128 * K * double(N) / prefill / 1e9
                                    << " GFLOP/s");
  }
}
