#include "bench/disk_tiers.h"

#include <algorithm>

#include "base/embedded.h"
#include "base/json.h"

namespace gpuhost::bench {

namespace data {
const EmbeddedFile* find_embedded(std::string_view name);
}

std::optional<double> DiskTier::iops(std::optional<double> size_gib) const {
  if (iops_per_gib > 0 && !size_gib) return std::nullopt;
  double value = base_iops + iops_per_gib * size_gib.value_or(0);
  if (min_iops) value = std::max(value, *min_iops);
  if (max_iops) value = std::min(value, *max_iops);
  return value;
}

Result<std::vector<DiskTier>> parse_disk_tiers(std::string_view json_text) {
  auto doc = GPUHOST_TRY(json::parse(json_text));
  const json::Value* rows = doc.find("tiers");
  if (doc.get_int("schema_version") != 1 || !rows || !rows->is_array())
    return make_error(ErrorCode::parse_error, "disk_tiers.json: schema_version 1 with a \"tiers\" array expected");
  std::vector<DiskTier> tiers;
  for (std::size_t i = 0; i < rows->size(); ++i) {
    const json::Value& row = rows->items()[i];
    DiskTier t;
    t.key = row.get_string("key");
    t.cloud = row.get_string("cloud");
    t.name = row.get_string("name");
    t.base_iops = row.get_number("base_iops");
    t.iops_per_gib = row.get_number("iops_per_gib");
    if (const auto* v = row.find("min_iops"); v && v->is_number()) t.min_iops = v->as_number();
    if (const auto* v = row.find("max_iops"); v && v->is_number()) t.max_iops = v->as_number();
    t.note = row.get_string("note");
    t.source = row.get_string("source");
    t.as_of = row.get_string("as_of");
    std::string where = "disk_tiers.json: tiers[" + std::to_string(i) + "]";
    if (t.key.empty() || t.name.empty() || t.source.empty() || t.as_of.empty())
      return make_error(ErrorCode::parse_error, where + ": key, name, source and as_of are required");
    if (t.base_iops < 0 || t.iops_per_gib < 0 || (t.base_iops == 0 && t.iops_per_gib == 0))
      return make_error(ErrorCode::parse_error, where + " (" + t.key + "): base_iops or iops_per_gib must be positive");
    for (const auto& other : tiers)
      if (other.key == t.key) return make_error(ErrorCode::parse_error, where + ": key \"" + t.key + "\" appears twice");
    tiers.push_back(std::move(t));
  }
  return tiers;
}

const std::vector<DiskTier>& disk_tiers() {
  // The embedded file is validated by the unit tests, so a failure here is a build defect.
  static const std::vector<DiskTier> tiers = [] {
    const EmbeddedFile* file = data::find_embedded("disk_tiers.json");
    if (!file) return std::vector<DiskTier>{};
    auto parsed = parse_disk_tiers(file->bytes);
    return parsed ? *parsed : std::vector<DiskTier>{};
  }();
  return tiers;
}

const DiskTier* find_disk_tier(std::string_view key) {
  for (const auto& t : disk_tiers())
    if (t.key == key) return &t;
  return nullptr;
}

}  // namespace gpuhost::bench
