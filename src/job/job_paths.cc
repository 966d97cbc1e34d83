#include "job/job_paths.h"

#include <array>
#include <system_error>

#include "base/strings.h"
#include "platform/files.h"
#include "platform/state_root.h"

namespace gpuhost::job {
namespace {

std::filesystem::path path_from_utf8(std::string_view text) {
  return std::filesystem::path(std::u8string(text.begin(), text.end()));
}

}  // namespace

bool is_job_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

bool is_valid_job_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  for (char c : name)
    if (!is_job_name_char(c)) return false;
  // Windows opens the device for these whatever the extension ("nul.txt" too).
  std::string base = to_lower(name.substr(0, name.find('.')));
  static constexpr std::array<std::string_view, 4> devices = {"con", "prn", "aux", "nul"};
  for (std::string_view d : devices)
    if (base == d) return false;
  if (base.size() == 4 && (base.starts_with("com") || base.starts_with("lpt")) && base[3] >= '0' &&
      base[3] <= '9')
    return false;
  return true;
}

std::filesystem::path jobs_root() {
  return platform::state_root() / "jobs";
}

JobPaths job_paths(const std::filesystem::path& root, const std::string& name) {
  return JobPaths{root / path_from_utf8(name)};
}

Result<std::vector<std::string>> list_jobs(const std::filesystem::path& root) {
  auto entries = platform::list_directory(root);
  if (!entries) {
    if (entries.error().code == ErrorCode::not_found) return std::vector<std::string>{};
    return std::unexpected(with_context(entries.error(), "listing jobs"));
  }
  std::vector<std::string> names;
  for (const auto& entry : *entries) {
    if (!entry.is_directory || !is_valid_job_name(entry.name)) continue;
    JobPaths paths = job_paths(root, entry.name);
    std::error_code ec;
    if (std::filesystem::exists(paths.journal(), ec) || std::filesystem::exists(paths.spec(), ec))
      names.push_back(entry.name);
  }
  return names;
}

}  // namespace gpuhost::job
