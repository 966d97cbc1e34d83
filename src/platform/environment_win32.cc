#include <stdlib.h>

#include "platform/environment.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {
namespace {

class EnvironmentStrings {
 public:
  EnvironmentStrings() : m_block(GetEnvironmentStringsW()) {}
  EnvironmentStrings(const EnvironmentStrings&) = delete;
  EnvironmentStrings& operator=(const EnvironmentStrings&) = delete;
  ~EnvironmentStrings() {
    if (m_block) FreeEnvironmentStringsW(m_block);
  }
  [[nodiscard]] const wchar_t* get() const { return m_block; }

 private:
  wchar_t* m_block;
};

}  // namespace

std::optional<std::string> get_env(std::string_view name) {
  std::wstring wide_name = to_wide(name);
  std::wstring value(128, L'\0');
  for (;;) {
    SetLastError(ERROR_SUCCESS);
    DWORD n = GetEnvironmentVariableW(wide_name.c_str(), value.data(), static_cast<DWORD>(value.size()));
    if (n == 0) {
      if (GetLastError() == ERROR_ENVVAR_NOT_FOUND) return std::nullopt;
      return std::string();
    }
    if (n < value.size()) {
      value.resize(n);
      return to_utf8(value);
    }
    value.resize(n);
  }
}

// The CRT keeps its own copy for getenv(); both are updated so libraries that use either agree.
void set_env(std::string_view name, std::string_view value) {
  std::wstring wide_name = to_wide(name);
  std::wstring wide_value = to_wide(value);
  SetEnvironmentVariableW(wide_name.c_str(), wide_value.c_str());
  _wputenv_s(wide_name.c_str(), wide_value.c_str());
}

void unset_env(std::string_view name) {
  std::wstring wide_name = to_wide(name);
  SetEnvironmentVariableW(wide_name.c_str(), nullptr);
  _wputenv_s(wide_name.c_str(), L"");
}

std::vector<std::pair<std::string, std::string>> environment() {
  std::vector<std::pair<std::string, std::string>> out;
  EnvironmentStrings strings;
  for (const wchar_t* entry = strings.get(); entry && *entry; entry += wcslen(entry) + 1) {
    std::wstring_view text(entry);
    // Entries such as "=C:=C:\work" hold per-drive working directories, not variables.
    if (text.starts_with(L'=')) continue;
    std::size_t eq = text.find(L'=');
    if (eq == std::wstring_view::npos) continue;
    out.emplace_back(to_utf8(text.substr(0, eq)), to_utf8(text.substr(eq + 1)));
  }
  return out;
}

char path_list_separator() {
  return ';';
}

}  // namespace gpuhost::platform
