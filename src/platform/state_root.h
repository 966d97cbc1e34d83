#pragma once

#include <filesystem>

namespace gpuhost::platform {

// Where gpuhost keeps its state (jobs/, setup/): $GPUHOST_HOME if set, else
// $XDG_STATE_HOME/gpuhost (~/.local/state/gpuhost) on Linux, %LOCALAPPDATA%\gpuhost on Windows.
// Without HOME / LOCALAPPDATA (and USERPROFILE): .gpuhost in the current directory.
[[nodiscard]] std::filesystem::path state_root();

}  // namespace gpuhost::platform
