// The CPU under pert, and the kernel families' paths together (include/pert/kernels.hpp).
// Why a table per family chosen from cpuid rather than Google Highway or GCC's function
// multiversioning: the kernels are intrinsics written per instruction set (Highway would mean
// rewriting them in its vector types; target_clones only re-vectorizes plain loops), and each
// path is compiled for its own instructions inside a `#pragma GCC target` region of an ordinary
// file, so what the header templates instantiate (std::vector, pert's inline helpers) is the
// build's baseline code and no AVX-512 copy of them can reach a CPU without it.
#include "pert/kernels.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "kernels/amx_gemm.hpp"
#include "kernels/ops.hpp"
#include "kernels/quants.hpp"
#include "pert/error.hpp"

namespace pert {

const std::vector<std::string>& kernel_levels() {
  static const std::vector<std::string> levels = {"plain", "avx2", "avxvnni", "avx512", "avx512vnni", "avx512bf16", "amx"};
  return levels;
}

namespace {

std::string levels_list() { return comma_list(kernel_levels()); }

int level_rank(const std::string& level) {
  const auto& levels = kernel_levels();
  const auto it = std::find(levels.begin(), levels.end(), level);
  return it == levels.end() ? -1 : int(it - levels.begin());
}

// __builtin_cpu_supports takes string literals only.
#define has(feature) __builtin_cpu_supports(feature)

// Why AMX does not run here ("" when it does): asked of cpuid and the OS once.
const std::string& amx_refusal_here() {
  static const std::string why = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return amx_refusal(has("amx-tile"), has("amx-bf16"), has("amx-int8"), request_tile_permission);
#else
    return std::string("no AMX off x86-64");
#endif
  }();
  return why;
}

// AVX-VNNI (VEX vpdpbusd) with avx2's instructions. It sits beside AVX-512 rather than under it:
// Zen 4 and the Xeons before Sapphire Rapids have AVX-512 VNNI without it.
bool cpu_has_avxvnni() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return has("avxvnni") && has("avx2") && has("fma") && has("f16c");
#else
  return false;
#endif
}

// The highest level this CPU runs.
int cpu_rank() {
  static const int rank = [] {
    std::string level = "plain";
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!(has("avx2") && has("fma") && has("f16c"))) return level_rank(level);
    level = cpu_has_avxvnni() ? "avxvnni" : "avx2";
    if (!(has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq"))) return level_rank(level);
    level = "avx512";
    if (!has("avx512vnni")) return level_rank(level);
    level = "avx512vnni";
    if (!has("avx512bf16")) return level_rank(level);
    level = "avx512bf16";
    if (!amx_refusal_here().empty()) return level_rank(level);
    level = "amx";
#endif
    return level_rank(level);
  }();
  return rank;
}

// PERT_KERNELS's level, or the CPU's when unset.
int cap_rank() {
  static const int rank = [] {
    const char* env = std::getenv("PERT_KERNELS");
    if (!env || !*env) return cpu_rank();
    const int r = level_rank(env);
    if (r < 0) throw Error(std::string("PERT_KERNELS: '") + env + "' is not a kernel level (" + levels_list() + ")");
    return r;
  }();
  return rank;
}

std::string best_at_or_below(const std::vector<std::string>& available, int rank) {
  for (const std::string& name : available)
    if (level_rank(name) >= 0 && level_rank(name) <= rank) return name;
  return available.back();
}

std::string features() {
  std::string out;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const std::pair<bool, const char*> flags[] = {
      {has("avx2"), "AVX2"},           {has("fma"), "FMA"},
      {has("f16c"), "F16C"},           {has("avx512f"), "AVX512F"},
      {has("avx512bw"), "AVX512BW"},   {has("avx512vl"), "AVX512VL"},
      {has("avx512dq"), "AVX512DQ"},   {has("avx512vnni"), "AVX512_VNNI"},
      {has("avx512bf16"), "AVX512_BF16"}, {has("avxvnni"), "AVX_VNNI"},
      {has("amx-tile"), "AMX"}};
  for (const auto& [present, name] : flags)
    if (present) out += (out.empty() ? "" : " ") + std::string(name);
  if (has("amx-tile") && !amx_refusal_here().empty()) out += " (amx off: " + amx_refusal_here() + ")";
#endif
  return out.empty() ? "no SIMD paths" : out;
}

#undef has

}  // namespace

const std::string& amx_unavailable_reason() { return amx_refusal_here(); }

bool cpu_supports(const std::string& level) {
  const int r = level_rank(level);
  if (level == "avxvnni") return cpu_has_avxvnni();
  return r >= 0 && r <= cpu_rank();
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = [] {
    CpuInfo c;
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    auto value = [](const std::string& l) {  // what follows "key\t: "
      size_t at = l.find(':');
      at = at == std::string::npos ? at : l.find_first_not_of(" \t", at + 1);
      return at == std::string::npos ? std::string() : l.substr(at);
    };
    while (std::getline(in, line) && (c.model.empty() || c.vendor.empty())) {
      if (c.model.empty() && line.rfind("model name", 0) == 0) c.model = value(line);
      if (c.vendor.empty() && line.rfind("vendor_id", 0) == 0) c.vendor = value(line);
    }
    if (c.vendor == "AuthenticAMD") c.vendor = "AMD";
    if (c.vendor == "GenuineIntel") c.vendor = "Intel";
    if (c.model.empty()) c.model = c.vendor.empty() ? "unknown CPU" : c.vendor;
    c.features = features();
    return c;
  }();
  return info;
}

void check_kernel_environment() {
  cap_rank();
  f32_prefetch();
}

std::string initial_kernel(const std::vector<std::string>& available) { return best_at_or_below(available, cap_rank()); }

std::vector<KernelFamily> kernel_families() {
  return {{"f32", f32_kernel(), f32_kernels()},
          {"bf16", bf16_kernel(), bf16_kernels()},
          {"q8", q8_kernel(), q8_kernels()},
          {"blocks", block_kernel(), block_kernels()},
          {"cache", cache_kernel(), cache_kernels()}};
}

std::string kernel_summary() {
  return comma_list(kernel_families(), [](const KernelFamily& f) { return f.name + " " + f.selected; }) +
         "; f32 decode prefetch " + f32_prefetch();
}

void select_kernels(const std::string& level) {
  const int rank = level_rank(level);
  if (rank < 0) throw std::invalid_argument("kernel level '" + level + "' is not one of " + levels_list());
  select_f32_kernel(best_at_or_below(f32_kernels(), rank));
  select_bf16_kernel(best_at_or_below(bf16_kernels(), rank));
  select_q8_kernel(best_at_or_below(q8_kernels(), rank));
  select_block_kernel(best_at_or_below(block_kernels(), rank));
  select_cache_kernel(best_at_or_below(cache_kernels(), rank));
}

}  // namespace pert
