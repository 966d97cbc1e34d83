#pragma once
// Training scalars from the structured files trainers already write: Hugging Face
// `trainer_state.json`, Lightning CSVLogger `metrics.csv`, Ultralytics `results.csv`, and the
// explicit JSON-lines channel (`GPUHOST_METRICS_FILE`). Pure parsing of text; sources.h follows
// the files. Format facts: shared/research/05 §2.1.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "metrics/point.h"

namespace gpuhost::metrics {

// One element of trainer_state.json's `log_history`: {"loss": 0.5, "grad_norm": 1.2,
// "learning_rate": 5e-05, "epoch": 0.1, "step": 10} (transformers trainer_callback.py).
struct LogHistoryEntry {
  std::optional<std::int64_t> step;  // its "step"
  std::vector<Point> points;         // every other numeric member, "epoch" included; step set
};

// The log_history of a trainer_state.json, in order. Python's json writes NaN and Infinity,
// which are read as numbers. Errors: not JSON, or no `log_history` array (parse_error; a file
// caught half-written reads as not JSON).
[[nodiscard]] Result<std::vector<LogHistoryEntry>> parse_trainer_state(std::string_view text);

// The fields of one CSV record (RFC 4180 quotes; no line breaks inside a field), each trimmed of
// spaces: Ultralytics' older results.csv pads headers and values ("      train/box_loss").
[[nodiscard]] std::vector<std::string> split_csv_record(std::string_view line);

// The columns of a metrics CSV: Lightning CSVLogger's metrics.csv (header = union of the logged
// keys, sparse rows, a `step` column; research/05 §2.1) or Ultralytics' results.csv (one row per
// epoch, no `step`). The step column is `step` when there is one, else `epoch`; it sets
// Point::step and is not a point itself (so Lightning's `epoch` stays a metric).
class CsvColumns {
 public:
  explicit CsvColumns(std::vector<std::string> header);

  // The points of one data row: one per non-empty numeric cell ("nan" and "inf" included) of a
  // named column but the step column; extra cells beyond the header are ignored.
  [[nodiscard]] std::vector<Point> row_points(std::string_view line) const;
  [[nodiscard]] const std::vector<std::string>& header() const { return m_header; }

 private:
  std::vector<std::string> m_header;
  std::optional<std::size_t> m_step_column;
};

// One line of the explicit channel: a JSON object whose numeric members are points (NaN and
// Infinity as Python writes them included). "step" sets Point::step (an integer); "wall_time" or
// "time" sets Point::wall_time when it reads as a Unix time (seconds, or milliseconds from 1e12
// on; a smaller "time" is a duration and stays a metric); nested objects are flattened with
// "/" ({"train": {"loss": 1}} is "train/loss"); strings, booleans, arrays and nulls are ignored.
// At most k_max_points_per_json_line points. Errors: not JSON or not an object (parse_error).
[[nodiscard]] Result<std::vector<Point>> parse_metrics_json_line(std::string_view line);
inline constexpr std::size_t k_max_points_per_json_line = 256;

}  // namespace gpuhost::metrics
