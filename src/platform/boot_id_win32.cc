#include <ctime>

#include <windows.h>

#include "platform/boot_id.h"
#include "platform/registry.h"

namespace gpuhost::platform {

Result<std::string> boot_id() {
  auto id = registry_read_dword(
      RegistryRoot::local_machine,
      "SYSTEM\\CurrentControlSet\\Control\\Session Manager\\Memory Management\\PrefetchParameters", "BootId");
  if (id) return "boot-" + std::to_string(*id);
  const long long booted =
      static_cast<long long>(std::time(nullptr)) - static_cast<long long>(GetTickCount64() / 1000);
  return "booted-" + std::to_string(booted / 60);
}

}  // namespace gpuhost::platform
