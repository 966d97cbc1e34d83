#include "knowledge/cuda_drivers.h"

#include <algorithm>

#include "knowledge/parsers.h"
#include "knowledge/row_reader.h"

namespace gpuhost::knowledge {

const char* driver_verdict_name(DriverVerdictKind kind) {
  switch (kind) {
    case DriverVerdictKind::supported: return "supported";
    case DriverVerdictKind::supported_via_minor_version_compat: return "supported_via_minor_version_compat";
    case DriverVerdictKind::unsupported: return "unsupported";
    case DriverVerdictKind::unknown: return "unknown";
  }
  return "unknown";
}

const CudaToolkitRelease* CudaDriverTable::find_release(const Version& cuda) const {
  Version minor = major_minor(cuda);
  const CudaToolkitRelease* lowest = nullptr;
  for (const auto& row : releases) {  // newest first
    if (major_minor(row.cuda) != minor) continue;
    if (cuda.parts().size() >= 3 && row.cuda <= cuda) return &row;
    lowest = &row;
  }
  return lowest;
}

std::optional<Version> CudaDriverTable::min_driver(const Version& cuda, Os os) const {
  const CudaToolkitRelease* row = find_release(cuda);
  if (!row) return std::nullopt;
  return row->min_driver(os);
}

const MinorVersionFloor* CudaDriverTable::minor_version_floor(int cuda_major) const {
  for (const auto& floor : minor_version_floors)
    if (floor.cuda_major == cuda_major) return &floor;
  return nullptr;
}

const CudaToolkitRelease* CudaDriverTable::newest_fully_supported(const Version& driver, Os os) const {
  for (const auto& row : releases) {
    const auto& needed = row.min_driver(os);
    if (needed && *needed <= driver) return &row;
  }
  return nullptr;
}

const DriverBranch* CudaDriverTable::driver_branch(const Version& driver) const {
  for (const auto& branch : driver_branches)
    if (branch.branch == driver.major()) return &branch;
  return nullptr;
}

DriverVerdict CudaDriverTable::verdict(const DriverQuery& query) const {
  DriverVerdict verdict;
  verdict.release = find_release(query.cuda);
  verdict.floor = minor_version_floor(query.cuda.major());
  std::optional<Version> full = verdict.release ? verdict.release->min_driver(query.os) : std::nullopt;
  if (verdict.floor) verdict.minor_version_floor = verdict.floor->min_driver(query.os);
  verdict.required_driver = full ? full : verdict.minor_version_floor;

  const std::string cuda = "CUDA " + major_minor(query.cuda).str();
  const std::string driver = "driver " + query.driver.str();
  const std::string os = os_name(query.os);
  std::string needs;
  if (full) {
    needs = cuda + " needs driver >= " + full->str() + " on " + os;
  } else if (verdict.release) {
    needs = "NVIDIA lists no " + os + " minimum for " + cuda +
            (query.os == Os::windows && query.cuda.major() >= 13
                 ? " (the Windows installer no longer bundles the driver)"
                 : "");
  } else {
    needs = cuda + " is not in the compatibility table (newest known: " +
            (releases.empty() ? std::string("none") : releases.front().release) + ")";
  }

  if (full && query.driver >= *full) {
    verdict.kind = DriverVerdictKind::supported;
    verdict.explanation = needs + "; " + driver + " meets it.";
    return verdict;
  }
  if (query.driver_cuda_version && major_minor(*query.driver_cuda_version) >= major_minor(query.cuda)) {
    verdict.kind = DriverVerdictKind::supported;
    verdict.explanation = needs + "; " + driver + " reports CUDA " +
                          major_minor(*query.driver_cuda_version).str() + " as its newest, which covers " +
                          cuda + ".";
    return verdict;
  }
  if (verdict.minor_version_floor && query.driver >= *verdict.minor_version_floor) {
    verdict.kind = DriverVerdictKind::supported_via_minor_version_compat;
    verdict.explanation = needs + "; " + driver + " runs it through minor-version compatibility (" +
                          std::to_string(verdict.floor->cuda_major) +
                          ".x needs >= " + verdict.minor_version_floor->str() +
                          ") with a limited feature set: kernels JIT-compiled from newer PTX may fail "
                          "with cudaErrorUnsupportedPtxVersion.";
    return verdict;
  }
  if (!verdict.required_driver) {
    verdict.kind = DriverVerdictKind::unknown;
    verdict.explanation = needs + ", so " + driver + " cannot be judged.";
    return verdict;
  }
  verdict.kind = DriverVerdictKind::unsupported;
  verdict.explanation = needs;
  if (full && verdict.minor_version_floor)
    verdict.explanation +=
        " (minor-version compatibility needs >= " + verdict.minor_version_floor->str() + ")";
  else if (!full)
    verdict.explanation += "; the " + std::to_string(verdict.floor->cuda_major) +
                           ".x family needs >= " + verdict.minor_version_floor->str();
  verdict.explanation +=
      "; " + driver + " is older: install driver >= " + verdict.required_driver->str() + ".";
  return verdict;
}

namespace detail {

Result<CudaDriverTable> parse_cuda_drivers(const json::Value& document, const std::string& location) {
  CudaDriverTable table;
  RowReader root(document, location);
  read_header(root);
  const auto* toolkits = root.array("toolkits");
  const auto* floors = root.array("minor_version_compatibility");
  const auto* branches = root.optional_array("driver_branches");
  table.facts = read_facts(root, location);
  if (auto done = root.finish(); !done) return std::unexpected(done.error());

  std::vector<std::string> keys;
  for (std::size_t i = 0; i < toolkits->size(); ++i) {
    RowReader row((*toolkits)[i], row_location(location, "toolkits", i));
    CudaToolkitRelease release;
    release.cuda = row.version("cuda");
    row.set_key("cuda " + release.cuda.str());
    release.release = row.string("release");
    release.min_driver_linux = row.optional_version("min_driver_linux_x86_64");
    release.min_driver_windows = row.optional_version("min_driver_windows");
    release.provenance = row.provenance();
    if (row.ok() && !release.min_driver_linux && !release.min_driver_windows)
      row.fail("min_driver_linux_x86_64", "a release needs a minimum driver for at least one OS");
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    keys.push_back(release.cuda.str());
    table.releases.push_back(std::move(release));
  }
  check_duplicates(root, "toolkits", keys);

  keys.clear();
  for (std::size_t i = 0; i < floors->size(); ++i) {
    RowReader row((*floors)[i], row_location(location, "minor_version_compatibility", i));
    MinorVersionFloor floor;
    std::int64_t major = row.integer("cuda_major");
    if (row.ok() && (major < 11 || major > 99))
      row.fail("cuda_major", "expected 11 or later (minor-version compatibility began with CUDA 11)");
    floor.cuda_major = static_cast<int>(major);
    row.set_key("cuda_major " + std::to_string(major));
    floor.min_driver_linux = row.version("min_driver_linux_x86_64");
    floor.min_driver_windows = row.version("min_driver_windows");
    floor.upper_driver_exclusive = row.optional_version("upper_driver_exclusive");
    floor.provenance = row.provenance();
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    keys.push_back(std::to_string(major));
    table.minor_version_floors.push_back(std::move(floor));
  }
  check_duplicates(root, "minor_version_compatibility", keys);

  keys.clear();
  for (std::size_t i = 0; branches && i < branches->size(); ++i) {
    RowReader row((*branches)[i], row_location(location, "driver_branches", i));
    DriverBranch branch;
    branch.branch = static_cast<int>(row.integer("branch"));
    row.set_key("R" + std::to_string(branch.branch));
    branch.kind = row.string("kind");
    branch.end_of_life = row.string("end_of_life");
    branch.provenance = row.provenance();
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    keys.push_back(std::to_string(branch.branch));
    table.driver_branches.push_back(std::move(branch));
  }
  check_duplicates(root, "driver_branches", keys);
  if (auto done = root.finish(); !done) return std::unexpected(done.error());

  std::stable_sort(table.releases.begin(), table.releases.end(),
                   [](const auto& a, const auto& b) { return a.cuda > b.cuda; });
  std::stable_sort(table.minor_version_floors.begin(), table.minor_version_floors.end(),
                   [](const auto& a, const auto& b) { return a.cuda_major > b.cuda_major; });
  return table;
}

}  // namespace detail
}  // namespace gpuhost::knowledge
