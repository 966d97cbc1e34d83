#pragma once
// Test-only helpers; those whose implementation differs per OS are in test_support_posix.cc and
// test_support_win32.cc. Linked into platform_test and platform_test_child, never into gpuhost.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "platform/process.h"
#include "platform/system_info.h"

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

// From now on, the request `name` makes this process write "trapped <EVENT>\n" to stdout and exit
// with `exit_code`. POSIX: "int", "term", "hup", "usr1", "usr2" (the signal). Windows: "break"
// (console CTRL_BREAK_EVENT, and CTRL_C_EVENT, which Wine delivers instead; EVENT says which
// came). False for a name this OS does not know.
bool trap(const std::string& name, int exit_code);

// Whether process `pid` exists and has not exited (a zombie counts as exited).
bool process_is_running(long pid);

inline bool on_windows() {
  return current_os() == OsFamily::windows;
}

// find_executable tries PATHEXT on Windows, so the bare name finds platform_test_child.exe.
inline std::string child_path() {
  auto self = current_executable_path();
  auto dir = self ? std::filesystem::path(*self).parent_path() : std::filesystem::path(".");
  return find_executable((dir / "platform_test_child").string()).value_or("platform_test_child-missing");
}

// An empty folder of its own under the temp folder: TAG, this process and a counter in its name.
inline std::filesystem::path fresh_temp_dir(const char* tag) {
  static int counter = 0;
  auto dir = std::filesystem::temp_directory_path() /
             ("gpuhost-platform-test-" + std::to_string(current_process_id()) + "-" + tag +
              std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace gpuhost::platform::test_support
