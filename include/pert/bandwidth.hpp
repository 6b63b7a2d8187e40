// How fast this machine reads memory: the roof a decode step runs under. Generating one token
// reads every weight matrix once and the whole KV cache, so (bytes a token) × (tokens/s) against
// this probe says how close a decoder is to the limit (pert bench --roof).
#pragma once
#include <cstddef>

namespace pert {

// Bytes/s of the fastest of `passes` reads of a `bytes` buffer, split into `threads` slices as a
// decode step splits its matrices (each thread streams its own part once, summing 64-bit words).
// The buffer is written first, by the threads that read it, so its pages are present and local.
// Throws pert::Error when the buffer would not fit in the memory available.
double read_bandwidth(int threads, size_t bytes = size_t(1) << 30, int passes = 5);

}  // namespace pert
