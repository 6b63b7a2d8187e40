// Buffers sized by a config or a flag are checked against the memory the kernel would give
// before they are allocated: a hostile size is an error naming what needs it, never a failed
// allocation (which the sanitizer build reports as a crash) or a machine driven into swap.
#pragma once
#include <string>

namespace pert {

// Bytes the kernel would give this process now (MemAvailable), or 0 when unknown.
double available_memory();

// Throws pert::Error "<what> needs N MiB, more than the M MiB of memory available<advice>"
// when `bytes` exceeds 90% of it.
void require_memory(double bytes, const std::string& what, const std::string& advice = "");

}  // namespace pert
