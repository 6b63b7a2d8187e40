// FP8 E4M3 ("float8_e4m3fn" in PyTorch, OCP 8-bit floating point): the element type of the
// block-scaled FP8 checkpoints (DeepSeek-V3/R1, Qwen3-*-FP8), dequantized at load.
//
// Bits S.EEEE.MMM, exponent bias 7. A non-zero exponent e gives (-1)^S · (1 + M/8) · 2^(e-7);
// e = 0 gives the subnormals (-1)^S · M/8 · 2^-6 (and ±0). There are no infinities: the top
// exponent holds values up to ±448 (S.1111.110), and only S.1111.111 is NaN.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>

namespace pert {

inline bool e4m3_is_nan(uint8_t code) { return (code & 0x7f) == 0x7f; }

// The largest finite E4M3 magnitude (S.1111.110).
inline constexpr float kE4M3Max = 448.0f;

// Every E4M3 value is a float exactly: F32's exponent is the code's rebiased (+120), its mantissa
// the code's three bits at the top; subnormals are M · 2^-9.
inline float e4m3_to_f32(uint8_t code) {
  if (e4m3_is_nan(code)) return std::numeric_limits<float>::quiet_NaN();
  const uint32_t sign = uint32_t(code >> 7) << 31, exponent = (code >> 3) & 0xf, mantissa = code & 0x7;
  if (exponent == 0) {
    const float magnitude = float(mantissa) * 0x1p-9f;
    return sign ? -magnitude : magnitude;
  }
  const uint32_t bits = sign | ((exponent + 120) << 23) | (mantissa << 20);
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

// The 256 values, built once (a load converts one table lookup per weight).
inline const std::array<float, 256>& e4m3_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int code = 0; code < 256; ++code) t[size_t(code)] = e4m3_to_f32(uint8_t(code));
    return t;
  }();
  return table;
}

}  // namespace pert
