#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "job/job_state.h"
#include "metrics/history.h"

namespace gpuhost::cli {

// The newest value of a training scalar.
struct ScalarReading {
  std::string name;  // as the trainer wrote it: "loss", "train/loss"
  double value = 0;  // NaN / ±Inf kept: a diverging loss is news
  std::optional<std::int64_t> step;
  double time = 0;  // seconds since the Unix epoch
};

// How fast training goes: a series that is a rate ("train_samples_per_second", "tokens/s"), or,
// failing that, steps per second from the step numbers of the last minute.
struct RateReading {
  std::string name;  // the series' name, or "steps/s" when derived
  double per_second = 0;
  bool derived = false;
};

// What `gpuhost top` shows of one supervised job.
struct JobView {
  std::string name;
  job::JobState state;
  std::optional<std::int64_t> step;  // the newest of the journal's and the metric history's
  std::optional<ScalarReading> loss;
  std::optional<RateReading> throughput;
  std::optional<job::CommittedCheckpoint> checkpoint;  // the newest committed one
  std::optional<double> checkpoint_age_seconds;
  std::string metrics_note;  // why there is no loss, when there is none ("no training scalars yet")
};

// Pure choices over a history's series, for the view and its tests.
// The loss: a series named "loss" (any case), else one whose name has "loss" in it, preferring
// training over validation ("train/loss" over "val_loss") and then the most recently updated.
[[nodiscard]] std::optional<std::size_t> choose_loss_series(const std::vector<metrics::SeriesInfo>& series);
// A rate: a name saying "per second" ("_per_second", "_per_sec", "/s", "per_s", "throughput",
// "it/s"), preferring tokens over samples over anything else, then the most recently updated.
[[nodiscard]] std::optional<std::size_t> choose_rate_series(const std::vector<metrics::SeriesInfo>& series);
// Steps per second over the points of `data` that have a step, counted from the last time the
// step went down (a restart from an older checkpoint); nullopt without two distinct steps.
[[nodiscard]] std::optional<double> step_rate(const metrics::SeriesData& data);

// Follows one job of a jobs root for a refreshing view: the one named, or else the newest
// running job (the newest of any phase when none runs), chosen again every few seconds so a job
// started later shows up. Keeps the job's metric history open read-only and refreshes it; re-reads
// the journal only when the file changed. Not thread-safe.
class JobWatcher {
 public:
  JobWatcher(std::filesystem::path root, std::optional<std::string> name);
  ~JobWatcher();
  JobWatcher(const JobWatcher&) = delete;
  JobWatcher& operator=(const JobWatcher&) = delete;

  // The job at `now` (seconds since the Unix epoch); nullopt when the root has no job.
  // Errors: invalid_argument when the named job does not exist (the message names the closest
  // one); the root or the journal cannot be read.
  [[nodiscard]] Result<std::optional<JobView>> poll(double now);

  [[nodiscard]] const std::filesystem::path& root() const { return m_root; }

 private:
  Result<void> choose(double now);
  Result<void> reload_journal();
  void read_metrics(JobView& view);

  const std::filesystem::path m_root;
  const std::optional<std::string> m_pinned;

  std::string m_current;  // the job shown; empty when none
  double m_chosen_at = -1;
  std::filesystem::file_time_type m_journal_mtime{};
  std::uintmax_t m_journal_size = 0;
  job::JobState m_state;
  std::unique_ptr<metrics::MetricHistory> m_history;
  std::string m_history_error;
};

}  // namespace gpuhost::cli
