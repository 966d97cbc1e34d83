#pragma once

#include <string>

#include "base/error.h"

namespace gpuhost::platform {

// A dynamically loaded library (dlopen / LoadLibraryExW), unloaded when the last owner goes.
// Move-only. Thread-safe for concurrent symbol() calls.
class SharedLibrary {
 public:
  // Loads `name_or_path`: a bare file name is searched the OS way (LD_LIBRARY_PATH, ld.so cache;
  // on Windows the application directory and System32 only, never the current directory).
  // Errors: not_found when no such library exists, io_error when it exists but cannot load
  // (wrong architecture, missing dependency), with the loader's message.
  [[nodiscard]] static Result<SharedLibrary> open(const std::string& name_or_path);

  SharedLibrary() = default;
  SharedLibrary(SharedLibrary&& other) noexcept;
  SharedLibrary& operator=(SharedLibrary&& other) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  ~SharedLibrary();

  // Address of an exported symbol, or nullptr when it is not exported.
  [[nodiscard]] void* symbol(const char* name) const;
  [[nodiscard]] bool is_open() const { return m_handle != nullptr; }
  // The path or name the library was opened with.
  [[nodiscard]] const std::string& name() const { return m_name; }

 private:
  void* m_handle = nullptr;
  std::string m_name;
};

}  // namespace gpuhost::platform
