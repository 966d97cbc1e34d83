#include "platform/registry.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {
namespace {

class UniqueKey {
 public:
  UniqueKey() = default;
  UniqueKey(UniqueKey&& o) noexcept : m_key(o.m_key) { o.m_key = nullptr; }
  UniqueKey& operator=(UniqueKey&&) = delete;
  UniqueKey(const UniqueKey&) = delete;
  UniqueKey& operator=(const UniqueKey&) = delete;
  ~UniqueKey() {
    if (m_key) RegCloseKey(m_key);
  }
  [[nodiscard]] HKEY get() const { return m_key; }
  HKEY* out() { return &m_key; }

 private:
  HKEY m_key = nullptr;
};

std::string display_name(RegistryRoot root, std::string_view key) {
  return std::string(root == RegistryRoot::local_machine ? "HKLM\\" : "HKCU\\") + std::string(key);
}

Result<UniqueKey> open_key(RegistryRoot root, std::string_view key) {
  HKEY parent = root == RegistryRoot::local_machine ? HKEY_LOCAL_MACHINE : HKEY_CURRENT_USER;
  UniqueKey opened;
  // The 64-bit view, so a 32-bit build would read what 64-bit tools (and the driver installer) wrote.
  LSTATUS status = RegOpenKeyExW(parent, to_wide(key).c_str(), 0, KEY_READ | KEY_WOW64_64KEY, opened.out());
  if (status != ERROR_SUCCESS)
    return std::unexpected(
        win32_error("opening registry key " + display_name(root, key), static_cast<DWORD>(status)));
  return opened;
}

std::string value_name(RegistryRoot root, std::string_view key, std::string_view value) {
  return "reading registry value " + display_name(root, key) + "\\" + std::string(value);
}

}  // namespace

Result<std::uint32_t> registry_read_dword(RegistryRoot root, std::string_view key, std::string_view value) {
  auto opened = open_key(root, key);
  if (!opened) return std::unexpected(opened.error());
  DWORD data = 0;
  DWORD size = sizeof data;
  LSTATUS status =
      RegGetValueW(opened->get(), nullptr, to_wide(value).c_str(), RRF_RT_REG_DWORD, nullptr, &data, &size);
  if (status == ERROR_UNSUPPORTED_TYPE)
    return make_error(ErrorCode::parse_error, value_name(root, key, value) + ": not a REG_DWORD");
  if (status != ERROR_SUCCESS)
    return std::unexpected(win32_error(value_name(root, key, value), static_cast<DWORD>(status)));
  return static_cast<std::uint32_t>(data);
}

Result<std::string> registry_read_string(RegistryRoot root, std::string_view key, std::string_view value) {
  auto opened = open_key(root, key);
  if (!opened) return std::unexpected(opened.error());
  std::wstring wide_value = to_wide(value);
  std::wstring data(64, L'\0');
  for (;;) {
    DWORD size = static_cast<DWORD>(data.size() * sizeof(wchar_t));
    // RRF_RT_REG_SZ also takes REG_EXPAND_SZ, expanded; naming RRF_RT_REG_EXPAND_SZ without
    // RRF_NOEXPAND is ERROR_INVALID_PARAMETER.
    LSTATUS status =
        RegGetValueW(opened->get(), nullptr, wide_value.c_str(), RRF_RT_REG_SZ, nullptr, data.data(), &size);
    if (status == ERROR_MORE_DATA) {
      data.resize(size / sizeof(wchar_t) + 1);
      continue;
    }
    if (status == ERROR_UNSUPPORTED_TYPE)
      return make_error(ErrorCode::parse_error, value_name(root, key, value) + ": not a REG_SZ");
    if (status != ERROR_SUCCESS)
      return std::unexpected(win32_error(value_name(root, key, value), static_cast<DWORD>(status)));
    data.resize(size / sizeof(wchar_t));
    while (!data.empty() && data.back() == L'\0') data.pop_back();
    return to_utf8(data);
  }
}

Result<std::vector<std::string>> registry_subkeys(RegistryRoot root, std::string_view key) {
  auto opened = open_key(root, key);
  if (!opened) return std::unexpected(opened.error());
  std::vector<std::string> names;
  // Key names are at most 255 characters.
  wchar_t name[256];
  for (DWORD index = 0;; ++index) {
    DWORD length = static_cast<DWORD>(std::size(name));
    LSTATUS status = RegEnumKeyExW(opened->get(), index, name, &length, nullptr, nullptr, nullptr, nullptr);
    if (status == ERROR_NO_MORE_ITEMS) break;
    if (status != ERROR_SUCCESS)
      return std::unexpected(
          win32_error("listing registry key " + display_name(root, key), static_cast<DWORD>(status)));
    names.push_back(to_utf8(std::wstring_view(name, length)));
  }
  return names;
}

}  // namespace gpuhost::platform
