#include "pert/bandwidth.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>

#include "pert/memory.hpp"

namespace pert {

namespace {

// Four independent sums, so the loop is bound by loads, not by one chain of additions.
uint64_t sum_words(const uint64_t* p, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
  for (; i < n; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
}

}  // namespace

double read_bandwidth(int threads, size_t bytes, int passes) {
  threads = std::max(1, threads);
  const size_t words = std::max<size_t>(bytes / sizeof(uint64_t), size_t(threads));
  require_memory(double(words * sizeof(uint64_t)), "the read-bandwidth probe");
  const std::unique_ptr<uint64_t[]> buffer(new uint64_t[words]);  // (not value-initialised: the threads write it)
  uint64_t* const data = buffer.get();
  auto slice = [&] {  // this thread's part (the team may be smaller than asked for)
    const size_t t = size_t(omp_get_thread_num()), n = size_t(omp_get_num_threads());
    return std::make_pair(words * t / n, words * (t + 1) / n);
  };
#pragma omp parallel num_threads(threads)
  {
    const auto [begin, end] = slice();
    for (size_t i = begin; i < end; ++i) data[i] = i;
  }
  double best = 0.0;
  volatile uint64_t sink = 0;  // the sums are used, so the reads happen
  for (int pass = 0; pass < std::max(1, passes); ++pass) {
    uint64_t total = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const auto [begin, end] = slice();
      total += sum_words(data + begin, end - begin);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    best = std::max(best, double(words * sizeof(uint64_t)) / std::max(seconds, 1e-9));
  }
  return best;
}

}  // namespace pert
