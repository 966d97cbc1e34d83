#include <signal.h>

#include <atomic>

#include "platform/interrupt.h"

namespace gpuhost::platform {
namespace {

std::atomic<int> g_interrupts{0};

extern "C" void on_interrupt(int signal_number) {
  if (g_interrupts.fetch_add(1) >= 1) {
    ::signal(signal_number, SIG_DFL);
    ::raise(signal_number);
  }
}

}  // namespace

void install_interrupt_handler() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  // No SA_RESTART: a blocking accept/poll returns EINTR so its loop sees the request at once.
  action.sa_flags = 0;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

bool interrupt_requested() { return g_interrupts.load() > 0; }

}  // namespace gpuhost::platform
