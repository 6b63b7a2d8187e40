// The F32 family's table (src/kernels/ops_f32.cpp): what its paths run, and what the BF16
// products borrow from it (the panel GEMM, for weights widened to F32).
#pragma once
#include <algorithm>
#include <cstddef>

#include "kernels/ops.hpp"

namespace pert {

// How decoding reads the rows it streams (kernels.hpp: f32_prefetch): four rows side by side with
// a hint two steps ahead (none, T0, NTA), or one row after another with an L2 prefetch (stream).
enum class Prefetch { None, T0, Nta, Stream };

struct F32Kernels {
  // y[n] (+)= W[n]·x for rows [n0, n1) of W [N][K].
  void (*gemv)(float* y, const float* w, const float* x, int n0, int n1, int K, bool accumulate, Prefetch hint);
  // acc[k] += Σ_j p[j]·rows[j][k], rows [n][K].
  void (*add_weighted_rows)(float* acc, const float* p, const float* rows, int n, int K);
  // ops.hpp's gemm_nt and gemm_nn.
  void (*gemm_nt)(float* y, int ldy, const float* x, int ldx, int T, int K, const float* w, int N, float alpha,
                  bool accumulate);
  void (*gemm_nn)(float* y, int ldy, const float* x, int ldx, int T, int K, const float* w, int ldw, int N,
                  bool accumulate);
  // y[T][cols] (+)= x[T][K] · W, W packed as panels [⌈cols/16⌉][K][16] (16 columns side by side
  // for each k): pert's own GEMM (avx512, avx2), null on the plain path.
  void (*gemm_packed)(float* y, int ldy, const float* x, int ldx, int T, const float* panels, int K, int cols,
                      bool accumulate);
};
const F32Kernels& f32_kernels_table();  // the selected path's
#if defined(__x86_64__)
F32Kernels f32_avx512_kernels();  // src/kernels/ops_f32_avx512.cpp
#endif

inline int total_rows(const Projection* products, size_t count) {
  int total = 0;
  for (size_t i = 0; i < count; ++i) total += products[i].N;
  return total;
}

// Thread `me` of `threads`' share of the products' rows (W's, y's columns): each product cut into
// units of `unit` rows (its last one short), the units of all laid end to end and split into
// equal runs, f(product, n0, n1) for each part of its run (n0 a multiple of unit).
template <class F>
void thread_share(const Projection* products, size_t count, int unit, int threads, int me, F f) {
  int total = 0;  // units
  for (size_t i = 0; i < count; ++i) total += (products[i].N + unit - 1) / unit;
  const int slice = (total + threads - 1) / threads;
  const int lo = std::min(total, me * slice), hi = std::min(total, lo + slice);
  int base = 0;  // the first unit of product i
  for (size_t i = 0; i < count; ++i) {
    const int units = (products[i].N + unit - 1) / unit;
    const int u0 = std::max(lo, base) - base, u1 = std::min(hi, base + units) - base;
    if (u1 > u0) f(products[i], u0 * unit, std::min(products[i].N, u1 * unit));
    base += units;
  }
}

}  // namespace pert
