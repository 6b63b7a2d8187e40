// Half-precision conversions to F32. BF16 is the top half of an F32, so the conversion is
// exact; F16 is IEEE 754 binary16 (subnormals, infinities and NaN included).
#pragma once
#include <cstdint>
#include <cstring>

namespace pert {

inline float f32_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return f32_from_bits(sign);  // signed zero
  // Subnormal: shift the mantissa up until its leading one becomes the implicit bit.
  uint32_t e = 113;
  while (!(mant & 0x400)) {
    mant <<= 1;
    --e;
  }
  return f32_from_bits(sign | (e << 23) | ((mant & 0x3ff) << 13));
}

// F32 -> BF16, rounding to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// F32 -> F16, rounding to nearest even; overflow gives infinity, NaN stays NaN.
inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return uint16_t(sign | 0x7e00);       // NaN
  if (u >= 0x477ff000u) return uint16_t(sign | 0x7c00);      // rounds to 65536 or more: infinity
  if (u < 0x38800000u) {                                      // below 2^-14: subnormal or zero
    if (u < 0x33000000u) return sign;                         // below half the smallest subnormal
    const uint32_t mant = (u & 0x7fffff) | 0x800000, shift = 126 - (u >> 23);  // value = mant·2^(e-150)
    uint32_t h = mant >> shift;                               // units of 2^-24
    const uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = ((u >> 13) - (112u << 10));                    // rebias the exponent, keep 10 bits
  const uint32_t rest = u & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;     // a carry into the exponent is right
  return uint16_t(sign | h);
}

}  // namespace pert
