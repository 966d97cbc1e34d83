#include "platform/cpu_id.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstring>

#include "base/strings.h"

namespace gpuhost::platform {
namespace {

[[maybe_unused]] std::string registers_text(std::initializer_list<unsigned> registers) {
  std::string text;
  for (unsigned r : registers) {
    char bytes[4];
    std::memcpy(bytes, &r, 4);
    text.append(bytes, 4);
  }
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

}  // namespace

std::string hypervisor_name(std::string_view signature) {
  // Signatures as listed by systemd src/basic/virt.c (vm_table) and the vendors' docs it cites.
  static constexpr std::pair<std::string_view, std::string_view> k_names[] = {
      {"KVMKVMKVM", "KVM"},        {"Linux KVM Hv", "KVM"},
      {"Microsoft Hv", "Hyper-V"}, {"VMwareVMware", "VMware"},
      {"XenVMMXenVMM", "Xen"},     {"TCGTCGTCGTCG", "QEMU"},
      {"bhyve bhyve", "bhyve"},    {"ACRNACRNACRN", "ACRN"},
      {"QNXQVMBSQG", "QNX"},       {"Apple VZ", "Apple Virtualization"},
  };
  std::string_view trimmed = trim(signature);
  for (const auto& [sig, name] : k_names)
    if (trimmed == sig) return std::string(name);
  return std::string(trimmed);
}

CpuIdInfo read_cpuid() {
  CpuIdInfo info;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return info;
  info.vendor = registers_text({ebx, edx, ecx});

  unsigned max_extended = __get_cpuid_max(0x80000000u, nullptr);
  if (max_extended >= 0x80000004u) {
    std::string brand;
    for (unsigned leaf = 0x80000002u; leaf <= 0x80000004u; ++leaf) {
      __cpuid(leaf, eax, ebx, ecx, edx);
      brand += registers_text({eax, ebx, ecx, edx});
    }
    info.brand = std::string(trim(brand.c_str()));
  }

  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 31))) {
    info.hypervisor.present = true;
    __cpuid(0x40000000u, eax, ebx, ecx, edx);
    info.hypervisor.signature = registers_text({ebx, ecx, edx});
    info.hypervisor.name = hypervisor_name(info.hypervisor.signature);
  }
#endif
  return info;
}

}  // namespace gpuhost::platform
