#include "cli/progress.h"

#include <cstdio>

#include "platform/system_info.h"

namespace gpuhost::cli {

ProgressLine::ProgressLine(std::string title)
    : m_title(std::move(title)), m_enabled(platform::stderr_is_terminal()), m_start(std::chrono::steady_clock::now()) {
  if (m_enabled) m_thread = std::thread([this] { draw_loop(); });
}

ProgressLine::~ProgressLine() { stop(); }

void ProgressLine::set_step(std::string_view step) {
  std::lock_guard lock(m_mutex);
  m_step = step;
}

void ProgressLine::stop() {
  if (!m_running.exchange(false)) return;
  if (m_thread.joinable()) m_thread.join();
  if (m_enabled) {
    std::fputs("\r\x1b[2K", stderr);
    std::fflush(stderr);
  }
}

void ProgressLine::draw_loop() {
  static const char frames[] = {'|', '/', '-', '\\'};
  int frame = 0;
  // Work that finishes within a second gets no indicator at all.
  while (m_running && std::chrono::steady_clock::now() - m_start < std::chrono::seconds(1))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  while (m_running) {
    std::string step;
    {
      std::lock_guard lock(m_mutex);
      step = m_step;
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
    int width = platform::terminal_width();
    std::string line = std::string(1, frames[frame++ % 4]) + " " + m_title + (step.empty() ? "" : ": " + step);
    char secs[32];
    std::snprintf(secs, sizeof secs, " (%.1f s)", elapsed);
    line += secs;
    if (width > 4 && static_cast<int>(line.size()) > width - 1) line = line.substr(0, static_cast<std::size_t>(width - 4)) + "...";
    std::fprintf(stderr, "\r\x1b[2K%s", line.c_str());
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace gpuhost::cli
