#include <dlfcn.h>

#include <utility>

#include "platform/shared_library.h"

namespace gpuhost::platform {

Result<SharedLibrary> SharedLibrary::open(const std::string& name_or_path) {
  dlerror();
  void* handle = dlopen(name_or_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    std::string message = "loading " + name_or_path + ": " + (why ? why : "unknown dlopen error");
    // dlopen has no error codes; "No such file" is how glibc says the library is absent.
    bool absent = why && std::string(why).find("No such file") != std::string::npos;
    return make_error(absent ? ErrorCode::not_found : ErrorCode::io_error, std::move(message));
  }
  SharedLibrary lib;
  lib.m_handle = handle;
  lib.m_name = name_or_path;
  return lib;
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : m_handle(std::exchange(other.m_handle, nullptr)), m_name(std::move(other.m_name)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
  if (this != &other) {
    if (m_handle) dlclose(m_handle);
    m_handle = std::exchange(other.m_handle, nullptr);
    m_name = std::move(other.m_name);
  }
  return *this;
}

SharedLibrary::~SharedLibrary() {
  if (m_handle) dlclose(m_handle);
}

void* SharedLibrary::symbol(const char* name) const { return m_handle ? dlsym(m_handle, name) : nullptr; }

}  // namespace gpuhost::platform
