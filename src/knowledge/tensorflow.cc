#include "knowledge/tensorflow.h"

#include <algorithm>

#include "base/strings.h"
#include "knowledge/parsers.h"
#include "knowledge/row_reader.h"

namespace gpuhost::knowledge {

bool TensorflowRelease::supports_python(const Version& python) const {
  Version minor = major_minor(python);
  return python_min <= minor && minor <= python_max;
}

const TensorflowRelease* TensorflowTable::find_release(const Version& tensorflow) const {
  for (const auto& release : releases)  // newest first
    if (major_minor(release.version) == major_minor(tensorflow)) return &release;
  return nullptr;
}

namespace detail {

Result<TensorflowTable> parse_tensorflow(const json::Value& document, const std::string& location) {
  TensorflowTable table;
  RowReader root(document, location);
  read_header(root);
  const auto* rows = root.array("releases");
  table.facts = read_facts(root, location);
  if (auto done = root.finish(); !done) return std::unexpected(done.error());

  std::vector<std::string> keys;
  for (std::size_t i = 0; i < rows->size(); ++i) {
    RowReader row((*rows)[i], row_location(location, "releases", i));
    TensorflowRelease release;
    release.version = row.version("version");
    row.set_key("tensorflow " + release.version.str());
    release.python_min = row.version("python_min");
    release.python_max = row.version("python_max");
    if (row.ok() && release.python_max < release.python_min) row.fail("python_max", "is below python_min");
    release.cudnn = row.version("cudnn");
    release.cuda = row.version("cuda");
    release.windows_native_gpu = row.boolean("windows_native_gpu");
    release.provenance = row.provenance();
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    keys.push_back(release.version.str());
    table.releases.push_back(std::move(release));
  }
  check_duplicates(root, "releases", keys);
  if (auto done = root.finish(); !done) return std::unexpected(done.error());

  // The typed rules: each must be present with a parseable value.
  auto value = [&](std::string_view id) -> Result<std::string> {
    const Fact* fact = find_fact(table.facts, id);
    if (!fact || fact->value.empty())
      return make_error(ErrorCode::parse_error, location + ": facts: required fact \"" + std::string(id) +
                                                    "\" with a value is missing");
    return fact->value;
  };
  auto version = [&](std::string_view id) -> Result<Version> {
    auto text = value(id);
    if (!text) return std::unexpected(text.error());
    auto parsed = parse_exact_version(*text);
    if (!parsed)
      return make_error(ErrorCode::parse_error, location + ": facts (id " + std::string(id) +
                                                    "): field \"value\": expected a version, found \"" +
                                                    *text + "\"");
    return *parsed;
  };
  struct VersionRule {
    const char* id;
    Version* out;
  };
  for (auto [id, out] : {VersionRule{"gpu_in_tensorflow_since", &table.rules.gpu_in_tensorflow_since},
                         VersionRule{"last_native_windows_gpu", &table.rules.last_native_windows_gpu},
                         VersionRule{"and_cuda_since", &table.rules.and_cuda_since},
                         VersionRule{"linux_driver_floor", &table.rules.linux_driver_floor},
                         VersionRule{"wsl_driver_floor", &table.rules.wsl_driver_floor}}) {
    auto parsed = version(id);
    if (!parsed) return std::unexpected(parsed.error());
    *out = *parsed;
  }
  auto build = value("wsl_min_windows_build");
  if (!build) return std::unexpected(build.error());
  auto build_number = parse_int(*build);
  if (!build_number || *build_number <= 0)
    return make_error(
        ErrorCode::parse_error,
        location +
            ": facts (id wsl_min_windows_build): field \"value\": expected a Windows build number, found \"" +
            *build + "\"");
  table.rules.wsl_min_windows_build = static_cast<int>(*build_number);
  for (auto [id, out] :
       {std::pair<const char*, std::string*>{"linux_pip_and_cuda", &table.rules.linux_pip_and_cuda},
        std::pair<const char*, std::string*>{"windows_native_conda", &table.rules.windows_native_conda},
        std::pair<const char*, std::string*>{"windows_native_pip", &table.rules.windows_native_pip},
        std::pair<const char*, std::string*>{"tensorflow_gpu_removed",
                                             &table.rules.tensorflow_gpu_removed}}) {
    auto text = value(id);
    if (!text) return std::unexpected(text.error());
    *out = *text;
  }
  if (table.rules.linux_pip_and_cuda.find("{version}") == std::string::npos)
    return make_error(ErrorCode::parse_error,
                      location + ": facts (id linux_pip_and_cuda): field \"value\": must contain {version}");

  std::stable_sort(table.releases.begin(), table.releases.end(),
                   [](const auto& a, const auto& b) { return a.version > b.version; });
  return table;
}

}  // namespace detail
}  // namespace gpuhost::knowledge
