// How many threads pert runs, and how they wait for each other, when the user does not say.
//
// Every parallel region ends in a barrier. A thread that waits there while another thread of
// the team is descheduled (the machine is busy) holds its core, so the late thread cannot move
// to it: with one busy process beside a 2-thread run, every barrier costs a scheduler time slice,
// and decoding a small model fell from thousands of tokens/s to tens. Two defaults avoid it:
//   - threads: the cores not busy when pert starts (processes running, sampled a few times), at
//     most a Slurm task's SLURM_CPUS_PER_TASK (a node's other cores are other jobs');
//   - libgomp's spin before a waiting thread sleeps: 10,000 pauses instead of 300,000
//     (kGompSpinCount), which keeps an idle machine's speed (docs/speed.md, "Speed on a busy machine")
//     and bounds what a thread wastes when the machine turns busy later.
// -t, OMP_NUM_THREADS, OMP_WAIT_POLICY and GOMP_SPINCOUNT given by the user win.
#include "pert/threads.hpp"

#include "pert/error.hpp"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace pert {

namespace {

// Tasks running right now on the whole machine (/proc/stat's procs_running), this one included.
int procs_running() {
  std::ifstream in("/proc/stat");
  std::string key;
  long long value = 0;
  while (in >> key) {
    if (key == "procs_running" && in >> value) return int(value);
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

}  // namespace

int default_threads() {
  cpu_set_t set;
  const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : omp_get_num_procs();
  // A core counts as busy only if another task runs in every one of 5 samples 2 ms apart.
  int busy = cores;
  for (int i = 0; i < 5; ++i) {
    const int running = procs_running();
    if (running < 1) return std::max(cores, 1);  // no /proc: all cores, as OpenMP would
    busy = std::min(busy, running - 1);
    if (busy == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  int threads = std::max(1, cores - busy);
  if (const char* slurm = std::getenv("SLURM_CPUS_PER_TASK")) {
    const int granted = std::atoi(slurm);
    if (granted > 0) threads = std::min(threads, granted);
  }
  return threads;
}

void set_threads(int threads) {
  if (threads < 0 || threads > kMaxThreads)
    throw Error("threads: must be from 0 (the default: OMP_NUM_THREADS, else the cores not busy now) to " + std::to_string(kMaxThreads) + ", got " +
                std::to_string(threads));
  if (threads > 0)
    omp_set_num_threads(threads);
  else if (!std::getenv("OMP_NUM_THREADS"))
    omp_set_num_threads(default_threads());
}

std::string busy_cores_warning(int threads_asked) {
  static std::atomic<bool> warned{false};
  if (warned || (threads_asked == 0 && !std::getenv("OMP_NUM_THREADS"))) return "";  // the default: the idle cores
  const int threads = omp_get_max_threads(), idle = default_threads();
  if (threads <= idle || warned.exchange(true)) return "";
  return std::to_string(threads) + " threads on " + std::to_string(idle) + (idle == 1 ? " core" : " cores") +
         " not busy now: a thread that waits at a barrier for one descheduled by another process makes every "
         "step wait a time slice, and a run can take many times as long; the default threads (no -t in the CLI, "
         "set_threads(0) in Python, OMP_NUM_THREADS unset) are the cores not busy (docs/speed.md, \"Speed on a busy machine\")";
}

}  // namespace pert
