#include <algorithm>
#include <charconv>
#include <string>

#include <dirent.h>
#include <unistd.h>

#include "base/strings.h"
#include "platform/posix_util.h"
#include "platform/process_info.h"

namespace gpuhost::platform {

std::optional<std::string> process_name(unsigned pid) {
  if (pid == 0) return std::nullopt;
  const std::string path = "/proc/" + std::to_string(pid) + "/comm";
  std::string name = read_text_file_or_empty(path.c_str());
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
  if (name.empty()) return std::nullopt;
  return name;
}

namespace {

// The numeric names in a /proc directory (processes, or a process's threads).
std::vector<long> numeric_entries(const std::string& dir) {
  std::vector<long> ids;
  DIR* d = opendir(dir.c_str());
  if (!d) return ids;
  while (const dirent* entry = readdir(d)) {
    long id = 0;
    const char* name = entry->d_name;
    const char* end = name + std::char_traits<char>::length(name);
    if (auto [ptr, ec] = std::from_chars(name, end, id); ec == std::errc() && ptr == end) ids.push_back(id);
  }
  closedir(d);
  return ids;
}

// /proc/.../stat, proc(5): "pid (comm) state ppid pgrp ...". The name may hold spaces and
// parentheses, so the fields are counted from the last ')'. Field 3 (state) is fields[0].
struct StatLine {
  std::string name;
  std::vector<std::string> fields;  // from field 3 on
};

std::optional<StatLine> read_stat(const std::string& path) {
  const std::string text = read_text_file_or_empty(path.c_str());
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  StatLine line;
  line.name = text.substr(open + 1, close - open - 1);
  line.fields = split_whitespace(std::string_view(text).substr(close + 1));
  if (line.fields.size() < 13) return std::nullopt;
  return line;
}

std::uint64_t field_u64(const StatLine& line, std::size_t proc5_field) {
  std::uint64_t value = 0;
  const std::string& text = line.fields[proc5_field - 3];
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// /proc/PID/task/TID/schedstat: "ns on a CPU, ns waiting on a runqueue, timeslices"
// (Documentation/scheduler/sched-stats.rst).
std::optional<double> runqueue_seconds(const std::string& process_dir, long tid) {
  const std::string text =
      read_text_file_or_empty((process_dir + "/task/" + std::to_string(tid) + "/schedstat").c_str());
  const std::vector<std::string> fields = split_whitespace(text);
  std::uint64_t waited = 0;
  if (fields.size() < 2) return std::nullopt;
  if (auto [ptr, ec] = std::from_chars(fields[1].data(), fields[1].data() + fields[1].size(), waited);
      ec != std::errc())
    return std::nullopt;
  return static_cast<double>(waited) / 1e9;
}

}  // namespace

Result<GroupActivity> read_group_activity(long pgid) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  GroupActivity activity;
  bool any = false;
  for (long pid : numeric_entries("/proc")) {
    const std::string base = "/proc/" + std::to_string(pid);
    auto stat = read_stat(base + "/stat");
    if (!stat || static_cast<long>(field_u64(*stat, 5)) != pgid) continue;  // 5: pgrp
    any = true;
    std::string command_line = read_text_file_or_empty((base + "/cmdline").c_str());
    std::replace(command_line.begin(), command_line.end(), '\0', ' ');
    while (!command_line.empty() && command_line.back() == ' ') command_line.pop_back();
    activity.processes.push_back(GroupProcess{pid, static_cast<long>(field_u64(*stat, 4)), stat->name,
                                              std::move(command_line)});  // 4: ppid
    activity.major_faults += field_u64(*stat, 12);                        // 12: majflt
    const std::string io = read_text_file_or_empty((base + "/io").c_str());
    if (io.empty()) activity.io_visible = false;
    for (const std::string& line : split_lines(io)) {
      if (!line.starts_with("read_bytes:")) continue;
      std::uint64_t bytes = 0;
      const std::string_view value = trim(std::string_view(line).substr(11));
      std::from_chars(value.data(), value.data() + value.size(), bytes);
      activity.read_bytes += bytes;
    }
    for (long tid : numeric_entries(base + "/task")) {
      auto thread = read_stat(base + "/task/" + std::to_string(tid) + "/stat");
      if (!thread) continue;
      // 14 utime, 15 stime: clock ticks.
      const double cpu = static_cast<double>(field_u64(*thread, 14) + field_u64(*thread, 15)) / ticks;
      activity.threads.push_back(ThreadTimes{pid, tid, thread->name, cpu, runqueue_seconds(base, tid)});
    }
  }
  if (!any)
    return make_error(ErrorCode::not_found, "no process of group " + std::to_string(pgid) + " is running");
  return activity;
}

std::optional<double> pressure_some_avg10(std::string_view resource) {
  const std::string text = read_text_file_or_empty(("/proc/pressure/" + std::string(resource)).c_str());
  // "some avg10=0.12 avg60=0.05 avg300=0.01 total=1234"
  const auto at = text.find("some avg10=");
  if (at == std::string::npos) return std::nullopt;
  const char* begin = text.data() + at + 11;
  double value = 0;
  if (auto [ptr, ec] = std::from_chars(begin, text.data() + text.size(), value); ec != std::errc())
    return std::nullopt;
  return value;
}

std::optional<std::uint64_t> swapped_in_pages() {
  const std::string text = read_text_file_or_empty("/proc/vmstat");
  for (const std::string& line : split_lines(text)) {
    if (!line.starts_with("pswpin ")) continue;
    std::uint64_t pages = 0;
    const std::string_view value = trim(std::string_view(line).substr(7));
    if (auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), pages); ec == std::errc())
      return pages;
  }
  return std::nullopt;
}

}  // namespace gpuhost::platform
