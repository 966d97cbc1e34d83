#include <algorithm>
#include <chrono>

#include "platform/environment.h"
#include "platform/launch_win32.h"
#include "platform/process.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {
namespace {

using Clock = std::chrono::steady_clock;

// When the child has exited but a grandchild still holds its stdout/stderr, we read for this
// long more, then terminate the job: run_process owns the whole tree.
constexpr auto k_drain_grace = std::chrono::milliseconds(500);
// After the job is terminated, how long its pipes get to report their last bytes.
constexpr auto k_final_drain = std::chrono::milliseconds(300);

}  // namespace

Result<ProcessResult> run_process(const ProcessOptions& options) {
  const std::string resolved = GPUHOST_TRY(launch::resolve_program(options.argv, options.environment));
  const std::string& program = options.argv[0];

  launch::PipeEnd out, err, in;
  UniqueHandle child_out, child_err, child_in;
  if (auto made = out.create(true, child_out); !made) return std::unexpected(made.error());
  if (auto made = err.create(true, child_err); !made) return std::unexpected(made.error());
  const bool feed_stdin = options.stdin_text && !options.stdin_text->empty();
  if (feed_stdin) {
    if (auto made = in.create(false, child_in); !made) return std::unexpected(made.error());
  } else {
    child_in = GPUHOST_TRY(launch::open_null_input());
  }

  auto job = launch::make_job();
  if (!job) return std::unexpected(job.error());

  HANDLE inherited[3] = {child_in.get(), child_out.get(), child_err.get()};
  launch::AttributeList attributes;
  if (auto ready = attributes.inherit_only(inherited, 3); !ready) return std::unexpected(ready.error());
  STARTUPINFOEXW startup{};
  startup.StartupInfo.cb = sizeof startup;
  startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
  startup.StartupInfo.hStdInput = child_in.get();
  startup.StartupInfo.hStdOutput = child_out.get();
  startup.StartupInfo.hStdError = child_err.get();
  startup.lpAttributeList = attributes.get();

  std::wstring application = to_wide(resolved);
  std::wstring line = launch::command_line(options.argv);
  std::wstring env_block =
      options.environment.empty() ? std::wstring() : launch::environment_block(options.environment);
  std::wstring directory = options.working_directory ? to_wide(*options.working_directory) : std::wstring();
  // Suspended until it is in the job, so nothing it starts can escape the job.
  DWORD flags = CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW | CREATE_UNICODE_ENVIRONMENT |
                EXTENDED_STARTUPINFO_PRESENT;
  PROCESS_INFORMATION info{};
  const auto start = Clock::now();
  if (!CreateProcessW(application.c_str(), line.data(), nullptr, nullptr, TRUE, flags,
                      env_block.empty() ? nullptr : env_block.data(),
                      directory.empty() ? nullptr : directory.c_str(), &startup.StartupInfo, &info)) {
    std::string context = "running " + resolved;
    if (options.working_directory) context += " in directory " + *options.working_directory;
    return std::unexpected(win32_error(context, GetLastError()));
  }
  UniqueHandle process(info.hProcess);
  UniqueHandle thread(info.hThread);
  if (!AssignProcessToJobObject(job->get(), process.get())) {
    Error error = win32_error("putting " + program + " into a job object", GetLastError());
    TerminateProcess(process.get(), 1);
    return std::unexpected(error);
  }
  ResumeThread(thread.get());
  thread.reset();
  child_in.reset();
  child_out.reset();
  child_err.reset();

  ProcessResult result;
  const std::string_view input = feed_stdin ? std::string_view(*options.stdin_text) : std::string_view();
  std::size_t input_offset = 0;
  out.start_read();
  err.start_read();
  if (feed_stdin) in.start_write(input, 0);

  enum class Phase { running, draining, killed };
  Phase phase = Phase::running;
  Clock::time_point limit = start + options.timeout;
  const Clock::time_point deadline = limit;
  for (;;) {
    if (phase != Phase::running && !out.open() && !err.open()) break;
    const auto now = Clock::now();
    if (now >= limit) {
      if (phase == Phase::killed) break;
      if (phase == Phase::running) {
        result.timed_out = true;
        TerminateJobObject(job->get(), 1);
        WaitForSingleObject(process.get(), 5000);
      } else {
        TerminateJobObject(job->get(), 1);  // leftovers that kept the pipes open
      }
      in.close();
      phase = Phase::killed;
      limit = now + k_final_drain;
      continue;
    }

    HANDLE handles[4];
    launch::PipeEnd* owners[4] = {};
    DWORD count = 0;
    if (phase == Phase::running) handles[count++] = process.get();
    for (launch::PipeEnd* pipe : {&out, &err, &in}) {
      if (!pipe->open()) continue;
      owners[count] = pipe;
      handles[count++] = pipe->event();
    }
    auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(limit - now).count();
    DWORD signaled = WaitForMultipleObjects(
        count, handles, FALSE, static_cast<DWORD>(std::clamp<long long>(wait_ms, 0, 0x7fffffff)));
    if (signaled == WAIT_TIMEOUT) continue;
    if (signaled >= WAIT_OBJECT_0 + count)
      return std::unexpected(win32_error("waiting for " + program, GetLastError()));
    DWORD index = signaled - WAIT_OBJECT_0;
    launch::PipeEnd* pipe = owners[index];
    if (!pipe) {
      phase = Phase::draining;
      limit = std::min(Clock::now() + k_drain_grace, deadline);
    } else if (pipe == &out) {
      out.finish_read(result.stdout_text, options.max_output_bytes, result.output_truncated);
    } else if (pipe == &err) {
      err.finish_read(result.stderr_text, options.max_output_bytes, result.output_truncated);
    } else {
      input_offset += in.finish_write();
      if (in.open()) in.start_write(input, input_offset);
    }
  }

  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  if (!result.timed_out) {
    DWORD code = 0;
    if (GetExitCodeProcess(process.get(), &code)) result.exit_code = static_cast<int>(code);
  }
  return result;
}

std::optional<std::string> find_executable(std::string_view name) {
  std::vector<std::string> found =
      launch::search_path(name, get_env("PATH").value_or(""), launch::Matches::first);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::vector<std::string> find_all_executables(std::string_view name) {
  return launch::search_path(name, get_env("PATH").value_or(""), launch::Matches::all);
}

long current_process_id() {
  return static_cast<long>(GetCurrentProcessId());
}

Result<std::string> current_executable_path() {
  std::wstring buffer(MAX_PATH, L'\0');
  for (;;) {
    DWORD n = GetModuleFileNameW(nullptr, buffer.data(), static_cast<DWORD>(buffer.size()));
    if (n == 0) return std::unexpected(win32_error("finding this program's path", GetLastError()));
    if (n < buffer.size()) {
      buffer.resize(n);
      return to_utf8(buffer);
    }
    buffer.resize(buffer.size() * 2);
  }
}

}  // namespace gpuhost::platform
