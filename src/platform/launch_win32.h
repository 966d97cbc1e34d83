#pragma once
// How a child is started on Windows, used by ChildProcess (child_process_win32.cc), on which
// run_process is built, and by find_executable (process_win32.cc). Only the *_win32.cc files of
// platform/ include this.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "platform/win32_util.h"

namespace gpuhost::platform::launch {

enum class Matches { first, all };

// Files named `name` (trying PATHEXT extensions, as CreateProcess and cmd.exe resolve names) in the
// ';'-separated `path_value`, or `name` itself when it holds a directory; one file per directory.
[[nodiscard]] std::vector<std::string> search_path(std::string_view name, std::string_view path_value,
                                                   Matches matches);

// The file argv[0] names, found on the child's PATH (an override in `environment` wins). Errors:
// invalid_argument for an empty argv, not_found when there is no such program.
[[nodiscard]] Result<std::string> resolve_program(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& environment);

// argv quoted for CommandLineToArgvW and the MSVC runtime, joined by spaces.
[[nodiscard]] std::wstring command_line(const std::vector<std::string>& argv);

// The inherited environment with the overrides applied, as CreateProcessW wants it with
// CREATE_UNICODE_ENVIRONMENT: sorted by name, case-insensitively, each "name=value"
// NUL-terminated, one more NUL at the end.
[[nodiscard]] std::wstring environment_block(
    const std::vector<std::pair<std::string, std::string>>& overrides);

// The null device, inheritable, for a child's stdin.
[[nodiscard]] Result<UniqueHandle> open_null_input();

// A kill-on-close Job Object: closing its last handle ends every process in the tree.
[[nodiscard]] Result<UniqueHandle> make_job();

// One end of an overlapped named pipe, with at most one read or write in flight. The destructor
// cancels that operation and waits for it, so the buffer outlives the kernel's use of it.
// Not thread-safe: one thread drives it.
class PipeEnd {
 public:
  PipeEnd() = default;
  PipeEnd(const PipeEnd&) = delete;
  PipeEnd& operator=(const PipeEnd&) = delete;
  ~PipeEnd() { close(); }

  // Creates the pipe; `child_end` receives the inheritable end the child uses.
  Result<void> create(bool child_writes, UniqueHandle& child_end);

  [[nodiscard]] bool open() const { return m_handle.valid(); }
  // Signaled when the operation in flight completes.
  [[nodiscard]] HANDLE event() const { return m_event.get(); }

  // Starts the next read; closes the pipe when the child's end is gone.
  void start_read();
  // After event() is signaled: the bytes the read got, valid until the next start_read(); or
  // nothing after closing the pipe because every writer, grandchildren included, has gone.
  [[nodiscard]] std::optional<std::string_view> complete_read();
  // complete_read, appending to `out` (keeping at most `limit` bytes), then start_read.
  void finish_read(std::string& out, std::size_t limit, bool& truncated);

  // Starts writing the rest of `data` from `offset`; closes the pipe when done or refused.
  void start_write(std::string_view data, std::size_t offset);
  // Bytes the finished write took, or 0 after closing the pipe on failure.
  std::size_t finish_write();

  void close();

 private:
  static constexpr DWORD k_buffer_size = 64 * 1024;
  UniqueHandle m_handle;
  UniqueHandle m_event;
  OVERLAPPED m_overlapped{};
  std::vector<char> m_buffer;
  bool m_pending = false;
};

// A PROC_THREAD_ATTRIBUTE_LIST for STARTUPINFOEXW.
class AttributeList {
 public:
  AttributeList() = default;
  AttributeList(const AttributeList&) = delete;
  AttributeList& operator=(const AttributeList&) = delete;
  ~AttributeList();

  // Limits inheritance to `handles`, so concurrent spawns elsewhere in gpuhost cannot leak theirs
  // into this child. `handles` must outlive CreateProcessW.
  Result<void> inherit_only(HANDLE* handles, std::size_t count);
  [[nodiscard]] LPPROC_THREAD_ATTRIBUTE_LIST get() {
    return reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(m_storage.data());
  }

 private:
  std::vector<char> m_storage;
  bool m_initialized = false;
};

}  // namespace gpuhost::platform::launch
