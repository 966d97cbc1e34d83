#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "metrics/point.h"

namespace gpuhost::metrics {

// One series' columns, in append order (a restarted trainer may repeat steps: kept as written).
struct SeriesData {
  std::vector<double> time;   // seconds since the Unix epoch
  std::vector<double> step;   // NaN where the source gave no step
  std::vector<double> value;  // NaN / ±Inf kept
};

struct SeriesInfo {
  std::uint32_t id = 0;
  std::string name;    // "loss"
  std::string source;  // "stdout", "tfevents", "trainer_state", "metrics.csv", "results.csv", "jsonl"
  std::uint64_t points = 0;
  double last_value = 0;
  double last_time = 0;
  std::optional<std::int64_t> last_step;
};

struct HistoryOptions {
  // At most this many distinct series; points of further names are dropped and counted (a
  // trainer printing a fresh key per step must not grow the store or /metrics without bound).
  std::size_t max_series = 512;
  std::size_t max_name_bytes = 200;  // longer names are dropped and counted the same way
};

struct HistoryStats {
  std::uint64_t points = 0;                // stored, all series
  std::uint64_t dropped_over_cardinality = 0;  // points of names beyond max_series / too long
  std::uint64_t dropped_other_source = 0;      // points of a name another source owns
  std::uint64_t source_handovers = 0;          // names taken over by a source with steps
  std::uint64_t corrupt_records_skipped = 0;   // when loading: records whose CRC did not match
  std::uint64_t torn_tail_bytes = 0;           // when loading: a partial last record cut off
  std::uint64_t write_failures = 0;            // appends that could not be written (disk full)
};

// The full-resolution history of a job's training scalars, kept in `dir` (the job's
// `metrics/` folder) so it survives supervisor restarts, and in memory for queries.
//
// On disk (append-only, format in doc/metrics-history.md): `series.jsonl`, one JSON object per
// series ({"id":0,"name":"loss","source":"stdout"}) written before its first point, and
// `points.bin`, fixed 32-byte little-endian records {u32 series id, u32 crc32 of the other 28
// bytes, f64 wall time, f64 step (NaN = none), f64 value}. A torn tail is cut off when a writer
// opens the history; a record whose CRC fails is skipped and counted.
//
// One writer (the supervisor, holding the job's lock) and any number of readers in other
// processes (`gpuhost serve`, `gpuhost top`), which call refresh() to pick up what was appended
// since. Thread-safe: every member may be called from several threads at once.
class MetricHistory {
 public:
  // Creates `dir` if needed and loads what is there; `writable` opens the files for appending.
  // Errors: the folder or files cannot be created or read.
  [[nodiscard]] static Result<std::unique_ptr<MetricHistory>> open(const std::filesystem::path& dir,
                                                                   bool writable,
                                                                   HistoryOptions options = {});
  ~MetricHistory();
  MetricHistory(const MetricHistory&) = delete;
  MetricHistory& operator=(const MetricHistory&) = delete;

  // Writer only (no-op on a read-only history). A point with wall_time 0 gets the current time.
  // A name belongs to the first source that delivered it: points of that name from another
  // source are dropped and counted (the same loss printed on stdout and logged to TensorBoard
  // must not show twice), except that a point with a step takes a name over from a source that
  // never gave one a step (Hugging Face's printed `{'loss': ...}` lines, then trainer_state.json).
  // Returns false when the point was dropped (cardinality cap, name too long, other source).
  // Write errors are counted in stats(), never thrown: losing metrics must never stop training.
  bool append(const Point& point, std::string_view source);
  // Writes buffered records to the files (no fsync: metrics are not worth a disk flush per line).
  void flush();

  // Reader: loads records appended by the writer since the last call. Returns how many points
  // were added. A history opened read-only before the writer created the files finds them later.
  std::size_t refresh();

  [[nodiscard]] std::vector<SeriesInfo> series() const;
  [[nodiscard]] std::optional<SeriesData> read(std::string_view name) const;
  // The points of `name` whose time is after `after_time` (for live updates).
  [[nodiscard]] std::optional<SeriesData> read_since(std::string_view name, double after_time) const;
  [[nodiscard]] HistoryStats stats() const;
  // Increases with every stored point; lets a caller see "nothing new" without copying.
  [[nodiscard]] std::uint64_t version() const;

 private:
  struct State;
  explicit MetricHistory(std::unique_ptr<State> state);
  std::unique_ptr<State> m_state;
};

}  // namespace gpuhost::metrics
