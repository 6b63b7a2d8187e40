// Stopping long work early. The library's long loops (prefill chunks, perplexity windows,
// generated tokens) call check_interrupt() between their steps; a front end that must answer a
// signal promptly installs a hook on its thread that throws to stop the work (the Python module:
// KeyboardInterrupt within a fraction of a second). Without a hook check_interrupt() does nothing.
// Never called inside a parallel region: what it throws unwinds to the caller, leaving the
// state as after the last whole step (a session keeps the chunks it finished).
#pragma once
#include <chrono>
#include <functional>

namespace pert {

void check_interrupt();

// While it lives, check_interrupt() on the thread that made it calls `hook` at most once per
// `period` (the hook may take a lock, such as Python's GIL).
class InterruptHook {
 public:
  explicit InterruptHook(std::function<void()> hook,
                         std::chrono::milliseconds period = std::chrono::milliseconds(100));
  ~InterruptHook();
  InterruptHook(const InterruptHook&) = delete;
  InterruptHook& operator=(const InterruptHook&) = delete;

 private:
  friend void check_interrupt();
  std::function<void()> hook_;
  std::chrono::steady_clock::duration period_;
  std::chrono::steady_clock::time_point next_;
  InterruptHook* previous_;
};

}  // namespace pert
