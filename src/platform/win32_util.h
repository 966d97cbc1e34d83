#pragma once
// Helpers shared by the *_win32.cc files only. Includes <windows.h>; never include from a header
// outside platform/.

#include <windows.h>

#include <string>
#include <string_view>

#include "base/error.h"

namespace gpuhost::platform {

[[nodiscard]] std::wstring to_wide(std::string_view utf8);
[[nodiscard]] std::string to_utf8(std::wstring_view wide);

// "<context>: <system message>", with ERROR_FILE_NOT_FOUND / PATH_NOT_FOUND / MOD_NOT_FOUND
// mapped to not_found and ACCESS_DENIED to permission_denied.
[[nodiscard]] Error win32_error(std::string_view context, DWORD code);

// Owns a HANDLE; closes it on destruction. INVALID_HANDLE_VALUE and nullptr both mean empty.
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(HANDLE h) : m_handle(h) {}
  UniqueHandle(UniqueHandle&& o) noexcept : m_handle(o.release()) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  [[nodiscard]] HANDLE get() const { return m_handle; }
  [[nodiscard]] bool valid() const { return m_handle && m_handle != INVALID_HANDLE_VALUE; }
  HANDLE release() {
    HANDLE h = m_handle;
    m_handle = nullptr;
    return h;
  }
  void reset(HANDLE h = nullptr) {
    if (valid()) CloseHandle(m_handle);
    m_handle = h;
  }

 private:
  HANDLE m_handle = nullptr;
};

}  // namespace gpuhost::platform
