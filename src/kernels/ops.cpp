// Element-wise ops and softmax (the matrix products: ops_*.cpp; attention: src/attention/).
#include "kernels/ops.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/parallel.hpp"

namespace pert {

void rmsnorm(float* out, const float* x, const float* weight, int T, int d, float eps) {
  parallel_for_if(T > 16, T, [&](int t) {
    const float* xt = x + size_t(t) * d;
    float* ot = out + size_t(t) * d;
    double ss = 0.0;
    for (int i = 0; i < d; ++i) ss += double(xt[i]) * xt[i];
    const float inv = float(1.0 / std::sqrt(ss / d + eps));
    for (int i = 0; i < d; ++i) ot[i] = xt[i] * inv * weight[i];
  });
}

void layernorm(float* out, const float* x, const float* weight, int T, int d, float eps) {
  parallel_for_if(T > 16, T, [&](int t) {
    const float* xt = x + size_t(t) * d;
    float* ot = out + size_t(t) * d;
    double sum = 0.0;
    for (int i = 0; i < d; ++i) sum += xt[i];
    const double mean = sum / d;
    double ss = 0.0;
    for (int i = 0; i < d; ++i) ss += (xt[i] - mean) * (xt[i] - mean);
    const double inv = 1.0 / std::sqrt(ss / d + eps);  // (centred in double: rows far from 0 keep their digits)
    for (int i = 0; i < d; ++i) ot[i] = float((xt[i] - mean) * inv) * weight[i];
  });
}

// gate[i] = act(gate[i]) · up[i], in chunks over the threads when n is large.
template <class Act>
void gated(float* gate, const float* up, size_t n, Act act) {
  constexpr size_t kChunk = 16384;
  parallel_for_if(n > 65536, (n + kChunk - 1) / kChunk, [&](size_t c) {
    const size_t end = std::min(n, (c + 1) * kChunk);
#pragma omp simd
    for (size_t i = c * kChunk; i < end; ++i) gate[i] = act(gate[i]) * up[i];
  });
}

void geglu_tanh(float* gate, const float* up, size_t n) {
  gated(gate, up, n, [](float g) { return 0.5f * g * (1.0f + tanh_float(0.7978845608f * (g + 0.044715f * g * g * g))); });
}

void softcap(float* x, size_t n, float cap) {
  const float inv = 1.0f / cap;
#pragma omp simd
  for (size_t i = 0; i < n; ++i) x[i] = cap * tanh_float(x[i] * inv);
}

void swiglu(float* gate, const float* up, size_t n) {
  // silu(g) = g / (1 + e^-g), from e = e^-|g| <= 1 so one vectorizable exp serves both signs.
  gated(gate, up, n, [](float g) {
    const float e = exp_nonpositive(g < 0.0f ? g : -g);
    return (g < 0.0f ? g * e : g) / (1.0f + e);
  });
}

void add_rows(float* y, const float* bias, int T, int N) {
  for (int t = 0; t < T; ++t) {
    float* row = y + size_t(t) * N;
#pragma omp simd
    for (int i = 0; i < N; ++i) row[i] += bias[i];
  }
}

float exp_and_sum(float* x, int n, float max, double* moments) {
  constexpr int L = 16;
  float lane[L] = {};
  // Entry i goes to lane i mod 16 in both loops; only the moments differ.
  if (moments) {
    for (int i0 = 0; i0 < n; i0 += L)
      for (int l = 0; l < L && i0 + l < n; ++l) {
        const float d = x[i0 + l] - max, e = exp_nonpositive(d);
        x[i0 + l] = e;
        lane[l] += e;
        moments[l] += e > 0.0f ? double(e) * double(d) : 0.0;  // (masked: e = 0 and d = −inf)
      }
  } else {
    int i0 = 0;
    for (; i0 + L <= n; i0 += L)
      for (int l = 0; l < L; ++l) {  // (vectorized: one lane each)
        const float e = exp_nonpositive(x[i0 + l] - max);
        x[i0 + l] = e;
        lane[l] += e;
      }
    for (int l = 0; i0 + l < n; ++l) {
      const float e = exp_nonpositive(x[i0 + l] - max);
      x[i0 + l] = e;
      lane[l] += e;
    }
  }
  for (int w = L / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
  return lane[0];
}

void softmax(float* x, int n) {
  if (n <= 0) return;
  const float max = *std::max_element(x, x + n);
  const float sum = exp_and_sum(x, n, max);
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace pert
