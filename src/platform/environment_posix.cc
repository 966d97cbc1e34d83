#include <string>

#include <stdlib.h>

#include "platform/environment.h"

extern char** environ;

namespace gpuhost::platform {

std::optional<std::string> get_env(std::string_view name) {
  const char* value = ::getenv(std::string(name).c_str());
  if (!value) return std::nullopt;
  return std::string(value);
}

void set_env(std::string_view name, std::string_view value) {
  ::setenv(std::string(name).c_str(), std::string(value).c_str(), 1);
}

void unset_env(std::string_view name) {
  ::unsetenv(std::string(name).c_str());
}

std::vector<std::pair<std::string, std::string>> environment() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string_view text(*entry);
    std::size_t eq = text.find('=');
    if (eq == std::string_view::npos) continue;
    out.emplace_back(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return out;
}

char path_list_separator() {
  return ':';
}

}  // namespace gpuhost::platform
