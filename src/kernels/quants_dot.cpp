// Matrix products on GGML's blocks, as llama.cpp does them: each row of x is quantized once to
// int8 (per 32 values for the legacy types, like GGML's Q8_0/Q8_1; per 256 for the K-quants, like
// its Q8_K, with int16 sums per 16), and each block's products are summed exactly in int32, then
// scaled in F32. A legacy block b, with codes c (Q4_0/Q5_0 biased by o = 8/16):
//   Σ_k w·x = dw·dx·(Σ c·qx − o·Σ qx)          (Q8_0, Q4_0, Q5_0)
//           = dw·dx·Σ c·qx + m·dx·Σ qx           (Q4_1, Q5_1: w = dw·c + m)
//           = dw·dx·Σ c·qx                       (MXFP4: c the doubled E2M1 value, dw half the E8M0 scale)
// a Q4_K/Q5_K super-block: d·dx·Σ_j s_j·Σ c·qx − dmin·dx·Σ_j m_j·Σ_j qx (x's sums per 16 give the
// second), a Q6_K one: d·dx·(Σ_j s_j·Σ c·qx − 32·Σ_j s_j·Σ_j qx). F32/F16/BF16 weights: F32 dot
// products, widened on the fly.
// Work: decoding (T = 1) splits the rows of W over the threads, kRowsPerItem at a time, each
// thread streaming its own run of W once; prefill makes items of kRowsPerItem rows × kChunk rows
// of x, and in an item each weight row (a KiB or so) is read once and then multiplied from L1 by
// the chunk's rows of x, kMaxRows at a time, which the kernels share the unpacking of codes over.
// Kernels: "avx2" (src/kernels/quants_avx2.cpp) where the CPU has it, else "plain" (here), which gives
// the same integers and the same float result (quants_blocks.hpp: Lanes). Matrices repacked
// into panels of 8 rows (quants_panels.cpp) run the panel kernels, 8 rows a call, with the same
// float again; "avx512vnni" runs two panels a call (quants_panels_avx512.cpp), its rows and any
// odd panel on avx2's kernels; "avxvnni" its panels one at a time (quants_panels_avxvnni.cpp),
// its rows on avx2's.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/amx_blocks.hpp"
#include "kernels/ops.hpp"
#include "kernels/parallel.hpp"
#include "kernels/quants.hpp"
#include "kernels/quants_blocks.hpp"
#include "pert/error.hpp"
#include "pert/kernels.hpp"

namespace pert {

using namespace quants;

namespace {

// ---- plain kernels ----

// The codes of a legacy block (Q4_1/Q5_1: 0..31; Q4_0/Q5_0 before their bias; Q8_0 signed;
// MXFP4 its doubled E2M1 values, −12..12).
template <BlockType Type>
void legacy_codes(const uint8_t* b, int* c) {
  if (Type == BlockType::Q8_0) {
    for (int i = 0; i < QK; ++i) c[i] = int8_t(b[2 + i]);
    return;
  }
  if (Type == BlockType::MXFP4) {
    for (int i = 0; i < QK / 2; ++i) c[i] = kMxfp4Doubled[b[1 + i] & 15], c[i + QK / 2] = kMxfp4Doubled[b[1 + i] >> 4];
    return;
  }
  constexpr bool five = Type == BlockType::Q5_0 || Type == BlockType::Q5_1;
  constexpr bool affine = Type == BlockType::Q4_1 || Type == BlockType::Q5_1;
  const uint8_t* qs = b + 2 + (affine ? 2 : 0) + (five ? 4 : 0);
  const uint32_t qh = five ? load_u32(b + (affine ? 4 : 2)) : 0;
  for (int i = 0; i < QK / 2; ++i) {
    c[i] = (qs[i] & 15) | int(qh >> i & 1) << 4;
    c[i + QK / 2] = (qs[i] >> 4) | int(qh >> (i + QK / 2) & 1) << 4;
  }
}

template <BlockType Type, int R>
void legacy_plain(const uint8_t* w, const QuantizedX& x, int t0, float* out) {
  constexpr bool affine = Type == BlockType::Q4_1 || Type == BlockType::Q5_1;
  constexpr int bias = Type == BlockType::Q4_0 ? 8 : Type == BlockType::Q5_0 ? 16 : 0;
  const size_t bytes = block_type_info(Type).block_bytes;
  const int nb = x.K / QK;
  Lanes lanes[R];
  int c[QK];
  for (int b = 0; b < nb; ++b, w += bytes) {
    legacy_codes<Type>(w, c);
    const float dw = Type == BlockType::MXFP4 ? mxfp4_half_scale(w[0]) : load_f16(w), m = affine ? load_f16(w + 2) : 0.0f;
    for (int r = 0; r < R; ++r) {
      const size_t xb = size_t(t0 + r) * nb + size_t(b);
      const int8_t* qx = x.q + xb * QK;
      int32_t dot = 0;
      for (int i = 0; i < QK; ++i) dot += c[i] * qx[i];
      lanes[r].add(b, float(dot - bias * x.sum[xb]), dw * x.d[xb]);
      if (affine) lanes[r].add(b, float(x.sum[xb]), m * x.d[xb]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = lanes[r].sum();
}

template <BlockType Type, int R>
void k_plain(const uint8_t* w, const QuantizedX& x, int t0, float* out) {
  const size_t bytes = block_type_info(Type).block_bytes;
  const int nb = x.K / QK_K;
  Lanes lanes[R];
  int c[QK_K];
  int scales[16];  // per 32 (Q4_K, Q5_K) or 16 (Q6_K)
  int mins[8];
  for (int s = 0; s < nb; ++s, w += bytes) {
    float d, dmin = 0.0f;
    if (Type == BlockType::Q6_K) {
      d = load_f16(w + 208);
      for (int j = 0; j < 16; ++j) scales[j] = int8_t(w[192 + j]);
      for (int h = 0; h < 2; ++h)
        for (int p = 0; p < 4; ++p)
          for (int l = 0; l < 32; ++l)
            c[128 * h + 32 * p + l] =
                ((w[64 * h + l + 32 * (p % 2)] >> (4 * (p / 2))) & 15) | ((w[128 + 32 * h + l] >> (2 * p)) & 3) << 4;
    } else {
      d = load_f16(w), dmin = load_f16(w + 2);
      uint8_t sc[8], mn[8];
      scale_min_k4(w + 4, sc, mn);
      for (int j = 0; j < 8; ++j) scales[j] = sc[j], mins[j] = mn[j];
      const bool five = Type == BlockType::Q5_K;
      const uint8_t *qh = w + 16, *qs = w + (five ? 48 : 16);
      for (int j = 0; j < 8; ++j)
        for (int l = 0; l < 32; ++l)
          c[32 * j + l] = (qs[32 * (j / 2) + l] >> (4 * (j % 2)) & 15) | (five ? (qh[l] >> j & 1) << 4 : 0);
    }
    for (int r = 0; r < R; ++r) {
      const size_t xs = size_t(t0 + r) * nb + size_t(s);
      const int8_t* qx = x.q + xs * QK_K;
      const int16_t* bsum = x.bsum + xs * 16;
      const float dx = x.d[xs];
      if (Type == BlockType::Q6_K) {
        int32_t dot = 0, offset = 0;
        for (int j = 0; j < 16; ++j) {
          int32_t part = 0;
          for (int i = 16 * j; i < 16 * j + 16; ++i) part += c[i] * qx[i];
          dot += scales[j] * part, offset += scales[j] * bsum[j];
        }
        lanes[r].add(s, float(dot - 32 * offset), d * dx);
      } else {
        int32_t dot = 0, offset = 0;
        for (int j = 0; j < 8; ++j) {
          int32_t part = 0;
          for (int i = 32 * j; i < 32 * j + 32; ++i) part += c[i] * qx[i];
          dot += scales[j] * part, offset += mins[j] * (bsum[2 * j] + bsum[2 * j + 1]);
        }
        lanes[r].add(s, float(dot), d * dx);
        lanes[r].add(s, float(-offset), dmin * dx);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = lanes[r].sum();
}

template <BlockType Type>
inline float float_weight(const uint8_t* w, int k) {
  if (Type == BlockType::F16) return load_f16(w + 2 * size_t(k));
  if (Type == BlockType::BF16) return bf16_to_f32(load_u16(w + 2 * size_t(k)));
  float v;
  std::memcpy(&v, w + 4 * size_t(k), 4);
  return v;
}

// F32 sums in 8 interleaved parts (independent additions), then the parts in a tree.
template <BlockType Type, int R>
void float_plain(const uint8_t* w, const QuantizedX& x, int t0, float* out) {
  float acc[R][8] = {};
  const int K = x.K;
  for (int k = 0; k < K; ++k) {
    const float wk = float_weight<Type>(w, k);
    for (int r = 0; r < R; ++r) acc[r][k % 8] += wk * x.f[size_t(t0 + r) * K + size_t(k)];
  }
  for (int r = 0; r < R; ++r)
    out[r] = ((acc[r][0] + acc[r][1]) + (acc[r][2] + acc[r][3])) + ((acc[r][4] + acc[r][5]) + (acc[r][6] + acc[r][7]));
}

template <template <BlockType, int> class K, BlockType Type>
KernelSet kernel_set() {
  return {{K<Type, 1>::run, K<Type, 2>::run, K<Type, 3>::run, K<Type, 4>::run}};
}
template <BlockType T, int R> struct Legacy { static void run(const uint8_t* w, const QuantizedX& x, int t0, float* o) { legacy_plain<T, R>(w, x, t0, o); } };
template <BlockType T, int R> struct KQuant { static void run(const uint8_t* w, const QuantizedX& x, int t0, float* o) { k_plain<T, R>(w, x, t0, o); } };
template <BlockType T, int R> struct Float { static void run(const uint8_t* w, const QuantizedX& x, int t0, float* o) { float_plain<T, R>(w, x, t0, o); } };

// ---- x quantized ----

bool is_k_quant(BlockType t) { return block_type_info(t).family == BlockFamily::KQuant; }
bool is_float(BlockType t) { return block_type_info(t).family == BlockFamily::Float; }

// This thread's buffers (grown once, then reused) for x in both formats.
struct XBuffers {
  std::vector<int8_t> q32, q256;  // [T][K]
  std::vector<float> d32, d256;   // [T][K/32], [T][K/256]
  std::vector<int32_t> sum32;     // [T][K/32] (legacy)
  std::vector<int16_t> bsum16;    // [T][K/16] (K-quants)
  std::vector<int16_t> bsum32;    // [T][K/32] (K-quants' panels)

  void fill_legacy(const float* x, int T, int K) {
    const int nb = K / QK;
    q32.resize(size_t(T) * K), d32.resize(size_t(T) * nb), sum32.resize(size_t(T) * nb);
    int8_t* const q = q32.data();  // the caller's: thread_local names another inside the loop
    float* const d = d32.data();
    int32_t* const sum = sum32.data();
    parallel_for_if(size_t(T) * K > 65536, T * nb, [&](int at) {
      int8_t* qb = q + size_t(at) * QK;
      d[at] = quantize_q8_block(x + size_t(at) * QK, QK, qb);
      int32_t s = 0;
      for (int i = 0; i < QK; ++i) s += qb[i];
      sum[at] = s;
    });
  }

  // Per 256: d = max|x| / 127, q = round(x / d), and the sums of q per 16.
  void fill_k(const float* x, int T, int K) {
    const int nb = K / QK_K;
    q256.resize(size_t(T) * K), d256.resize(size_t(T) * nb), bsum16.resize(size_t(T) * K / 16);
    bsum32.resize(size_t(T) * K / 32);
    int8_t* const q = q256.data();
    float* const d = d256.data();
    int16_t* const bsum = bsum16.data();
    int16_t* const sum32 = bsum32.data();
    parallel_for_if(size_t(T) * K > 65536, T * nb, [&](int at) {
      const float* v = x + size_t(at) * QK_K;
      int8_t* qb = q + size_t(at) * QK_K;
      float amax = 0.0f;
      for (int i = 0; i < QK_K; ++i) amax = std::max(amax, std::fabs(v[i]));
      d[at] = amax / 127.0f;
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int i = 0; i < QK_K; ++i) qb[i] = int8_t(std::lrintf(v[i] * inv));
      for (int j = 0; j < 16; ++j) {
        int s = 0;
        for (int i = 16 * j; i < 16 * j + 16; ++i) s += qb[i];
        bsum[size_t(at) * 16 + size_t(j)] = int16_t(s);
      }
      for (int j = 0; j < 8; ++j)
        sum32[size_t(at) * 8 + size_t(j)] = int16_t(bsum[size_t(at) * 16 + size_t(2 * j)] + bsum[size_t(at) * 16 + size_t(2 * j + 1)]);
    });
  }
};

// ---- kernel selection ----

struct Selection {
  std::string name;
  KernelSet sets[64];        // by ggml_type number; a family's gaps filled with plain
  KernelSet panel_sets[64];  // the same for panels (quants_blocks.hpp: kPanelRows)
  PairKernelSet pair_sets[64];  // two panels a call, where the family has them (else null)
};
Selection make_selection(const std::string& name) {
  Selection s{name, {}, {}, {}};
  for (const BlockType t : {BlockType::F32, BlockType::F16, BlockType::BF16, BlockType::Q8_0, BlockType::Q4_0,
                            BlockType::Q4_1, BlockType::Q5_0, BlockType::Q5_1, BlockType::Q4_K, BlockType::Q5_K,
                            BlockType::Q6_K, BlockType::MXFP4}) {
    KernelSet& set = s.sets[int(t)];
    KernelSet& panels = s.panel_sets[int(t)];
    set = plain_kernels(int(t));
    panels = plain_panel_kernels(int(t));
#if defined(__x86_64__)
    if (name == "avx2" || name == "avx512vnni" || name == "avxvnni" || name == "amx") {
      const KernelSet fast = avx2_kernels(int(t));
      const KernelSet fast_panels = name == "avxvnni" ? avxvnni_panel_kernels(int(t)) : avx2_panel_kernels(int(t));
      for (int r = 0; r < kMaxRows; ++r) {
        if (fast.rows[r]) set.rows[r] = fast.rows[r];
        if (fast_panels.rows[r]) panels.rows[r] = fast_panels.rows[r];
      }
    }
    if (name == "avx512vnni" || name == "amx") s.pair_sets[int(t)] = avx512vnni_panel_pair_kernels(int(t));  // amx: decoding, rows
#endif
  }
  return s;
}
Selection& selected() {
  static Selection s = make_selection(initial_kernel(block_kernels()));
  return s;
}

constexpr int kRowsPerItem = 16;  // weight rows per work item
constexpr int kChunk = 64;        // rows of x per work item (prefill)
static_assert(kRowsPerItem % kPanelRows == 0, "an item holds whole panels");
constexpr size_t kMaxProducts = 4;

}  // namespace

namespace quants {
KernelSet plain_kernels(int ggml_type) {
  switch (BlockType(ggml_type)) {
    case BlockType::F32: return kernel_set<Float, BlockType::F32>();
    case BlockType::F16: return kernel_set<Float, BlockType::F16>();
    case BlockType::BF16: return kernel_set<Float, BlockType::BF16>();
    case BlockType::Q8_0: return kernel_set<Legacy, BlockType::Q8_0>();
    case BlockType::Q4_0: return kernel_set<Legacy, BlockType::Q4_0>();
    case BlockType::Q4_1: return kernel_set<Legacy, BlockType::Q4_1>();
    case BlockType::Q5_0: return kernel_set<Legacy, BlockType::Q5_0>();
    case BlockType::Q5_1: return kernel_set<Legacy, BlockType::Q5_1>();
    case BlockType::Q4_K: return kernel_set<KQuant, BlockType::Q4_K>();
    case BlockType::Q5_K: return kernel_set<KQuant, BlockType::Q5_K>();
    case BlockType::Q6_K: return kernel_set<KQuant, BlockType::Q6_K>();
    case BlockType::MXFP4: return kernel_set<Legacy, BlockType::MXFP4>();
  }
  return {};
}
}  // namespace quants

std::vector<std::string> block_kernels() {
  std::vector<std::string> names;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (cpu_supports("amx")) names.push_back("amx");  // prefill on panels on tiles (amx_blocks.cpp)
  if (cpu_supports("avx512vnni")) names.push_back("avx512vnni");
  if (cpu_supports("avxvnni")) names.push_back("avxvnni");
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    names.push_back("avx2");
#endif
  names.push_back("plain");
  return names;
}

const std::string& block_kernel() { return selected().name; }

void select_block_kernel(const std::string& name) {
  const std::vector<std::string> have = block_kernels();
  if (std::find(have.begin(), have.end(), name) == have.end())
    throw std::invalid_argument("block kernel '" + name + "' is not available on this CPU");
  selected() = make_selection(name);
}

void matmul_blocks(const float* x, int T, int K, const BlockProduct* products, size_t count) {
  if (count > kMaxProducts) throw std::invalid_argument("matmul_blocks: more products than kMaxProducts");
  bool legacy = false, k_quant = false, all_panels = true;
  for (size_t i = 0; i < count; ++i) {
    const BlockMatrix& w = *products[i].w;
    if (w.row_stride < (w.panels ? panel_row_bytes(w.type, K) : block_row_bytes(w.type, K)))  // throws for a K that is not whole blocks
      throw Error(std::string("matmul_blocks: rows of ") + block_type_info(w.type).name + " " +
                  std::to_string(w.row_stride) + " bytes apart overlap");
    if (w.panels && products[i].N % kPanelRows != 0)
      throw Error("matmul_blocks: " + std::to_string(products[i].N) + " rows are not whole panels of 8");
    k_quant = k_quant || is_k_quant(w.type);
    all_panels = all_panels && w.panels;
    legacy = legacy || !(is_k_quant(w.type) || is_float(w.type));
  }
  if (T <= 0 || K <= 0) return;
  static thread_local XBuffers buffers;
  if (legacy) buffers.fill_legacy(x, T, K);
  if (k_quant) buffers.fill_k(x, T, K);
  const QuantizedX x_legacy{buffers.q32.data(), buffers.d32.data(), buffers.sum32.data(), nullptr, nullptr, x, K};
  const QuantizedX x_k{buffers.q256.data(), buffers.d256.data(), nullptr, buffers.bsum16.data(), buffers.bsum32.data(), x, K};
  const Selection& sel = selected();
  if (T > 1 && all_panels && sel.name == "amx")
    return amx_matmul_blocks(TileImpl::instructions, x_legacy, x_k, T, products, count);

  const int chunks = (T + kChunk - 1) / kChunk;
  int first_item[kMaxProducts + 1] = {};  // product i's items: [first_item[i], first_item[i + 1])
  size_t work = 0;
  for (size_t i = 0; i < count; ++i) {
    first_item[i + 1] = first_item[i] + (products[i].N + kRowsPerItem - 1) / kRowsPerItem * chunks;
    work += size_t(T) * size_t(std::max(products[i].N, 0)) * size_t(K);
  }
  parallel_for_if(work > 32768, first_item[count], [&](int item) {
    size_t i = 0;
    while (item >= first_item[i + 1]) ++i;
    const BlockProduct& p = products[i];
    const int local = item - first_item[i], n0 = local / chunks * kRowsPerItem, c = local % chunks;
    const int n1 = std::min(p.N, n0 + kRowsPerItem), t_end = std::min(T, (c + 1) * kChunk);
    const QuantizedX& xq = is_k_quant(p.w->type) ? x_k : x_legacy;
    // A kernel call covers one weight row, one panel of kPanelRows, or two panels where the path
    // has pair kernels and the chunk has rows of x to reuse them on (kRowsPerItem is whole
    // panels). Decoding streams one panel at a time: two panels' streams at once read slower
    // (Zen 5: stories110M Q4_K_M tg128 about 350 t/s against 550 one panel at a time).
    const KernelSet& set = (p.w->panels ? sel.panel_sets : sel.sets)[int(p.w->type)];
    const PairKernelSet& pair = sel.pair_sets[int(p.w->type)];
    const bool pairs = p.w->panels && pair.rows[0] && t_end - c * kChunk >= 2;
    float out[kMaxRows * 2 * kPanelRows];
    for (int n = n0, width = 1; n < n1; n += width) {
      const bool two = pairs && n + 2 * kPanelRows <= n1;
      width = two ? 2 * kPanelRows : p.w->panels ? kPanelRows : 1;
      const uint8_t* w = p.w->data + size_t(n) * p.w->row_stride;
      for (int t0 = c * kChunk; t0 < t_end; t0 += kMaxRows) {
        const int rows = std::min(kMaxRows, t_end - t0);
        if (two) pair.rows[rows - 1](w, w + kPanelRows * p.w->row_stride, xq, t0, out);
        else set.rows[rows - 1](w, xq, t0, out);
        for (int r = 0; r < rows; ++r)
          for (int j = 0; j < width; ++j) {
            float& y = p.y[size_t(t0 + r) * p.N + size_t(n + j)];
            y = p.accumulate ? y + out[r * width + j] : out[r * width + j];
          }
      }
    }
  });
}

void matmul_blocks(float* y, const float* x, const BlockMatrix& w, int T, int K, int N, bool accumulate) {
  const BlockProduct product{y, &w, N, accumulate};
  matmul_blocks(x, T, K, &product, 1);
}

}  // namespace pert
