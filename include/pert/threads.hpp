// How many threads pert runs when the user does not say: the CLI and the Python module alike.
#pragma once
#include <string>

namespace pert {

// The cores not busy right now, at most SLURM_CPUS_PER_TASK when a Slurm task sets it
// (src/runtime/threads.cpp: why that, not all of them).
int default_threads();
// The most threads pert runs (each costs a stack and a share of every barrier; more than a few
// times the cores only slows it down).
inline constexpr int kMaxThreads = 1024;
// threads > 0: exactly that many; 0: OMP_NUM_THREADS when set, else default_threads(). Error
// "threads: must be from 0 to 1024 ..." outside [0, kMaxThreads].
void set_threads(int threads);

// After set_threads(threads): when the threads asked for (threads > 0, or OMP_NUM_THREADS; not the
// default) are more than the cores not busy right now, why that runs many times slower and what to
// do, once a process; "" otherwise. The CLI prints it, Python warns with it.
std::string busy_cores_warning(int threads);

// libgomp's spin before a waiting thread sleeps, as pert sets it when the user has set neither
// OMP_WAIT_POLICY nor GOMP_SPINCOUNT (src/runtime/threads.cpp: why). libgomp reads it once, when it is
// loaded, so it must be in the environment before that: the CLI from .preinit_array, the Python
// module's __init__.py before it imports the extension.
inline constexpr const char* kGompSpinCount = "10000";

}  // namespace pert
