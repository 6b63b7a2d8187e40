// The compute roof's probes (pert/compute_roof.hpp): per instruction, a loop of it on independent
// accumulators held in registers (16 for AVX-512, 12 for AVX2: more than latency × ports, so
// the loop runs at the instruction's throughput), the results summed once so that none is dead.
// Each probe is compiled for its own instructions (`target` attribute) and run only where the
// CPU has them.
#include "pert/compute_roof.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "pert/kernels.hpp"

#if defined(__x86_64__)
#include "kernels/amx_tiles.hpp"
#endif

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace pert {

namespace {

constexpr int64_t kSteps = int64_t(1) << 20;  // a pass: kSteps × accumulators instructions per thread
// A tile product takes 16 cycles or more where a vector one takes 1: a tile pass has 1/16 the steps.
constexpr int64_t kTileStepsDivisor = 16;

#if defined(__x86_64__)
// N chains `acc[i] = STEP` from `acc[i] = SEED` (distinct seeds: equal chains would be kept as
// one), kSteps each, then joined into acc[0] by `acc[0] = JOIN` (so that no chain is dead code).
// A macro, so that every line lies in its probe's body, under the probe's target attribute (a
// lambda's or a template's code would not be).
#define PERT_CHAINS(V, N, SEED, STEP, JOIN)                               \
  V acc[N];                                                               \
  _Pragma("GCC unroll 16") for (int i = 0; i < N; ++i) acc[i] = SEED;     \
  for (int64_t s = 0; s < kSteps; ++s) {                                  \
    _Pragma("GCC unroll 16") for (int i = 0; i < N; ++i) acc[i] = STEP;   \
  }                                                                       \
  _Pragma("GCC unroll 16") for (int i = 1; i < N; ++i) acc[0] = JOIN

__attribute__((target("avx512f"))) double fma512() {
  const __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
  PERT_CHAINS(__m512, 16, _mm512_set1_ps(1.0f + float(i)), _mm512_fmadd_ps(acc[i], b, c), _mm512_add_ps(acc[0], acc[i]));
  float out[16];
  _mm512_storeu_ps(out, acc[0]);
  return out[0] + out[15];
}

__attribute__((target("avx2,fma"))) double fma256() {
  const __m256 b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
  PERT_CHAINS(__m256, 12, _mm256_set1_ps(1.0f + float(i)), _mm256_fmadd_ps(acc[i], b, c), _mm256_add_ps(acc[0], acc[i]));
  float out[8];
  _mm256_storeu_ps(out, acc[0]);
  return out[0] + out[7];
}

__attribute__((target("avx512f,avx512bf16"))) double dpbf16_512() {
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3c003c00);  // 1.0, 2^-7
  PERT_CHAINS(__m512, 16, _mm512_set1_ps(float(i)), _mm512_dpbf16_ps(acc[i], x, y), _mm512_add_ps(acc[0], acc[i]));
  float out[16];
  _mm512_storeu_ps(out, acc[0]);
  return out[0] + out[15];
}

__attribute__((target("avx512f,avx512vnni"))) double dpbusd512() {
  const __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
  PERT_CHAINS(__m512i, 16, _mm512_set1_epi32(i), _mm512_dpbusd_epi32(acc[i], x, y), _mm512_add_epi32(acc[0], acc[i]));
  int32_t out[16];
  _mm512_storeu_si512(out, acc[0]);
  return double(out[0]) + out[15];
}

__attribute__((target("avx2,avxvnni"))) double dpbusd256() {
  const __m256i x = _mm256_set1_epi8(3), y = _mm256_set1_epi8(-2);
  PERT_CHAINS(__m256i, 12, _mm256_set1_epi32(i), _mm256_dpbusd_avx_epi32(acc[i], x, y), _mm256_add_epi32(acc[0], acc[i]));
  return double(_mm256_extract_epi32(acc[0], 0));
}

// AVX2's int8 product as pert's kernels run it: vpmaddubsw (32 u8 × s8, pairs summed in int16),
// vpmaddwd by ones (to int32), vpaddd; the chain's own value as the bytes (constant operands
// would be multiplied once, outside the loop).
__attribute__((target("avx2"))) double maddubs256() {
  const __m256i y = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  PERT_CHAINS(__m256i, 12, _mm256_set1_epi32(i),
              _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(acc[i], y), ones)),
              _mm256_add_epi32(acc[0], acc[i]));
  return double(_mm256_extract_epi32(acc[0], 0));
}
#undef PERT_CHAINS

// AMX: the tile GEMMs' step (amx_gemm.cpp, amx_blocks.cpp) repeated: 2 A and 2 B tiles of 16 rows
// × 64 bytes into 4 result tiles, 4 products a step (a chain is a result tile). Run only where
// cpu_supports("amx"), which includes the OS's permission for the tile data.
template <bool Int8>
double tile_steps() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) config.set(t, 16, 64);
  alignas(64) uint8_t bytes[16 * 64];
  // int8: 3 (u8) and -2 (s8) in every byte; BF16: pairs of 1.0 and 2^-7, sums far below overflow
  for (int i = 0; i < 16 * 64; i += 2) {
    bytes[i] = Int8 ? 3 : 0x80, bytes[i + 1] = Int8 ? 0xfe : 0x3f;
    if (!Int8 && i % 4 == 2) bytes[i] = 0x00, bytes[i + 1] = 0x3c;
  }
  using T = TileIntrinsics;
  T::configure(config);
  T::load<4>(bytes, 64), T::load<5>(bytes, 64), T::load<6>(bytes, 64), T::load<7>(bytes, 64);
  T::zero<0>(), T::zero<1>(), T::zero<2>(), T::zero<3>();
  for (int64_t s = 0; s < kSteps / kTileStepsDivisor; ++s) {
    if constexpr (Int8) {
      T::dpbusd<0, 4, 6>(), T::dpbusd<1, 4, 7>(), T::dpbusd<2, 5, 6>(), T::dpbusd<3, 5, 7>();
    } else {
      T::dpbf16ps<0, 4, 6>(), T::dpbf16ps<1, 4, 7>(), T::dpbf16ps<2, 5, 6>(), T::dpbf16ps<3, 5, 7>();
    }
  }
  alignas(64) int32_t out[16 * 16];
  T::store<3>(out, 64);
  T::release();
  return double(out[0]);
}
double tdpbf16ps_tiles() { return tile_steps<false>(); }
double tdpbusd_tiles() { return tile_steps<true>(); }
#endif

struct Probe {
  const char* name;
  int macs;              // per instruction (per chain step)
  int chains;            // accumulators per thread
  int64_t steps;         // per chain and pass
  const char* requires;  // the kernel_levels() name whose instructions it needs
  double (*run)();
};

const Probe* find_probe(const std::string& name) {
#if defined(__x86_64__)
  static const Probe probes[] = {
      {"vfmadd231ps zmm", 16, 16, kSteps, "avx512", fma512},
      {"vfmadd231ps ymm", 8, 12, kSteps, "avx2", fma256},
      {"vdpbf16ps zmm", 32, 16, kSteps, "avx512bf16", dpbf16_512},
      {"vpdpbusd zmm", 64, 16, kSteps, "avx512vnni", dpbusd512},
      {"vpdpbusd ymm", 32, 12, kSteps, "avxvnni", dpbusd256},
      {"vpmaddubsw+vpmaddwd ymm", 32, 12, kSteps, "avx2", maddubs256},
      // a tile product: 16 × 16 results, each a sum over 32 BF16 pairs' halves or 64 int8 bytes
      {"tdpbf16ps tile", 16 * 16 * 32, 4, kSteps / kTileStepsDivisor, "amx", tdpbf16ps_tiles},
      {"tdpbusd tile", 16 * 16 * 64, 4, kSteps / kTileStepsDivisor, "amx", tdpbusd_tiles},
  };
  for (const Probe& p : probes)
    if (name == p.name) return &p;
#else
  (void)name;
#endif
  return nullptr;
}


}  // namespace

ProductInstruction product_instruction(const std::string& family, const std::string& path) {
  if (path == "amx" && family == "bf16") return {"tdpbf16ps tile", 16 * 16 * 32};  // prefill's path (decoding: avx512bf16's)
  if (path == "amx" && (family == "q8" || family == "blocks")) return {"tdpbusd tile", 16 * 16 * 64};
  if (path == "avx512bf16" && family == "bf16") return {"vdpbf16ps zmm", 32};
  if (path == "avx512vnni" && (family == "q8" || family == "blocks")) return {"vpdpbusd zmm", 64};
  if (path == "avxvnni" && (family == "q8" || family == "blocks")) return {"vpdpbusd ymm", 32};
  if (path == "avx2" && (family == "q8" || family == "blocks")) return {"vpmaddubsw+vpmaddwd ymm", 32};
  if (family == "f32" || family == "bf16") {  // (BF16 without vdpbf16ps widens its weights for F32's products)
    if (path == "avx512" || path == "avx512vnni" || path == "avx512bf16") return {"vfmadd231ps zmm", 16};
    if (path == "avx2") return {"vfmadd231ps ymm", 8};
  }
  return {};
}

double product_peak(const std::string& instruction, int threads, int passes) {
  const Probe* p = find_probe(instruction);
  if (!p || !cpu_supports(p->requires)) return 0.0;
  threads = std::max(1, threads);
  double best = 0.0;
  volatile double sink = 0.0;  // the results are used, so the loops run
  for (int pass = 0; pass < std::max(1, passes); ++pass) {
    double total = 0.0;
    int team = 1;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      total += p->run();
#pragma omp single
      team = omp_get_num_threads();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    best = std::max(best, double(team) * double(p->steps) * p->chains * p->macs / std::max(seconds, 1e-9));
  }
  return best;
}

}  // namespace pert
