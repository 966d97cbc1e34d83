#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpuhost::platform {

// Windows registry reads (64-bit view). On POSIX every call returns ErrorCode::unsupported.
// A missing key or value is ErrorCode::not_found, so callers can apply documented defaults.
enum class RegistryRoot { local_machine, current_user };

[[nodiscard]] Result<std::uint32_t> registry_read_dword(RegistryRoot root, std::string_view key,
                                                        std::string_view value);
[[nodiscard]] Result<std::string> registry_read_string(RegistryRoot root, std::string_view key,
                                                       std::string_view value);
[[nodiscard]] Result<std::vector<std::string>> registry_subkeys(RegistryRoot root, std::string_view key);

}  // namespace gpuhost::platform
