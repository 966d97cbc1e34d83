#include <utility>

#include "platform/shared_library.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {

Result<SharedLibrary> SharedLibrary::open(const std::string& name_or_path) {
  std::wstring wide = to_wide(name_or_path);
  // A bare name is searched in the application directory and System32 only: never the current
  // directory, where a planted nvml.dll would be loaded into an elevated process.
  bool bare = name_or_path.find_first_of("\\/") == std::string::npos;
  DWORD flags = bare ? (LOAD_LIBRARY_SEARCH_APPLICATION_DIR | LOAD_LIBRARY_SEARCH_SYSTEM32) : 0;
  HMODULE module = LoadLibraryExW(wide.c_str(), nullptr, flags);
  if (!module) return std::unexpected(win32_error("loading " + name_or_path, GetLastError()));
  SharedLibrary lib;
  lib.m_handle = reinterpret_cast<void*>(module);
  lib.m_name = name_or_path;
  return lib;
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : m_handle(std::exchange(other.m_handle, nullptr)), m_name(std::move(other.m_name)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
  if (this != &other) {
    if (m_handle) FreeLibrary(reinterpret_cast<HMODULE>(m_handle));
    m_handle = std::exchange(other.m_handle, nullptr);
    m_name = std::move(other.m_name);
  }
  return *this;
}

SharedLibrary::~SharedLibrary() {
  if (m_handle) FreeLibrary(reinterpret_cast<HMODULE>(m_handle));
}

void* SharedLibrary::symbol(const char* name) const {
  if (!m_handle) return nullptr;
  return reinterpret_cast<void*>(GetProcAddress(reinterpret_cast<HMODULE>(m_handle), name));
}

}  // namespace gpuhost::platform
