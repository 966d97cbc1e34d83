#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "platform/child_process.h"

namespace gpuhost::supervise {

struct TrainingMetricsOptions {
  std::filesystem::path metrics_dir;  // JobPaths::metrics()
  // Folders searched for TensorBoard event files, metrics.csv, results.csv, trainer_state.json:
  // the trainer's working directory and the checkpoint location.
  std::vector<std::filesystem::path> roots;
  // The JSON-lines channel (GPUHOST_METRICS_FILE): the trainer's own choice when its environment
  // already names one, else metrics/channel.jsonl in the job directory.
  std::filesystem::path channel;
  std::chrono::milliseconds poll_interval{std::chrono::seconds(2)};
  std::function<void(std::string_view)> on_message;  // problems, once each ("metrics disabled: ...")
};

// The MFU in percent a point carries (see attempt_mfu_percent); nullopt for other points.
[[nodiscard]] std::optional<double> mfu_percent_of(std::string_view name, double value);

// The token throughput a point carries: `tokens_per_second`, `tokens_per_sec`, `tok_per_sec`,
// `tokens_per_s` (any prefix such as `train/`), `tokens/s`, `tok/s`; per_device when the name says
// `device/` (Lightning's ThroughputMonitor). nullopt for other points.
struct TokenRate {
  double tokens_per_second = 0;
  bool per_device = false;
};
[[nodiscard]] std::optional<TokenRate> token_rate_of(std::string_view name, double value);

// A job's training scalars while it runs, with no change to the trainer: its output lines (both
// streams) parsed as they arrive, and the files it writes (TensorBoard, trainer_state.json, CSV
// loggers, the JSON-lines channel) tailed on a thread, all appended to the job's MetricHistory.
// Nothing here can stop or slow training: a history that cannot be written disables metrics with
// one message; parsing is bounded per line.
class TrainingMetricsRecorder {
 public:
  explicit TrainingMetricsRecorder(TrainingMetricsOptions options);
  ~TrainingMetricsRecorder();  // stops the tailer thread and flushes
  TrainingMetricsRecorder(const TrainingMetricsRecorder&) = delete;
  TrainingMetricsRecorder& operator=(const TrainingMetricsRecorder&) = delete;

  // The trainer's output, from the child's reader threads (one thread per stream).
  void on_output(platform::OutputStream stream, std::string_view chunk);
  // A new child starts: partial lines of the previous one are dropped.
  void child_started();

  // The newest training step seen from any source, for the journal's progress records.
  [[nodiscard]] std::optional<std::int64_t> newest_step() const;
  // The newest step the current child reported (none before its first): the advisor's step
  // time, which must not count a restarted trainer's steps below the previous one's newest.
  [[nodiscard]] std::optional<std::int64_t> attempt_step() const;
  // The newest model FLOPs utilisation the current child printed or logged, in percent: nanoGPT's
  // `mfu 35.21%` and torchtitan's `mfu: 40.12%` (mfu_percent), or a logged `mfu` / `train/mfu`
  // (Lightning's ThroughputMonitor: a fraction, times 100 when at most 1.5).
  [[nodiscard]] std::optional<double> attempt_mfu_percent() const;
  // The newest token throughput the current child printed or logged (token_rate_of).
  [[nodiscard]] std::optional<TokenRate> attempt_token_rate() const;

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

}  // namespace gpuhost::supervise
