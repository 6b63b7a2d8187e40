// Sums across a register's lanes, four registers at once, for the kernels that end a dot product
// in registers (decoding's gemv, the KV cache's products): with attention's short rows (64 or 128
// values) a sum lane by lane took more instructions than the products themselves. Each function
// carries its own target, so it inlines into any path compiled for that instruction set or more.
#pragma once
#if defined(__x86_64__)
#include <immintrin.h>

namespace pert {

// out[i] = Σ lanes of v[i], i < 4: the halves added, then three horizontal adds.
__attribute__((target("avx2"))) inline void sum_lanes4(const __m256 v[4], float out[4]) {
  __m128 h[4];
  for (int i = 0; i < 4; ++i) h[i] = _mm_add_ps(_mm256_castps256_ps128(v[i]), _mm256_extractf128_ps(v[i], 1));
  _mm_storeu_ps(out, _mm_hadd_ps(_mm_hadd_ps(h[0], h[1]), _mm_hadd_ps(h[2], h[3])));
}

// The same for 16 lanes: the upper half swapped down and added first (a masked shuffle: GCC 12
// warns of the unmasked forms' undefined pass-through).
__attribute__((target("avx512f"))) inline void sum_lanes4(const __m512 v[4], float out[4]) {
  __m256 halves[4];
  for (int i = 0; i < 4; ++i)
    halves[i] = _mm512_castps512_ps256(_mm512_add_ps(v[i], _mm512_mask_shuffle_f32x4(v[i], 0xffff, v[i], v[i], 0x4e)));
  sum_lanes4(halves, out);
}

}  // namespace pert
#endif
