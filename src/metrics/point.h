#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpuhost::metrics {

// One observation of a training scalar, from whatever the trainer already writes (stdout,
// TensorBoard event files, trainer_state.json, metrics.csv, results.csv, the GPUHOST_METRICS_FILE
// JSON-lines channel).
struct Point {
  std::string name;                  // as the trainer wrote it: "loss", "train/box_loss", "lr/pg0"
  double value = 0;                  // NaN and ±Inf are kept: a diverging loss is information
  std::optional<std::int64_t> step;  // the trainer's step (or iteration) when the source says
  double wall_time = 0;              // seconds since the Unix epoch; 0 = unknown (the store uses now)
};

}  // namespace gpuhost::metrics
