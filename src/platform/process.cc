#include "platform/process.h"

#include <mutex>

#include "platform/child_process.h"

namespace gpuhost::platform {

// One spawn/kill/reap core per OS: a tool run to completion is a ChildProcess whose output is
// collected, killed with its whole tree at the timeout.
Result<ProcessResult> run_process(const ProcessOptions& options) {
  using Clock = std::chrono::steady_clock;
  ProcessResult result;
  std::mutex output_mutex;
  ChildOptions child;
  child.argv = options.argv;
  child.working_directory = options.working_directory;
  child.environment = options.environment;
  child.stdin_text = options.stdin_text;
  child.console = false;
  child.on_output = [&](OutputStream stream, std::string_view chunk) {
    std::lock_guard lock(output_mutex);
    std::string& text = stream == OutputStream::out ? result.stdout_text : result.stderr_text;
    const std::size_t room = options.max_output_bytes > text.size() ? options.max_output_bytes - text.size() : 0;
    if (chunk.size() > room) {
      result.output_truncated = true;
      chunk = chunk.substr(0, room);
    }
    text.append(chunk);
  };

  const auto start = Clock::now();
  auto process = ChildProcess::spawn(child);
  if (!process) return std::unexpected(process.error());
  auto exit = process->wait_for(options.timeout);
  if (!exit) return std::unexpected(exit.error());
  if (!*exit) {
    result.timed_out = true;
    process->kill_tree();
    // The tree is gone at once; this wait collects it and the last of its output.
    exit = process->wait_for(std::chrono::seconds(30));
    if (!exit) return std::unexpected(exit.error());
  }
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  std::lock_guard lock(output_mutex);  // the readers are done; this orders their writes before ours
  if (!result.timed_out && *exit) {
    result.exit_code = (*exit)->exit_code;
    result.signaled = (*exit)->signaled;
    result.signal = (*exit)->signal;
  }
  return result;
}

}  // namespace gpuhost::platform
