// Numerical kernels of the forward pass. Row-major throughout; weights are [out][in] as HF
// stores them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/fp16.hpp"
#include "kernels/quants.hpp"

namespace pert {

// y[T][N] = x[T][K] · W[N][K]ᵀ, or y += ... when `accumulate`: GEMV for T = 1, matmul_f32 for T > 1.
void matmul(float* y, const float* x, const float* w, int T, int K, int N, bool accumulate = false);

// A weight matrix [N][K] kept in F32, in BF16 packed for `vdpbf16ps`, or in 8 bits (the
// model's --dtype). BF16: per block of 16 rows, the ⌈K/2⌉ column pairs, each holding the 16
// rows' pairs side by side, [⌈N/16⌉][⌈K/2⌉][16][2], zero-padded (src/kernels/ops_bf16.cpp). Q8: blocks
// of 32 columns, each row's block with one F16 scale d = max|w|/127 and q = round(w/d) in
// [-127, 127] (llama.cpp's Q8_0); per 16 rows and block the quads of 4 columns, each holding the
// 16 rows' quads side by side as bytes q + 128, [⌈N/16⌉][⌈K/32⌉][8][16][4], and the scales
// [⌈N/16⌉][⌈K/32⌉][16], padding q = 0 and d = 0 (src/kernels/ops_q8.cpp). Or GGML's blocks as a GGUF
// file (or --dtype q4_k ...) holds them, row after row, or repacked into panels of 8 rows
// (`blocks`, quants.hpp; its data null when unused): matmul and matmul_shared multiply on them
// with matmul_blocks.
// A Weight carries its layout; the named constructors set it with its data, and every product
// dispatches on it (the other pointers stay null).
struct Weight {
  enum Layout : uint8_t { None, F32, BF16, Q8, Blocks };
  Layout layout = None;
  const float* f32 = nullptr;          // F32: [N][K]
  const uint16_t* bf16 = nullptr;      // BF16: packed (pack_bf16)
  const uint8_t* q8 = nullptr;         // Q8: packed (quantize_q8) ...
  const uint16_t* q8_scales = nullptr; // ... and its scales
  BlockMatrix blocks = {};             // Blocks: GGML's rows or panels

  static Weight of_f32(const float* rows) { Weight w; w.layout = rows ? F32 : None, w.f32 = rows; return w; }
  static Weight of_bf16(const uint16_t* packed) { Weight w; w.layout = packed ? BF16 : None, w.bf16 = packed; return w; }
  static Weight of_q8(const uint8_t* packed, const uint16_t* scales) {
    Weight w;
    w.layout = packed ? Q8 : None, w.q8 = packed, w.q8_scales = scales;
    return w;
  }
  static Weight of_blocks(const BlockMatrix& m) { Weight w; w.layout = m.data ? Blocks : None, w.blocks = m; return w; }
  explicit operator bool() const { return layout != None; }
};
const char* layout_name(Weight::Layout layout);  // "f32", "bf16", "q8", "blocks" (the kernel families)
size_t bf16_packed_size(int N, int K);
size_t weight_bytes(const Weight& w, int N, int K);  // what one product with it reads, as kept
void pack_bf16(uint16_t* packed, const uint16_t* rows, int N, int K);  // rows: [N][K] BF16
inline uint16_t bf16_packed_at(const uint16_t* packed, int K, int n, int k) {
  const size_t pairs = size_t(K + 1) / 2;
  return packed[((size_t(n / 16) * pairs + size_t(k / 2)) * 16 + size_t(n % 16)) * 2 + size_t(k % 2)];
}
// As above. BF16 weights multiply in BF16 with F32 accumulation: x is rounded to BF16 and the
// products of BF16 pairs summed in F32 (AVX-512 BF16 `vdpbf16ps` where the CPU has it, the
// same arithmetic in plain C++ elsewhere), streaming half the bytes of F32.
void matmul(float* y, const float* x, const Weight& w, int T, int K, int N, bool accumulate = false);

// Several products of one x [T][K] (q, k and v; gate and up): y (+)= x · Wᵀ for each. Q8
// quantizes x once and runs them in one parallel region; the other types run them in turn.
struct Projection {
  float* y;         // [T][N]
  const Weight* w;  // [N][K]
  int N;
  bool accumulate = false;
};
void matmul_shared(const float* x, int T, int K, std::initializer_list<Projection> products);
// F32 weights, T > 1: the products' columns in one parallel region (matmul and matmul_shared use it).
void matmul_f32(const float* x, int T, int K, const Projection* products, size_t count);
// One thread's F32 GEMMs, for callers that split the work themselves (matmul_f32, attention):
// y[T][N] (+)= alpha · x[T][K] · W[N][K]ᵀ (gemm_nt), y (+)= x · W[K][N] (gemm_nn); the rows of
// x, y and (gemm_nn) W are ldx, ldy, ldw apart. AVX-512: pert's own kernel; else OpenBLAS's sgemm.
void gemm_nt(float* y, int ldy, const float* x, int ldx, int T, int K, const float* w, int N, float alpha,
             bool accumulate);
void gemm_nn(float* y, int ldy, const float* x, int ldx, int T, int K, const float* w, int ldw, int N, bool accumulate);

// Attention's small products over rows [n][K] held in cache: y[j] = rows[j]·x (dot_rows), and
// acc[k] += Σ_j p[j]·rows[j][k] (add_weighted_rows).
void dot_rows(float* y, const float* rows, const float* x, int n, int K);
void add_weighted_rows(float* acc, const float* p, const float* rows, int n, int K);

size_t q8_packed_size(int N, int K);  // bytes
size_t q8_scales_size(int N, int K);  // scales
void quantize_q8(uint8_t* packed, uint16_t* scales, const float* rows, int N, int K);  // rows: [N][K] F32
// One block of n <= 32 values: returns d = max|v| / 127 and writes q = round(v / d) in
// [-127, 127] to q[32] (zeros past n). What the weights, x and a q8 KV cache are made of.
float quantize_q8_block(const float* v, int n, int8_t* q);
float q8_value_at(const uint8_t* packed, const uint16_t* scales, int K, int n, int k);  // d · q
// GGML's Q8_0 rows (a GGUF file's: per 32 values an F16 scale and 32 int8, rows row_stride bytes
// apart, K a multiple of 32) into the packed layout: the same numbers, which the Q8 kernels
// multiply faster than the block kernels (their panels hold 16 rows side by side).
void repack_q8_0(uint8_t* packed, uint16_t* scales, const uint8_t* rows, size_t row_stride, int N, int K);
// Q8 weights: x is quantized the same way (per row, blocks of 32, its own scales) and each
// block's products summed exactly in int32, then scaled: AVX-512 VNNI `vpdpbusd`, AVX2, or plain
// C++, whichever the CPU has first; select_q8_kernel picks one of q8_kernels() (tests compare them).
void matmul_q8(float* y, const float* x, const Weight& w, int T, int K, int N, bool accumulate = false);
void matmul_q8(const float* x, int T, int K, const Projection* products, size_t count);  // count <= 4
std::vector<std::string> q8_kernels();
const std::string& q8_kernel();
void select_q8_kernel(const std::string& name);  // throws std::invalid_argument when not available

// BF16 <-> F32: the exact widening (f32_to_bf16, rounding to nearest even: fp16.hpp).
inline float bf16_to_f32_value(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

// out[T][d] = x / sqrt(mean(x²) + eps) * weight, row by row.
void rmsnorm(float* out, const float* x, const float* weight, int T, int d, float eps);

// out[T][d] = (x − mean(x)) / sqrt(var(x) + eps) * weight, row by row (LayerNorm without a bias: Cohere).
void layernorm(float* out, const float* x, const float* weight, int T, int d, float eps);

// gate[i] = silu(gate[i]) * up[i]  (SwiGLU).
void swiglu(float* gate, const float* up, size_t n);
// gate[i] = gelu_tanh(gate[i]) * up[i]  (GeGLU, Gemma): gelu_tanh(g) = g/2·(1 + tanh(√(2/π)(g + 0.044715g³))).
void geglu_tanh(float* gate, const float* up, size_t n);
// x[i] = cap · tanh(x[i] / cap)  (Gemma 2's soft-capping of scores and logits).
void softcap(float* x, size_t n, float cap);

// y[t][i] += bias[i] for t < T, i < N (the projections' biases).
void add_rows(float* y, const float* bias, int T, int N);

// In place over the first n entries: softmax with the maximum subtracted first.
void softmax(float* x, int n);
// softmax's first half: x[i] = e^(x[i] − max) over the first n entries, and their float sum in
// one fixed order (16 running sums, i mod 16, then joined pairwise), so every caller gets the same
// sum bit for bit whatever vector width the compiler gives its loop. With `moments` (16 zeroed
// doubles) each e·(x[i] − max) is summed there too, by the same lanes (the attention statistics'
// entropy; a masked entry, e = 0, adds nothing).
float exp_and_sum(float* x, int n, float max, double* moments = nullptr);

// e^x for x <= 0 within ~2 ulp (0 below -87), branch-free so loops over it vectorize: the
// exponentials of attention and perplexity cost more than their matrix products otherwise.
inline float exp_nonpositive(float x0) {
  const float x = x0 > -87.0f ? x0 : -87.0f;  // NaN too, so the conversion below stays defined
  const float n = __builtin_rintf(x * 1.44269504f);            // x = n·ln2 + r, |r| <= ln2/2
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 in two parts (Cephes)
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int bits = (int(n) + 127) << 23;  // 2^n, n in [-126, 0]
  float scale;
  __builtin_memcpy(&scale, &bits, 4);
  return x0 != x0 ? x0 : x0 < -87.0f ? 0.0f : p * scale;  // NaN stays NaN; e^-inf = 0
}

// tanh from one exp_nonpositive: tanh|x| = (1 − e^−2|x|) / (1 + e^−2|x|), within ~1e-7 absolute.
inline float tanh_float(float x) {
  const float a = x < 0.0f ? -x : x, e = exp_nonpositive(-2.0f * a), t = (1.0f - e) / (1.0f + e);
  return x < 0.0f ? -t : t;
}

}  // namespace pert
