#include "platform/job_cgroup.h"

#include <cstdint>
#include <cstdio>

namespace gpuhost::platform {

std::string job_cgroup_name(std::string_view job_name, std::string_view key) {
  std::string name = "gpuhost-";
  std::size_t kept = 0;
  for (char c : job_name) {
    if (kept == 40) break;
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                       c == '-' || c == '_';
    name.push_back(plain ? c : '_');
    ++kept;
  }
  // FNV-1a, 64 bits: stable across builds and OSes, and plenty to tell job folders apart.
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : key) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return name + "-" + hex;
}

}  // namespace gpuhost::platform
