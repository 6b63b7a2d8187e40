#include "pert/interrupt.hpp"

#include <utility>

namespace pert {

namespace {
thread_local InterruptHook* current = nullptr;
}

InterruptHook::InterruptHook(std::function<void()> hook, std::chrono::milliseconds period)
    : hook_(std::move(hook)), period_(period), next_(std::chrono::steady_clock::now() + period), previous_(current) {
  current = this;
}

InterruptHook::~InterruptHook() { current = previous_; }

void check_interrupt() {
  InterruptHook* h = current;
  if (!h) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < h->next_) return;
  h->next_ = now + h->period_;
  h->hook_();
}

}  // namespace pert
