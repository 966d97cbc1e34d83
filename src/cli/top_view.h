#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "cli/terminal_style.h"
#include "cli/top_job.h"
#include "gpu/snapshot.h"

namespace gpuhost::cli {

// Everything one frame of `gpuhost top` shows; filled by the command, rendered by the pure
// functions below (human lines, or JSON for --json).
struct TopFrame {
  std::chrono::system_clock::time_point time;
  std::string hostname;
  gpu::GpuSnapshot gpus;
  std::map<unsigned, std::string> process_names;  // pid -> the OS's name, for the pids NVML listed
  std::optional<JobView> job;
  std::string job_note;  // when there is no job: why ("no job in ...", or the error reading it)
};

struct TopLayout {
  int columns = 100;         // sizes the bars; lines are cut to it when `fit`
  bool fit = true;           // false for output that is not a terminal: a pipe keeps whole lines
  bool interactive = false;  // the header says how to quit and the refresh interval
  std::chrono::milliseconds interval{1000};
};

// The frame as lines of at most `layout.columns` visible characters when `layout.fit` (colour
// sequences from `style` do not count). No line ends with '\n'.
[[nodiscard]] std::vector<std::string> render_top(const TopFrame& frame, const TopLayout& layout,
                                                  const TerminalStyle& style);

// The frame as JSON (schema in `gpuhost top --help`): values NVML could not give are null.
[[nodiscard]] json::Value top_json(const TopFrame& frame);

// `line` cut to `columns` visible characters: SGR sequences (ESC [ ... m) take no room and UTF-8
// continuation bytes none either; a cut line ends with a colour reset when it had colour.
[[nodiscard]] std::string fit_line(std::string_view line, int columns);

// "4s", "3m 20s", "2h 05m", "3d 4h".
[[nodiscard]] std::string format_age(double seconds);

}  // namespace gpuhost::cli
