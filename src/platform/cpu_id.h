#pragma once
// CPUID (x86 only), shared by system_info_posix.cc and system_info_win32.cc. Private to platform/.

#include <string>

#include "platform/system_info.h"

namespace gpuhost::platform {

struct CpuIdInfo {
  std::string vendor;  // leaf 0: "GenuineIntel"
  std::string brand;   // leaves 0x80000002-4, trimmed
  HypervisorInfo hypervisor;
};

// What CPUID says; all empty on CPUs without CPUID (non-x86).
[[nodiscard]] CpuIdInfo read_cpuid();

// The hypervisor's common name for a CPUID signature ("KVMKVMKVM" -> "KVM"); the signature itself
// when unknown. Pure.
[[nodiscard]] std::string hypervisor_name(std::string_view signature);

}  // namespace gpuhost::platform
