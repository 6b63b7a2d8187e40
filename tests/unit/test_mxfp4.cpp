// MXFP4 (quants.hpp; OCP microscaling FP4, gpt-oss's expert weights) against its definition,
// restated here from the spec rather than from pert's tables: a block is one E8M0 scale byte e
// (2^(e − 127)) and 32 E2M1 codes (sign bit 3, exponent bits 2..1, mantissa bit 0), GGML's
// nibble order. Dequantization for every code and exponent; the quantizer's choices (GGML's
// reference rule); matmul_blocks, bit for bit, against a plain loop over the same integer
// products; Hugging Face's _blocks/_scales bytes into GGML's; and a GGUF tensor of type 39.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "pert/error.hpp"
#include "pert/gguf.hpp"
#include "pert/safetensors.hpp"
#include "kernels/ops.hpp"
#include "kernels/quants.hpp"
#include "test_util.hpp"

using namespace pert;

// Everything here in one namespace, the test cases too: the unity build shares a translation unit
// with other test files.
namespace mxfp4_test {

// E2M1 from its bits: exponent 0 is subnormal (0 or 0.5), else 2^(exp − 1)·(1 + m/2).
double e2m1(int code) {
  const int exp = code >> 1 & 3, mantissa = code & 1;
  const double magnitude = exp == 0 ? 0.5 * mantissa : std::ldexp(1.0 + 0.5 * mantissa, exp - 1);
  return code & 8 ? -magnitude : magnitude;
}

// The definition's value of code c under scale byte e, in F32 (its only rounding: overflow to
// inf at e = 255). GGML has no −0: code 8 is +0 there, and so in pert.
float defined_value(int code, int e) {
  const float v = float(std::ldexp(e2m1(code), e - 127));
  return v == 0.0f ? 0.0f : v;
}

// A block from its scale byte and 32 codes, GGML's order: byte j holds code j low, j + 16 high.
std::vector<uint8_t> ggml_block(int e, const int* codes) {
  std::vector<uint8_t> b(17);
  b[0] = uint8_t(e);
  for (int j = 0; j < 16; ++j) b[size_t(1 + j)] = uint8_t(codes[j] | codes[j + 16] << 4);
  return b;
}

std::vector<float> dequantized(const std::vector<uint8_t>& blocks) {
  std::vector<float> out(blocks.size() / 17 * 32);
  dequantize_row(BlockType::MXFP4, blocks.data(), out.data(), int64_t(out.size()));
  return out;
}

uint32_t bits(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

struct KernelGuard {  // leaves the block kernel as it found it
  std::string name = block_kernel();
  ~KernelGuard() { select_block_kernel(name); }
};


TEST_CASE("MXFP4: the table has GGML's number 39, 32 values in 17 bytes", "[quants][mxfp4]") {
  const BlockTypeInfo* info = block_type_info(39u);
  REQUIRE(info);
  CHECK(info->type == BlockType::MXFP4);
  CHECK(std::string(info->name) == "MXFP4");
  CHECK(info->block_size == 32);
  CHECK(info->block_bytes == 17);
  CHECK(ggml_type_name(39) == "MXFP4");
  CHECK(block_row_bytes(BlockType::MXFP4, 2880) == 90 * 17);  // gpt-oss's hidden size
  CHECK_THROWS_AS(block_row_bytes(BlockType::MXFP4, 48), Error);
}

TEST_CASE("MXFP4: every code at every exponent dequantizes to its defined value", "[quants][mxfp4]") {
  // Codes 0..15 in the low nibbles (values 0..15) and 15..0 in the high ones (values 16..31).
  int codes[32];
  for (int j = 0; j < 16; ++j) codes[j] = j, codes[j + 16] = 15 - j;
  for (int e = 0; e < 256; ++e) {
    const std::vector<float> v = dequantized(ggml_block(e, codes));
    for (int i = 0; i < 32; ++i) {
      INFO("e " << e << ", value " << i << ", code " << codes[i]);
      REQUIRE(bits(v[size_t(i)]) == bits(defined_value(codes[i], e)));
    }
  }
  SECTION("the ends of the exponent range, by hand") {
    const std::vector<float> v0 = dequantized(ggml_block(0, codes)), v127 = dequantized(ggml_block(127, codes)),
                             v255 = dequantized(ggml_block(255, codes));
    CHECK(v0[1] == std::ldexp(0.5f, -127));  // code 1 (0.5) at e 0: 2^−128, subnormal
    CHECK(v0[31] == 0.0f);
    CHECK(v127[7] == 6.0f);
    CHECK(v127[16 + 15 - 13] == -3.0f);  // code 13
    CHECK(v127[8] == 0.0f);
    CHECK_FALSE(std::signbit(v127[8]));  // −0 reads as +0, as in GGML
    // e 255: NaN in the OCP spec; GGML's scale 2^128, so 0.5 is 2^127 and larger values overflow.
    CHECK(v255[1] == std::ldexp(1.0f, 127));
    CHECK(v255[9] == -std::ldexp(1.0f, 127));
    CHECK(v255[2] == std::numeric_limits<float>::infinity());
    CHECK(v255[16 + 15 - 15] == -std::numeric_limits<float>::infinity());  // code 15: −6
    CHECK(v255[0] == 0.0f);
  }
}

TEST_CASE("MXFP4: the quantizer picks GGML's scale and the nearest code", "[quants][mxfp4]") {
  std::vector<float> x(32, 0.0f);
  std::vector<uint8_t> b(17);
  auto code = [&](int i) { return i < 16 ? b[size_t(1 + i)] & 15 : b[size_t(1 + i - 16)] >> 4; };
  SECTION("e = ⌊log2 max|x|⌋ + 125: max|x| = 6 gives e 127, the scale 1") {
    x[0] = 6.0f, x[1] = -6.0f, x[2] = 1.25f, x[3] = -1.25f, x[4] = 5.0f, x[5] = 0.24f, x[6] = 0.26f, x[7] = -0.0f;
    x[16] = 0.75f, x[17] = 100.0f / 3.0f / 10.0f, x[18] = -0.74f, x[19] = 7.0f / 4.0f;
    x[0] = 7.99f;  // still below 8: e 127, clamped to the top code 6
    quantize_row(BlockType::MXFP4, x.data(), b.data(), 32);
    CHECK(b[0] == 127);
    CHECK(code(0) == 7);    // 7.99 → 6
    CHECK(code(1) == 15);   // −6
    CHECK(code(2) == 2);    // 1.25: between 1 and 1.5, the smaller
    CHECK(code(3) == 10);   // −1.25 → −1
    CHECK(code(4) == 6);    // 5: between 4 and 6, the smaller
    CHECK(code(5) == 0);    // 0.24 → 0
    CHECK(code(6) == 1);    // 0.26 → 0.5
    CHECK(code(7) == 0);    // −0 → +0
    CHECK(code(16) == 1);   // 0.75: between 0.5 and 1, the smaller
    CHECK(code(17) == 5);   // 3.33 → 3
    CHECK(code(18) == 9);   // −0.74 → −0.5
    CHECK(code(19) == 3);   // 1.75: between 1.5 and 2, the smaller
  }
  SECTION("powers of two, tiny and zero blocks") {
    x[9] = -8.0f;  // ⌊log2 8⌋ = 3: e 128, scale 2, −8 is code 14 (−4)
    quantize_row(BlockType::MXFP4, x.data(), b.data(), 32);
    CHECK(b[0] == 128);
    CHECK(code(9) == 14);
    x[9] = 1e-40f;  // below 2^−125: GGML's cast is undefined there; pert writes e 0
    quantize_row(BlockType::MXFP4, x.data(), b.data(), 32);
    CHECK(b[0] == 0);
    x[9] = 0.0f;
    quantize_row(BlockType::MXFP4, x.data(), b.data(), 32);
    CHECK(b == std::vector<uint8_t>(17, 0));
    x[9] = std::ldexp(1.0f, -125);  // e = 0 exactly, code 6 (4·2^−127)
    quantize_row(BlockType::MXFP4, x.data(), b.data(), 32);
    CHECK(b[0] == 0);
    CHECK(code(9) == 6);
  }
  SECTION("blocks whose largest code is 4 or 6 come back byte for byte") {
    std::mt19937 rng(5);
    for (int trial = 0; trial < 2000; ++trial) {
      int codes[32];
      for (int& c : codes) c = int(rng() % 15), c = c >= 8 ? c + 1 : c;  // any code but −0 (which reads as +0)
      codes[rng() % 32] = 6 + int(rng() % 2) + 8 * int(rng() % 2);      // ±4 or ±6 somewhere
      const int e = int(rng() % 253);  // 253 and up: 6·2^(e − 127) overflows F32
      const std::vector<uint8_t> block = ggml_block(e, codes);
      const std::vector<float> v = dequantized(block);
      std::vector<uint8_t> again(17);
      quantize_row(BlockType::MXFP4, v.data(), again.data(), 32);
      INFO("trial " << trial << ", e " << e);
      REQUIRE(again == block);
    }
  }
}

TEST_CASE("MXFP4: matmul_blocks is the plain loop over the int8 products, bit for bit, every kernel", "[quants][mxfp4]") {
  // x rounded per 32 as the kernels round it (quantize_q8_block); per block the exact int32 sum
  // of 2·E2M1 code × q, times half the scale times x's d, added into lane b mod 4 by one fused
  // multiply-add; the lanes summed (0 + 1) + (2 + 3) (quants_blocks.hpp: Lanes).
  KernelGuard guard;
  const int K = 32 * 13, N = 11;
  std::mt19937 rng(9);
  std::vector<uint8_t> w(size_t(N) * 17 * (K / 32));
  for (size_t i = 0; i < w.size(); ++i) w[i] = uint8_t(rng());
  for (size_t at = 0; at < w.size(); at += 17) w[at] = uint8_t(100 + rng() % 40);  // finite products
  for (const int T : {1, 2, 5, 70}) {
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> x(size_t(T) * K);
    for (float& v : x) v = normal(rng);
    std::vector<float> want(size_t(T) * N);
    for (int t = 0; t < T; ++t) {
      for (int n = 0; n < N; ++n) {
        float lane[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int b = 0; b < K / 32; ++b) {
          int8_t q[32];
          const float dx = quantize_q8_block(x.data() + size_t(t) * K + 32 * b, 32, q);
          const uint8_t* block = w.data() + (size_t(n) * (K / 32) + size_t(b)) * 17;
          int32_t dot = 0;
          for (int i = 0; i < 32; ++i) {
            const int c = i < 16 ? block[1 + i] & 15 : block[1 + i - 16] >> 4;
            dot += int32_t(2.0 * e2m1(c)) * q[i];
          }
          const float half_scale = float(std::ldexp(1.0, block[0] - 128));
          lane[b % 4] = std::fma(float(dot), half_scale * dx, lane[b % 4]);
        }
        want[size_t(t) * N + size_t(n)] = (lane[0] + lane[1]) + (lane[2] + lane[3]);
      }
    }
    for (const std::string& kernel : block_kernels()) {
      select_block_kernel(kernel);
      std::vector<float> y(size_t(T) * N, -1e30f);
      matmul_blocks(y.data(), x.data(), BlockMatrix{w.data(), BlockType::MXFP4, size_t(17 * (K / 32))}, T, K, N);
      INFO("kernel " << kernel << ", T " << T);
      REQUIRE(std::memcmp(y.data(), want.data(), sizeof(float) * y.size()) == 0);
    }
  }
}

TEST_CASE("MXFP4: Hugging Face's _blocks and _scales become GGML's blocks, the same values", "[quants][mxfp4]") {
  // Two blocks of known codes: block 0 value i has code i % 16, block 1 code (5·i + 3) % 16.
  // HF packs value 2j in the low nibble of byte j and 2j + 1 in the high one.
  const int n_blocks = 2;
  const uint8_t scales[n_blocks] = {127, 131};
  int codes[n_blocks][32];
  for (int i = 0; i < 32; ++i) codes[0][i] = i % 16, codes[1][i] = (5 * i + 3) % 16;
  std::vector<uint8_t> hf(size_t(n_blocks) * 16);
  for (int b = 0; b < n_blocks; ++b)
    for (int j = 0; j < 16; ++j) hf[size_t(16 * b + j)] = uint8_t(codes[b][2 * j] | codes[b][2 * j + 1] << 4);
  std::vector<uint8_t> out(size_t(n_blocks) * 17, 0xaa);
  mxfp4_from_hf(hf.data(), scales, n_blocks, out.data());
  for (int b = 0; b < n_blocks; ++b) {
    INFO("block " << b);
    const std::vector<uint8_t> want = ggml_block(scales[b], codes[b]);
    CHECK(std::vector<uint8_t>(out.begin() + 17 * b, out.begin() + 17 * (b + 1)) == want);
  }
  const std::vector<float> v = dequantized(out);
  for (int b = 0; b < n_blocks; ++b)
    for (int i = 0; i < 32; ++i) {
      INFO("block " << b << ", value " << i);
      CHECK(v[size_t(32 * b + i)] == defined_value(codes[b][i], scales[b]));  // HF's lut[c]·2^(s − 127)
    }
  CHECK(out[0] == 127);
  CHECK(out[1] == (0 | 0 << 4));   // values 0 and 16: codes 0, 0
  CHECK(out[2] == (1 | 1 << 4));   // values 1 and 17: codes 1, 1
  CHECK(out[17 + 1] == (3 | 3 << 4));  // block 1, values 0 and 16: codes 3, (80 + 3) % 16 = 3
}

TEST_CASE("MXFP4: a GGUF tensor of type 39 is read as 17-byte blocks", "[quants][mxfp4][gguf]") {
  // One tensor [2][64] (GGML's shape 64, 2): 4 blocks, 68 bytes.
  std::string f("GGUF", 4);
  auto u32 = [&](uint32_t v) { f.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { f.append(reinterpret_cast<const char*>(&v), 8); };
  u32(3), u64(1), u64(0);
  const std::string name = "blk.0.ffn_down_exps.weight";
  u64(name.size()), f += name;
  u32(2), u64(64), u64(2), u32(39), u64(0);
  while (f.size() % 32) f.push_back('\0');
  int codes[32];
  for (int i = 0; i < 32; ++i) codes[i] = (i * 7) % 16;
  for (int b = 0; b < 4; ++b) {
    const std::vector<uint8_t> block = ggml_block(120 + b, codes);
    f.append(block.begin(), block.end());
  }
  const GgufHeader h = parse_gguf(reinterpret_cast<const uint8_t*>(f.data()), f.size(), "m.gguf");
  REQUIRE(h.tensors.size() == 1);
  const GgufTensor& t = h.tensors[0];
  REQUIRE(t.type);
  CHECK(t.type->type == BlockType::MXFP4);
  CHECK(t.nbytes == 68);
  std::vector<float> v(128);
  dequantize_row(BlockType::MXFP4, t.data, v.data(), 128);
  CHECK(v[32 * 3 + 1] == defined_value(7, 123));
  std::string odd = f;
  std::memcpy(&odd[4 + 4 + 8 + 8 + 8 + name.size() + 4], "\x30\0\0\0\0\0\0\0", 8);  // rows of 48: not whole blocks
  CHECK_THROWS_AS(parse_gguf(reinterpret_cast<const uint8_t*>(odd.data()), odd.size(), "m.gguf"), FormatError);
}

TEST_CASE("MXFP4: a block whose scale makes values non-finite is refused at load, naming the tensor", "[quants][mxfp4]") {
  int codes[32] = {};
  codes[3] = 7;  // 6: finite up to e = 252 (6·2^125), inf from e = 253
  TensorView t;
  t.name = "blk.0.ffn_up_exps.weight";
  t.file = "m.gguf";
  t.blocks = &block_type_info(BlockType::MXFP4);
  t.numel = 32;
  t.nbytes = 17;
  for (int e : {0, 127, 200, 252, 253, 254, 255}) {
    std::vector<uint8_t> block = ggml_block(e, codes);
    t.data = block.data();
    INFO("e = " << e);
    if (e <= 252) {
      CHECK_NOTHROW(require_finite(t));
    } else {
      REQUIRE_THROWS_NAMING(require_finite(t), FormatError, "m.gguf: tensor 'blk.0.ffn_up_exps.weight' has 1 MXFP4 blocks whose scale");
    }
  }
  codes[3] = 1;  // 0.5: e = 254 stays finite (2^126), e = 255 is NaN in OCP MX whatever the codes
  for (int e : {254, 255}) {
    std::vector<uint8_t> block = ggml_block(e, codes);
    t.data = block.data();
    if (e == 254) CHECK_NOTHROW(require_finite(t));
    else CHECK_THROWS_AS(require_finite(t), FormatError);
  }
}

}  // namespace mxfp4_test
