#pragma once
// MIG layouts in NVIDIA mig-parted's `version: v1` file format, read and written unchanged (no
// format of gpuhost's own), with mig-parted's validation rules (api/spec/v1/spec.go: research/08
// B3): `version: v1`; `mig-configs` maps a name to a non-empty list of entries; an entry has
// `devices` ("all" or GPU indices, required), `mig-enabled` (required), `device-filter` (a PCI ID
// such as "0x20B210DE", or a list of them; optional) and `mig-devices` (profile -> count:
// required when enabled, forbidden when disabled, `{}` for enabled with none). Unknown keys are
// errors.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/json.h"

namespace gpuhost::gpu {

// A profile name as mig-parted writes it: "3g.40gb", "1g.10gb+me", "1c.3g.40gb" (a compute
// instance of one slice in a 3-slice GPU instance).
struct MigProfileName {
  unsigned compute_slices = 0;  // the "Nc." prefix; 0 when absent (the whole GPU instance)
  unsigned gpu_slices = 0;      // "Ng"
  unsigned memory_gb = 0;       // "Mgb"
  std::string attributes;       // "+me", "+gfx", "-me", "+me.all" or ""

  // The GPU instance part, as NVML names profiles ("3g.40gb", "1g.10gb+me").
  [[nodiscard]] std::string gpu_instance() const;
};
[[nodiscard]] std::optional<MigProfileName> parse_mig_profile_name(std::string_view name);

struct MigConfigEntry {
  struct Filter {
    std::uint32_t device_id = 0;                // (device << 16) | vendor, as NVML's pciDeviceId
    std::optional<std::uint32_t> subsystem_id;  // "0x20B210DE:0x147F10DE" (mig-parted v0.15)
  };
  std::vector<Filter> device_filter;             // empty: any GPU
  std::optional<std::vector<unsigned>> devices;  // nullopt: "all"
  bool mig_enabled = false;
  std::vector<std::pair<std::string, unsigned>> mig_devices;  // in file order

  // Whether this entry selects the GPU at `index` with these PCI IDs.
  [[nodiscard]] bool selects(unsigned index, std::uint32_t device_id, std::uint32_t subsystem_id) const;
};

struct MigConfig {
  std::string name;
  std::vector<MigConfigEntry> entries;
};

struct MigConfigFile {
  std::vector<MigConfig> configs;  // in file order
  [[nodiscard]] const MigConfig* find(std::string_view name) const;
  [[nodiscard]] std::string names() const;  // "all-disabled, all-balanced"
};

// The tree yaml::parse (or json::parse) gave. parse_error naming the path
// ("mig-configs.all-balanced[0].mig-devices") on anything mig-parted would refuse.
[[nodiscard]] Result<MigConfigFile> mig_config_from_value(const json::Value& document);
// YAML (or JSON, which is YAML) text.
[[nodiscard]] Result<MigConfigFile> parse_mig_config(std::string_view text);

// The file `gpuhost mig export` writes: one config named `name`.
[[nodiscard]] json::Value mig_config_to_value(const MigConfig& config);

}  // namespace gpuhost::gpu
