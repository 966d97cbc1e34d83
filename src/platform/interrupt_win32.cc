#include <windows.h>

#include <atomic>

#include "platform/interrupt.h"

namespace gpuhost::platform {
namespace {

std::atomic<int> g_interrupts{0};

BOOL WINAPI on_console_event(DWORD event) {
  switch (event) {
    case CTRL_C_EVENT:
    case CTRL_BREAK_EVENT:
    case CTRL_CLOSE_EVENT:
      // Returning FALSE passes the second event to the default handler, which ends the process.
      return g_interrupts.fetch_add(1) >= 1 ? FALSE : TRUE;
    default:
      return FALSE;
  }
}

}  // namespace

void install_interrupt_handler() {
  static std::atomic<bool> installed{false};
  if (!installed.exchange(true)) SetConsoleCtrlHandler(on_console_event, TRUE);
}

bool interrupt_requested() { return g_interrupts.load() > 0; }

}  // namespace gpuhost::platform
