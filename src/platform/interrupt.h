#pragma once

namespace gpuhost::platform {

// Ctrl-C as a request, not a kill: after install_interrupt_handler() the first SIGINT / SIGTERM
// (POSIX) or CTRL_C / CTRL_BREAK / CTRL_CLOSE event (Windows console) sets a flag that long
// loops poll with interrupt_requested(), so they can clean up (remove a test file) and report
// what they have. A second Ctrl-C restores the default action and kills the process the usual way.
// Installing twice is harmless. Thread-safe.
void install_interrupt_handler();
[[nodiscard]] bool interrupt_requested();

}  // namespace gpuhost::platform
