// The CPU under pert and which of its kernel paths run. A path is one family's kernels written
// for one set of instructions (plain C++, AVX2, AVX-512, ...); every build holds all of them,
// each compiled for its own instructions, and each family runs the best one this CPU has, so a
// binary built for a baseline x86-64 still takes the fast paths. Tests run every path the
// machine has; `pert bench` and `pert inspect` say which ran.
#pragma once
#include <string>
#include <vector>

namespace pert {

// Path names, lowest first: what each needs of the CPU.
//   plain       nothing (C++ the compiler vectorizes as the build allows)
//   avx2        AVX2, FMA, F16C
//   avxvnni     avx2 and AVX-VNNI (VEX vpdpbusd); beside avx512 rather than under it: a CPU
//               may have either without the other (cpu_supports asks for it by name)
//   avx512      AVX-512 F, BW, VL, DQ (and avx2's)
//   avx512vnni  avx512 and AVX-512 VNNI (vpdpbusd)
//   avx512bf16  avx512vnni and AVX-512 BF16 (vdpbf16ps)
//   amx         avx512bf16, AMX-TILE, AMX-BF16 and AMX-INT8 (tdpbf16ps, tdpbusd), and the OS's
//               permission for the tile data (Linux 5.16+, asked once: arch_prctl)
const std::vector<std::string>& kernel_levels();
bool cpu_supports(const std::string& level);  // false for a name not in kernel_levels()
// Why the amx level is not supported here ("" when it is): no AMX in cpuid, or the OS refused
// the tile data (cpu_info().features then says "(amx off: ...)").
const std::string& amx_unavailable_reason();

// What a speed figure names: the model as /proc/cpuinfo gives it ("AMD EPYC 7B13", or the
// vendor when none), its vendor ("AMD", "Intel", ...) and the instructions that choose paths
// ("AVX2 FMA F16C", "AVX2 FMA F16C AVX512F AVX512BW ... AVX512_VNNI").
struct CpuInfo {
  std::string model, vendor, features;
};
const CpuInfo& cpu_info();

// The families: f32 (matrix products on F32 weights, attention's products), bf16, q8, blocks
// (GGML's block types) and cache (a BF16/F16/Q8 KV cache). Each lists the paths this CPU can
// run, best first, and the one that runs.
struct KernelFamily {
  std::string name, selected;
  std::vector<std::string> available;
};
std::vector<KernelFamily> kernel_families();
// "f32 avx2, bf16 avx2, q8 avx2, blocks avx2, cache avx2"; plus the F32 decode prefetch hint.
std::string kernel_summary();

// Every family at its best path at or below `level` (a kernel_levels() name). The environment
// variable PERT_KERNELS does the same at start-up, for measuring a lower path. Throws
// std::invalid_argument naming the levels for any other name.
void select_kernels(const std::string& level);
// Reads PERT_KERNELS and PERT_PREFETCH now: pert::Error naming the variable for a value that is
// not a level or a hint (the front ends call it first, so a typo stops before any work).
void check_kernel_environment();
// The path a family starts on: its best among `available` (best first) at or below
// PERT_KERNELS, when set.
std::string initial_kernel(const std::vector<std::string>& available);

// How decoding's F32 products prefetch the matrix rows they stream: "nta" (past the caches),
// "t0" (into every level, the default: 2.5× NTA's speed on an Intel Xeon, even with it on an AMD
// Zen 3, docs/speed.md) or "none". PERT_PREFETCH sets it at start-up. Throws std::invalid_argument for any other name.
const std::string& f32_prefetch();
void select_f32_prefetch(const std::string& hint);

// Per family: the paths this CPU can run, best first; the one running; choose one (tests
// compare them), std::invalid_argument for a name not available.
std::vector<std::string> f32_kernels();
const std::string& f32_kernel();
void select_f32_kernel(const std::string& name);
std::vector<std::string> bf16_kernels();
const std::string& bf16_kernel();
void select_bf16_kernel(const std::string& name);
std::vector<std::string> cache_kernels();
const std::string& cache_kernel();
void select_cache_kernel(const std::string& name);
// q8 and blocks: ops.hpp (q8_kernels ...) and quants.hpp (block_kernels ...).

}  // namespace pert
