// Loops that go across threads only when the work is worth it.
#pragma once

namespace pert {

// body(i) for i in [0, n), split statically over the threads when `parallel`. A branch and not
// OpenMP's `if` clause: for every region an `if` turns serial libgomp allocates and frees a
// one-thread team, which was 36 allocations per decoded token (rmsnorm, SwiGLU, the GEMV).
template <class Index, class Body>
void parallel_for_if(bool parallel, Index n, const Body& body) {
  if (parallel) {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < n; ++i) body(i);
  } else {
    for (Index i = 0; i < n; ++i) body(i);
  }
}

}  // namespace pert
