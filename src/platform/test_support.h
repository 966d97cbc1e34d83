#pragma once
// Test-only helpers whose implementation differs per OS (test_support_posix.cc,
// test_support_win32.cc). Linked into platform_test and platform_test_child, never into gpuhost.

#include <cstdint>
#include <string>
#include <vector>

namespace gpuhost::platform::test_support {

// A TCP socket listening on 127.0.0.1 at a port the OS picks; closed on destruction.
// port() is 0 when the socket could not be set up.
class LoopbackListener {
 public:
  LoopbackListener();
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;
  ~LoopbackListener();

  [[nodiscard]] int port() const { return m_port; }

 private:
  std::intptr_t m_socket = -1;
  int m_port = 0;
};

// Starts this program again with `args`, sharing its stdin/stdout/stderr, and does not wait for
// it. False when it could not be started.
bool spawn_self(const std::vector<std::string>& args);

}  // namespace gpuhost::platform::test_support
