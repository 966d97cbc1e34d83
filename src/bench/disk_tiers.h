#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"

namespace gpuhost::bench {

// A cloud disk type and its baseline IOPS (data/disk_tiers.json, embedded; each row sourced,
// from shared/research/03-selection-cost-anchors.md section 6.2). IOPS for a size of G GiB:
// clamp(base + per_gib x G, min, max); rows without per_gib do not depend on size.
struct DiskTier {
  std::string key;    // "aws-gp3"
  std::string cloud;  // "aws"
  std::string name;   // "AWS EBS gp3"
  double base_iops = 0;
  double iops_per_gib = 0;
  std::optional<double> min_iops, max_iops;
  std::string note;
  std::string source;
  std::string as_of;

  // Expected baseline IOPS; `size_gib` is needed when iops_per_gib is set.
  [[nodiscard]] std::optional<double> iops(std::optional<double> size_gib) const;
};

// The embedded table, parsed and validated once. Immutable; thread-safe.
[[nodiscard]] const std::vector<DiskTier>& disk_tiers();
[[nodiscard]] Result<std::vector<DiskTier>> parse_disk_tiers(std::string_view json_text);
[[nodiscard]] const DiskTier* find_disk_tier(std::string_view key);

}  // namespace gpuhost::bench
