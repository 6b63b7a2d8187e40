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

}  // namespace pert
