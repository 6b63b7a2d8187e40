#include <cmath>

#include "kernels/fp16.hpp"
#include "test_util.hpp"

// Reference values from the definitions: binary16 has 5 exponent bits (bias 15) and 10 mantissa
// bits; bfloat16 has 8 exponent bits (bias 127) and 7 mantissa bits.
static double f16_reference(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double s = sign ? -1.0 : 1.0;
  if (exp == 0) return s * std::ldexp(mant, -24);
  if (exp == 31) return mant ? NAN : s * INFINITY;
  return s * std::ldexp(1024 + mant, exp - 25);
}

static double bf16_reference(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 7) & 0xff, mant = h & 0x7f;
  const double s = sign ? -1.0 : 1.0;
  if (exp == 0) return s * std::ldexp(mant, -133);
  if (exp == 255) return mant ? NAN : s * INFINITY;
  return s * std::ldexp(128 + mant, exp - 134);
}

// Every bit pattern converts to the reference value (NaN to a NaN, zeros keep their sign).
template <class Convert, class Reference>
void check_all_patterns(Convert convert, Reference reference) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double want = reference(uint16_t(h));
    const float got = convert(uint16_t(h));
    INFO("bits 0x" << std::hex << h);
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got));
    } else {
      REQUIRE(double(got) == want);
      REQUIRE(std::signbit(got) == bool(h & 0x8000));
    }
  }
}

TEST_CASE("F16 to F32 is exact for all 65536 bit patterns", "[fp16]") {
  check_all_patterns(pert::f16_to_f32, f16_reference);
  CHECK(pert::f16_to_f32(0x3c00) == 1.0f);
  CHECK(pert::f16_to_f32(0x7bff) == 65504.0f);
  CHECK(pert::f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
}

TEST_CASE("BF16 to F32 is exact for all 65536 bit patterns", "[fp16]") {
  check_all_patterns(pert::bf16_to_f32, bf16_reference);
  CHECK(pert::bf16_to_f32(0x3f80) == 1.0f);
}
