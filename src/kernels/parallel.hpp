// Loops that go across threads only when the work is worth it and there is more than one thread.
//
// Why not OpenMP's `if` clause, nor a region on one thread: for every parallel region that runs on
// one thread (turned serial by an `if`, or -t 1) libgomp allocates and frees a one-thread team;
// that was 36 allocations per decoded token through `if` clauses, and 5 (F32) to 21 (BF16) at -t 1.
#pragma once
#include <omp.h>

namespace pert {

// More than one thread to run a region on (outside any region).
inline bool several_threads() { return omp_get_max_threads() > 1; }

// body(i) for i in [0, n), split statically over the threads when `parallel`.
template <class Index, class Body>
void parallel_for_if(bool parallel, Index n, const Body& body) {
  if (parallel && several_threads()) {
#pragma omp parallel for schedule(static)
    for (Index i = 0; i < n; ++i) body(i);
  } else {
    for (Index i = 0; i < n; ++i) body(i);
  }
}

// body(i, j) for every (i, j) in [0, n) × [0, m), handed to the threads as they come free.
template <class Body>
void parallel_for_2d(int n, int m, const Body& body) {
  if (several_threads()) {
#pragma omp parallel for collapse(2) schedule(dynamic)
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < m; ++j) body(i, j);
  } else {
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < m; ++j) body(i, j);
  }
}

// body(threads, me) once on each thread of a region, or body(1, 0) on one thread.
template <class Body>
void on_each_thread(const Body& body) {
  if (several_threads()) {
#pragma omp parallel
    body(omp_get_num_threads(), omp_get_thread_num());
  } else {
    body(1, 0);
  }
}

}  // namespace pert
