#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuhost::platform {

// Process environment. Values are UTF-8 on both OSes (converted from UTF-16 on Windows).
// Not safe to call concurrently with set_env/unset_env from another thread.
[[nodiscard]] std::optional<std::string> get_env(std::string_view name);
void set_env(std::string_view name, std::string_view value);
void unset_env(std::string_view name);
[[nodiscard]] std::vector<std::pair<std::string, std::string>> environment();

// ':' on POSIX, ';' on Windows.
[[nodiscard]] char path_list_separator();

}  // namespace gpuhost::platform
