#pragma once
// GPU instance types with prices (data/instances.json, a user catalog of the same format, or a
// SkyPilot catalog CSV). A price that could not be sourced is nullopt, never 0.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "knowledge/common.h"
#include "knowledge/gpus.h"

namespace gpuhost::plan {

struct Instance {
  std::string cloud;          // "aws"
  std::string region;         // "us-east-1"
  std::string instance_type;  // "p4d.24xlarge"
  std::string gpu;            // a key of data/gpus.json ("a100-sxm4-40gb"), or the catalog's name when unknown
  int gpu_count = 0;
  double gpu_memory_gb = 0;  // per GPU
  std::optional<int> vcpus;
  std::optional<double> ram_gb;
  std::optional<double> on_demand;  // USD per hour, Linux
  std::optional<double> spot;
  std::optional<double> reserved;
  // The least a reserved price commits to, in hours of the whole instance: an EC2 Capacity Block
  // is booked by the day (24); a row that does not say is a 1-year reservation (8760).
  double reserved_min_hours = 8760;
  std::optional<double> windows;  // USD per hour when the catalog gives a Windows price
  knowledge::Provenance provenance;
  std::vector<std::string> warnings;  // sanity-check findings (catalog quirks)
};

// A cloud's Windows Server licence charge per vCPU-hour (nullopt: not sourced).
struct WindowsLicence {
  std::string cloud;
  std::optional<double> usd_per_vcpu_hour;
  knowledge::Provenance provenance;
};

struct InstanceCatalog {
  std::vector<Instance> instances;
  std::vector<WindowsLicence> licences;
  std::vector<std::string> warnings;  // rows skipped or corrected while importing

  // The Windows price per hour: the catalog's own Windows price, else Linux on-demand + licence x
  // vCPUs; nullopt with `why` set when either is missing.
  [[nodiscard]] std::optional<double> windows_price(const Instance& instance, std::string* why = nullptr) const;
};

// data/instances.json format. parse_error names the row and field.
[[nodiscard]] Result<InstanceCatalog> parse_instance_catalog(std::string_view text, const std::string& location);
[[nodiscard]] Result<InstanceCatalog> builtin_instance_catalog();

// A SkyPilot catalog vms.csv (skypilot-org/skypilot-catalog, v5-v8), parsed by header name:
// InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, GpuInfo/GPUInfo, Price,
// SpotPrice, Region, AvailabilityZone. One instance per (type, region), cheapest zone (as
// SkyPilot's get_hourly_cost does). Rows without an accelerator or instance type (GCP's
// attachable-GPU rows) are skipped with a warning. GPU memory is checked against gpus.json.
// parse_error reads "<location>:<line>:<column>: <problem>".
[[nodiscard]] Result<InstanceCatalog> parse_skypilot_csv(std::string_view text, const std::string& location,
                                                         std::string_view cloud, const knowledge::GpuTable& gpus);

// Appends `more` to `into` (instances and licences; licences of `more` win per cloud).
void merge_catalog(InstanceCatalog& into, InstanceCatalog more);

}  // namespace gpuhost::plan
