#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace gpuhost::cli {

// A one-line activity indicator on stderr for work that takes more than a second: a spinner, the
// current step and the elapsed time, redrawn in place. Silent when stderr is not a terminal (CI
// logs, pipes) so it never pollutes captured output. Erases itself on stop() or destruction.
// Thread-safe: set_step() may be called from any thread.
class ProgressLine {
 public:
  explicit ProgressLine(std::string title);
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ~ProgressLine();

  void set_step(std::string_view step);
  void stop();

 private:
  void draw_loop();

  const std::string m_title;
  const bool m_enabled;
  const std::chrono::steady_clock::time_point m_start;
  std::atomic<bool> m_running{true};
  std::thread m_thread;

  std::mutex m_mutex;
  std::string m_step;  // guarded by m_mutex
};

}  // namespace gpuhost::cli
