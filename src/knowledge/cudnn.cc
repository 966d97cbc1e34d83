#include "knowledge/cudnn.h"

#include <algorithm>

#include "base/strings.h"
#include "knowledge/parsers.h"
#include "knowledge/row_reader.h"

namespace gpuhost::knowledge {

bool CudnnRelease::fits_cuda(const Version& cuda) const {
  Version minor = major_minor(cuda);
  for (const auto& [first, last] : cuda_ranges)
    if (first <= minor && minor <= last) return true;
  return false;
}

bool CudnnRelease::fits_compute_capability(ComputeCapability cc) const {
  return (!cc_min || *cc_min <= cc) && (!cc_max || cc <= *cc_max);
}

std::vector<const CudnnRelease*> CudnnTable::for_cuda(const Version& cuda) const {
  std::vector<const CudnnRelease*> out;
  for (const auto& row : releases)
    if (row.fits_cuda(cuda)) out.push_back(&row);
  return out;
}

std::vector<const CudnnRelease*> CudnnTable::for_cuda(const Version& cuda, ComputeCapability cc) const {
  std::vector<const CudnnRelease*> out;
  for (const auto* row : for_cuda(cuda))
    if (row->fits_compute_capability(cc)) out.push_back(row);
  return out;
}

namespace detail {

Result<CudnnTable> parse_cudnn(const json::Value& document, const std::string& location) {
  CudnnTable table;
  RowReader root(document, location);
  read_header(root);
  const auto* rows = root.array("releases");
  if (auto done = root.finish(); !done) return std::unexpected(done.error());

  std::vector<std::string> keys;
  for (std::size_t i = 0; i < rows->size(); ++i) {
    RowReader row((*rows)[i], row_location(location, "releases", i));
    CudnnRelease release;
    release.cudnn = row.version("cudnn");
    auto ranges = row.string_list("cuda");
    row.set_key("cudnn " + release.cudnn.str() + " for CUDA " + join(ranges, ","));
    for (const auto& text : ranges) {
      auto dash = text.find('-');
      auto first = parse_exact_version(text.substr(0, dash));
      auto last = dash == std::string::npos ? first : parse_exact_version(text.substr(dash + 1));
      if (!first || !last || first->parts().size() != 2 || last->parts().size() != 2 || *last < *first) {
        row.fail("cuda", "expected \"A.B\" or \"A.B-C.D\" (ascending), found \"" + text + "\"");
        break;
      }
      release.cuda_ranges.emplace_back(*first, *last);
    }
    release.min_driver_linux = row.optional_version("min_driver_linux_x86_64");
    release.min_driver_windows = row.optional_version("min_driver_windows");
    release.cc_min = row.optional_compute_capability("cc_min");
    release.cc_max = row.optional_compute_capability("cc_max");
    if (row.ok() && release.cc_min && release.cc_max && *release.cc_max < *release.cc_min)
      row.fail("cc_max", "is below cc_min");
    release.provenance = row.provenance();
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    keys.push_back(release.cudnn.str() + " " + join(ranges, ","));
    table.releases.push_back(std::move(release));
  }
  check_duplicates(root, "releases", keys);
  if (auto done = root.finish(); !done) return std::unexpected(done.error());
  std::stable_sort(table.releases.begin(), table.releases.end(),
                   [](const auto& a, const auto& b) { return a.cudnn > b.cudnn; });
  return table;
}

}  // namespace detail
}  // namespace gpuhost::knowledge
