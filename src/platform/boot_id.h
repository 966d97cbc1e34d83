#pragma once

#include <string>

#include "base/error.h"

namespace gpuhost::platform {

// A text that stays the same until the host restarts and changes after. Linux: the kernel's
// random boot id (/proc/sys/kernel/random/boot_id). Windows: the BootId the kernel counts up at
// each boot (Memory Management\PrefetchParameters), else the boot time to the minute.
[[nodiscard]] Result<std::string> boot_id();

}  // namespace gpuhost::platform
