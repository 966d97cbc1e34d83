#include "platform/registry.h"

namespace gpuhost::platform {
namespace {

std::unexpected<Error> no_registry(std::string_view key) {
  return make_error(ErrorCode::unsupported,
                    "reading registry key " + std::string(key) + ": there is no registry on this OS");
}

}  // namespace

Result<std::uint32_t> registry_read_dword(RegistryRoot, std::string_view key, std::string_view) {
  return no_registry(key);
}

Result<std::string> registry_read_string(RegistryRoot, std::string_view key, std::string_view) {
  return no_registry(key);
}

Result<std::vector<std::string>> registry_subkeys(RegistryRoot, std::string_view key) {
  return no_registry(key);
}

}  // namespace gpuhost::platform
