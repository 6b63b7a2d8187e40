// The compute roof's probes (pert/compute_roof.hpp): which instruction each family's path
// multiplies with, and that each probe this CPU can run gives a peak (its size is a benchmark's
// business, pert bench --roof, not a unit test's).
#include <catch2/catch.hpp>

#include "pert/compute_roof.hpp"
#include "pert/kernels.hpp"

using namespace pert;

TEST_CASE("compute roof: each family's path names its product instruction, and each probe runs", "[compute_roof]") {
  const std::vector<std::tuple<std::string, std::string, std::string, int>> paths = {
      {"f32", "avx512", "vfmadd231ps zmm", 16},        {"f32", "avx2", "vfmadd231ps ymm", 8},
      {"bf16", "avx512bf16", "vdpbf16ps zmm", 32},     {"bf16", "avx512", "vfmadd231ps zmm", 16},
      {"bf16", "avx2", "vfmadd231ps ymm", 8},          {"q8", "avx512vnni", "vpdpbusd zmm", 64},
      {"q8", "avx2", "vpmaddubsw+vpmaddwd ymm", 32},   {"blocks", "avx512vnni", "vpdpbusd zmm", 64},
      {"blocks", "avxvnni", "vpdpbusd ymm", 32},       {"blocks", "avx2", "vpmaddubsw+vpmaddwd ymm", 32},
      {"bf16", "amx", "tdpbf16ps tile", 8192},         {"q8", "amx", "tdpbusd tile", 16384},
      {"blocks", "amx", "tdpbusd tile", 16384},
  };
  for (const auto& [family, path, name, macs] : paths) {
    INFO(family << " " << path);
    const ProductInstruction i = product_instruction(family, path);
    CHECK(i.name == name);
    CHECK(i.macs == macs);
  }
  CHECK(product_instruction("f32", "plain").name.empty());  // plain C++: no probe
  CHECK(product_instruction("cache", "avx2").name.empty());
  CHECK(product_peak("no such instruction", 1) == 0.0);
  if (!cpu_supports("amx")) CHECK(product_peak("tdpbusd tile", 1, 1) == 0.0);  // not run where AMX is not usable
  // every probe behind a path this CPU runs gives a peak (one short pass each)
  for (const KernelFamily& f : kernel_families())
    for (const std::string& path : f.available) {
      const ProductInstruction i = product_instruction(f.name, path);
      if (i.name.empty()) continue;
      INFO(f.name << " " << path << ": " << i.name);
      CHECK(product_peak(i.name, 1, 1) > 0.0);
    }
}
