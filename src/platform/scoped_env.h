#pragma once
// For tests: an environment variable set (or removed) for one scope.

#include <optional>
#include <string>
#include <utility>

#include "platform/environment.h"

namespace gpuhost::platform {

// Sets (or, given nullopt, removes) an environment variable for one scope and restores the
// previous state after. Not thread-safe (see environment.h).
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value)
      : m_name(std::move(name)), m_old(get_env(m_name)) {
    if (value)
      set_env(m_name, *value);
    else
      unset_env(m_name);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    if (m_old)
      set_env(m_name, *m_old);
    else
      unset_env(m_name);
  }

 private:
  std::string m_name;
  std::optional<std::string> m_old;
};

}  // namespace gpuhost::platform
