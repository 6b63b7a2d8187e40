// How fast this machine multiplies: the compute roof a prompt runs under, as the read probe
// (bandwidth.hpp) is the roof a decode step runs under. Each kernel path multiplies with one
// instruction (an F32 FMA, a BF16 pair dot, an int8 quad dot, ...); its peak is measured as a
// short loop of that instruction on independent accumulators in registers, no memory, on every
// thread at once: the port throughput of the cores, which no GEMM exceeds (pert bench --roof).
#pragma once
#include <string>

namespace pert {

// The instruction a family's path multiplies with and how many multiply-adds one does:
// ("f32", "avx512") -> {"vfmadd231ps zmm", 16}; ("bf16", "avx512bf16") -> {"vdpbf16ps zmm", 32};
// ("q8" or "blocks", "avx512vnni") -> {"vpdpbusd zmm", 64}; avx2's int8 path -> {"vpmaddubsw+vpmaddwd
// ymm", 32}; the amx paths -> {"tdpbf16ps tile", 8192}, {"tdpbusd tile", 16384}. name "" for a path
// with no probe (plain C++, or one this build cannot time).
struct ProductInstruction {
  std::string name;
  int macs = 0;  // multiply-adds per instruction
};
ProductInstruction product_instruction(const std::string& family, const std::string& path);

// Multiply-adds per second of `instruction` (a product_instruction's name) on `threads` threads:
// the best of `passes` runs of a loop over 16 (AVX-512) or 12 (AVX2) independent accumulators.
// 0 for an unknown name or one this CPU cannot run.
double product_peak(const std::string& instruction, int threads, int passes = 5);

}  // namespace pert
