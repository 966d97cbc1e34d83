#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gpuhost::platform {

// What to run and how. argv[0] is a path or a name looked up on PATH.
struct ProcessOptions {
  std::vector<std::string> argv;
  std::optional<std::string> working_directory;
  // Added to (or replacing) the inherited environment for the child only.
  std::vector<std::pair<std::string, std::string>> environment;
  // The whole process tree is killed when this passes.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  // Output past this many bytes per stream is dropped (and `output_truncated` set).
  std::size_t max_output_bytes = 8u << 20;
  // Text written to the child's stdin, then closed. Without it stdin is the null device.
  std::optional<std::string> stdin_text;
};

struct ProcessResult {
  int exit_code = -1;         // valid when !timed_out && !signaled
  bool timed_out = false;     // we killed it at the deadline
  bool signaled = false;      // POSIX: ended by a signal (crash); Windows: never
  int signal = 0;             // the signal when signaled
  bool output_truncated = false;
  std::string stdout_text;
  std::string stderr_text;
  std::chrono::milliseconds elapsed{0};

  [[nodiscard]] bool succeeded() const { return !timed_out && !signaled && exit_code == 0; }
};

// Runs a child to completion, capturing stdout and stderr, in its own process group (POSIX) or a
// kill-on-close Job Object (Windows) so a timeout kills grandchildren too. Never hangs past
// `timeout` plus a short grace. Processes the child leaves behind (a daemon still holding its
// output) are killed before this returns. Errors: not_found when the program does not exist,
// io_error when it cannot be started. A non-zero exit is a successful Result with exit_code set.
// Windows: arguments are quoted for the MSVC runtime's parser; a .bat/.cmd program is parsed by
// cmd.exe instead, so give one no untrusted arguments. Thread-safe.
[[nodiscard]] Result<ProcessResult> run_process(const ProcessOptions& options);

// The first match for `name` on PATH (with PATHEXT on Windows), or nullopt. A name containing a
// directory separator is checked as given.
[[nodiscard]] std::optional<std::string> find_executable(std::string_view name);

// Every match for `name` on PATH, in PATH order, without duplicates of the same file.
[[nodiscard]] std::vector<std::string> find_all_executables(std::string_view name);

// The id of this process.
[[nodiscard]] long current_process_id();

// Absolute path of this program's executable (/proc/self/exe, GetModuleFileNameW).
[[nodiscard]] Result<std::string> current_executable_path();

}  // namespace gpuhost::platform
