// How many threads pert runs when the user does not say: the CLI and the Python module alike.
#pragma once

namespace pert {

// The cores not busy right now (src/threads.cpp: why that, not all of them).
int default_threads();
// threads > 0: exactly that many; 0: OMP_NUM_THREADS when set, else default_threads().
void set_threads(int threads);

// libgomp's spin before a waiting thread sleeps, as pert sets it when the user has set neither
// OMP_WAIT_POLICY nor GOMP_SPINCOUNT (src/threads.cpp: why). libgomp reads it once, when it is
// loaded, so it must be in the environment before that: the CLI from .preinit_array, the Python
// module's __init__.py before it imports the extension.
inline constexpr const char* kGompSpinCount = "10000";

}  // namespace pert
