// The CLI's part of pert's thread defaults (src/runtime/threads.cpp says why): libgomp's spin count,
// which libgomp reads in its constructor, so this runs from .preinit_array: before any shared
// library's constructor.
#include <cstdlib>

#include "pert/threads.hpp"

namespace pert::cli {

namespace {

void bound_openmp_spin(int, char**, char**) {
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) setenv("GOMP_SPINCOUNT", kGompSpinCount, 0);
}
__attribute__((section(".preinit_array"), used)) void (*const kBoundOpenmpSpin)(int, char**, char**) = bound_openmp_spin;

}  // namespace

}  // namespace pert::cli
