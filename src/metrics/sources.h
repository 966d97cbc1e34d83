#pragma once
// Follows the metric files a trainer writes under its folders (TensorBoard event files, Lightning
// metrics.csv, Ultralytics results.csv, Hugging Face trainer_state.json) and the explicit
// JSON-lines channel, delivering each point once, across supervisor restarts too.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "metrics/point.h"

namespace gpuhost::metrics {

// A point and the source it came from: "tfevents", "trainer_state", "metrics.csv", "results.csv"
// or "jsonl" (static strings; the view stays valid for the program's life).
struct SourcedPoint {
  Point point;
  std::string_view source;
};

struct SourceTailerOptions {
  // Folders searched: the trainer's working directory, the checkpoint directory.
  std::vector<std::filesystem::path> roots;
  // The explicit channel (GPUHOST_METRICS_FILE); empty for none. Need not exist yet.
  std::filesystem::path jsonl_path;
  int max_depth = 4;                                    // folder levels searched below a root
  std::size_t max_entries_per_scan = 20000;             // directory entries looked at per search
  int rescan_every_polls = 5;                           // search on the first poll and every Nth after
  std::size_t max_files = 256;                          // files followed at once (a sweep's many logdirs)
  std::size_t max_bytes_per_file_per_poll = 16u << 20;  // a backlog is read over several polls
  std::size_t max_line_bytes = 1u << 20;                // longer CSV / JSON lines are skipped and counted
  std::size_t max_whole_file_bytes = 64u << 20;         // trainer_state.json, a rewritten CSV
};

struct SourceTailerStats {
  std::uint64_t polls = 0;
  std::uint64_t points = 0;
  std::size_t files_followed = 0;
  std::uint64_t entries_last_scan = 0;
  std::uint64_t corrupt_records = 0;  // tfevents records skipped for a data checksum mismatch
  std::uint64_t malformed_lines = 0;  // JSON lines that are not an object
  std::uint64_t overlong_lines = 0;   // CSV / JSON lines past max_line_bytes
  std::uint64_t files_rewritten = 0;  // a CSV or JSONL file found shrunk or rewritten
};

// Discovers, under the roots (at most max_depth folder levels down, skipping dot-folders,
// node_modules, __pycache__, site-packages and Python virtual environments, at most
// max_entries_per_scan entries per search), the files `events.out.tfevents.*`, `metrics.csv`,
// `results.csv` and `trainer_state.json`, and reads what each gained since the last poll:
//   * event files and the JSON-lines file by byte offset (a partial last record or line waits);
//   * CSV files by byte offset while their header and the bytes before the offset are unchanged;
//     a file found shrunk or rewritten (Lightning's older CSVLogger rewrites the whole file;
//     Ultralytics deletes results.csv at a fresh start) is read again whole and continues after
//     the rows already delivered when they are still there (matched by content), or from its
//     first row when it is a new file;
//   * the newest trainer_state.json (by modification time; one is written per checkpoint) by
//     log_history entries: the entries past those delivered, or after a resume from an older
//     checkpoint (a history that no longer starts with what was delivered) the entries past the
//     highest step delivered.
// Problems (a damaged event file, a file too large, an unreadable file, a truncated search) are
// reported once each through take_warnings() and never stop the other files.
//
// save_state() / load_state() keep what was consumed in a JSON file, so a supervisor restarted
// after SIGKILL continues where the saved state stands: save it after the points of a poll are
// stored, and a kill between the two repeats at most that one poll's points.
//
// Not thread-safe: one thread (the supervisor's metrics thread) makes every call.
class SourceTailer {
 public:
  explicit SourceTailer(SourceTailerOptions options);
  ~SourceTailer();
  SourceTailer(const SourceTailer&) = delete;
  SourceTailer& operator=(const SourceTailer&) = delete;

  // One round: searches when due, then reads every followed file. Never fails as a whole.
  [[nodiscard]] std::vector<SourcedPoint> poll();

  // Problems since the last call, one line each: "<what we tried>: <why>".
  [[nodiscard]] std::vector<std::string> take_warnings();
  [[nodiscard]] SourceTailerStats stats() const;

  // Writes the consumption state atomically (platform::write_file_atomic), creating its folder.
  [[nodiscard]] Result<void> save_state(const std::filesystem::path& path) const;
  // Restores a saved state; files it names are followed at once. A missing file is a fresh start
  // (success). Errors: unreadable, or not a state file (parse_error): the caller may start fresh.
  // REQUIRES: called before the first poll().
  [[nodiscard]] Result<void> load_state(const std::filesystem::path& path);

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

}  // namespace gpuhost::metrics
