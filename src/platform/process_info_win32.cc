#include <string>

#include <windows.h>

#include "platform/process_info.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {

std::optional<std::string> process_name(unsigned pid) {
  if (pid == 0) return std::nullopt;
  // PROCESS_QUERY_LIMITED_INFORMATION is granted for most processes of other users too
  // (QueryFullProcessImageNameW, Microsoft Learn).
  UniqueHandle process(OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid));
  if (!process.valid()) return std::nullopt;
  std::wstring path(32768, L'\0');
  DWORD size = static_cast<DWORD>(path.size());
  if (!QueryFullProcessImageNameW(process.get(), 0, path.data(), &size)) return std::nullopt;
  path.resize(size);
  const auto slash = path.find_last_of(L"\\/");
  const std::wstring name = slash == std::wstring::npos ? path : path.substr(slash + 1);
  if (name.empty()) return std::nullopt;
  return to_utf8(name);
}

Result<GroupActivity> read_group_activity(long) {
  return make_error(ErrorCode::unsupported, "the threads of a process group are read on Linux only");
}

std::optional<double> pressure_some_avg10(std::string_view) {
  return std::nullopt;
}

std::optional<std::uint64_t> swapped_in_pages() {
  return std::nullopt;
}

}  // namespace gpuhost::platform
