#include "telemetry/job_metrics.h"

#include <chrono>
#include <cmath>

#include <gtest/gtest.h>

#include "platform/process.h"

namespace gpuhost::telemetry {
namespace {

using namespace std::chrono;

// 2026-01-01T00:00:00Z in seconds since the Unix epoch.
const double k_new_year = duration<double>(sys_days{year{2026} / January / 1}.time_since_epoch()).count();

job::CommittedCheckpoint checkpoint(std::string id, std::uint64_t size, std::optional<std::int64_t> step,
                                    std::string committed_at,
                                    job::CheckpointStatus status = job::CheckpointStatus::committed) {
  job::CommittedCheckpoint c;
  c.id = std::move(id);
  c.path = "/ckpt/" + c.id + ".pt";
  c.size_bytes = size;
  c.step = step;
  c.committed_at = std::move(committed_at);
  c.status = status;
  return c;
}

job::JobState running_job() {
  job::JobState state;
  state.phase = job::JobPhase::running;
  state.child_starts = 3;
  state.restarts = 1;
  state.preemptions = 1;
  state.last_step = 1500;
  state.checkpoints.push_back(
      checkpoint("ck-4", 1000, 500, "2026-01-01T00:00:00.000Z", job::CheckpointStatus::retired));
  state.checkpoints.push_back(checkpoint("ck-9", 2048, 1000, "2026-01-01T00:00:30.500Z"));
  // The newest commit was found bad afterwards: a restart resumes from ck-9.
  state.checkpoints.push_back(
      checkpoint("ck-12", 4096, 1500, "2026-01-01T00:01:00.000Z", job::CheckpointStatus::bad));
  return state;
}

// The value of the sample of `name` whose labels include all of `labels`; NaN when none.
double value_of(const MetricSet& set, std::string_view name, const Labels& labels) {
  const MetricFamily* family = set.find(name);
  if (!family) return std::nan("");
  for (const Sample& s : family->samples) {
    bool all = true;
    for (const Label& want : labels) {
      bool found = false;
      for (const Label& l : s.labels) found = found || (l.name == want.name && l.value == want.value);
      all = all && found;
    }
    if (all) return s.value;
  }
  return std::nan("");
}

class JobMetrics : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    m_dir = std::filesystem::temp_directory_path() /
            ("gpuhost-job-metrics-test-" + std::to_string(platform::current_process_id()) + "-" +
             std::to_string(counter++));
    std::filesystem::remove_all(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  std::filesystem::path m_dir;
};

TEST_F(JobMetrics, ReportsPhaseCountersAndTheNewestUsableCheckpoint) {
  MetricSet set;
  append_job_metrics("llama-ft", running_job(), nullptr, k_new_year + 90, set);
  const Labels job{{"job_name", "llama-ft"}};
  EXPECT_EQ(value_of(set, "gpuhost_job_phase", {{"job_name", "llama-ft"}, {"phase", "running"}}), 1);
  EXPECT_EQ(value_of(set, "gpuhost_job_phase", {{"job_name", "llama-ft"}, {"phase", "failed"}}), 0);
  EXPECT_EQ(set.find("gpuhost_job_phase")->samples.size(), 7u);
  EXPECT_EQ(value_of(set, "gpuhost_job_up", job), 1);
  EXPECT_EQ(value_of(set, "gpuhost_job_child_starts_total", job), 3);
  EXPECT_EQ(value_of(set, "gpuhost_job_restarts_total", job), 1);
  EXPECT_EQ(value_of(set, "gpuhost_job_preemptions_total", job), 1);
  EXPECT_EQ(value_of(set, "gpuhost_job_step", job), 1500);
  // Every commit counts, retired and bad ones too: the counter never goes down.
  EXPECT_EQ(value_of(set, "gpuhost_job_checkpoints_committed_total", job), 3);
  // ck-12 is bad and ck-4 retired: the newest usable one is ck-9, committed 30.5 s after new year.
  EXPECT_EQ(value_of(set, "gpuhost_job_checkpoint_last_size_bytes", job), 2048);
  EXPECT_EQ(value_of(set, "gpuhost_job_checkpoint_last_step", job), 1000);
  EXPECT_EQ(value_of(set, "gpuhost_job_checkpoint_last_commit_timestamp_seconds", job), k_new_year + 30.5);
  EXPECT_EQ(value_of(set, "gpuhost_job_checkpoint_age_seconds", job), 59.5);
  EXPECT_FALSE(set.find("gpuhost_train_metric"));

  auto text = to_prometheus_text(set);
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_NE(text->find("gpuhost_job_phase{job_name=\"llama-ft\",phase=\"running\"} 1\n"), std::string::npos);
}

TEST_F(JobMetrics, LeavesOutCheckpointGaugesWithoutAUsableCheckpoint) {
  job::JobState state;
  state.phase = job::JobPhase::waiting_restart;
  state.checkpoints.push_back(
      checkpoint("ck-3", 10, std::nullopt, "2026-01-01T00:00:00Z", job::CheckpointStatus::bad));
  MetricSet set;
  append_job_metrics("j", state, nullptr, k_new_year, set);
  const Labels job{{"job_name", "j"}};
  EXPECT_EQ(value_of(set, "gpuhost_job_up", job), 0);
  EXPECT_EQ(value_of(set, "gpuhost_job_phase", {{"job_name", "j"}, {"phase", "waiting_restart"}}), 1);
  EXPECT_EQ(value_of(set, "gpuhost_job_checkpoints_committed_total", job), 1);
  EXPECT_FALSE(set.find("gpuhost_job_checkpoint_age_seconds"));
  EXPECT_FALSE(set.find("gpuhost_job_checkpoint_last_size_bytes"));
  EXPECT_FALSE(set.find("gpuhost_job_step"));
}

TEST_F(JobMetrics, AgeNeverGoesNegativeWhenTheClockIsBehindTheJournal) {
  MetricSet set;
  append_job_metrics("j", running_job(), nullptr, k_new_year, set);  // before ck-9's commit
  EXPECT_EQ(value_of(set, "gpuhost_job_checkpoint_age_seconds", {{"job_name", "j"}}), 0);
}

TEST_F(JobMetrics, MirrorLagCountsFromTheOldestCommitNewerThanTheNewestDurable) {
  job::JobState state;
  state.mirrored = true;
  state.checkpoints.push_back(checkpoint("ck-1", 10, 100, "2026-01-01T00:00:00.000Z"));
  state.checkpoints.back().durable_at = "2026-01-01T00:00:05.000Z";
  state.checkpoints.push_back(checkpoint("ck-2", 10, 200, "2026-01-01T00:00:10.000Z"));
  state.checkpoints.push_back(checkpoint("ck-3", 10, 300, "2026-01-01T00:00:20.000Z"));
  state.pending_uploads.push_back(job::PendingUpload{});
  MetricSet set;
  append_job_metrics("j", state, nullptr, k_new_year + 30, set);
  const Labels job{{"job_name", "j"}};
  EXPECT_EQ(value_of(set, "gpuhost_job_mirror_lag_seconds", job), 20);  // ck-2 has waited 20 s
  EXPECT_EQ(value_of(set, "gpuhost_job_mirror_durable_step", job), 100);
  EXPECT_EQ(value_of(set, "gpuhost_job_mirror_durable_timestamp_seconds", job), k_new_year + 5);
  EXPECT_EQ(value_of(set, "gpuhost_job_mirror_pending_uploads", job), 1);

  state.checkpoints.back().durable_at = "2026-01-01T00:00:25.000Z";  // the newest is up: no lag
  MetricSet caught_up;
  append_job_metrics("j", state, nullptr, k_new_year + 30, caught_up);
  EXPECT_EQ(value_of(caught_up, "gpuhost_job_mirror_lag_seconds", job), 0);
  EXPECT_EQ(value_of(caught_up, "gpuhost_job_mirror_durable_step", job), 300);
}

TEST_F(JobMetrics, NoMirrorGaugesForAJobWithoutARemote) {
  MetricSet set;
  append_job_metrics("j", running_job(), nullptr, k_new_year + 30, set);
  EXPECT_FALSE(set.find("gpuhost_job_mirror_lag_seconds"));
}

TEST_F(JobMetrics, ReportsEachTrainingScalarUnderItsOwnNameInOneFamily) {
  auto history = metrics::MetricHistory::open(m_dir, true);
  ASSERT_TRUE(history) << history.error().message;
  metrics::MetricHistory& h = **history;
  h.append({"train/box_loss", 0.75, 10, 1000}, "results.csv");
  h.append({"train/box_loss", 0.5, 20, 1010}, "results.csv");
  h.append({"lr/pg0", 1e-3, std::nullopt, 1011}, "results.csv");
  h.append({"loss", std::nan(""), 20, 1012}, "stdout");
  h.append({"train/box_loss", 0.1, 30, 1013}, "stdout");  // other source: dropped and counted

  MetricSet set;
  append_job_metrics("yolo", running_job(), &h, k_new_year, set);
  const Labels box{{"job_name", "yolo"}, {"name", "train/box_loss"}};
  EXPECT_EQ(value_of(set, "gpuhost_train_metric", box), 0.5);
  EXPECT_EQ(value_of(set, "gpuhost_train_metric_step", box), 20);
  EXPECT_EQ(value_of(set, "gpuhost_train_metric_timestamp_seconds", box), 1010);
  EXPECT_EQ(value_of(set, "gpuhost_train_metric", {{"name", "lr/pg0"}}), 1e-3);
  EXPECT_TRUE(std::isnan(value_of(set, "gpuhost_train_metric_step", {{"name", "lr/pg0"}})));  // no step
  EXPECT_TRUE(std::isnan(value_of(set, "gpuhost_train_metric", {{"name", "loss"}})));         // a NaN loss
  EXPECT_EQ(set.find("gpuhost_train_metric")->samples.size(), 3u);
  EXPECT_EQ(value_of(set, "gpuhost_train_points_dropped_total", {{"reason", "other_source"}}), 1);
  EXPECT_EQ(value_of(set, "gpuhost_train_points_dropped_total", {{"reason", "cardinality"}}), 0);
  EXPECT_EQ(value_of(set, "gpuhost_train_history_write_failures_total", {{"job_name", "yolo"}}), 0);

  auto text = to_prometheus_text(set);
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_NE(text->find("gpuhost_train_metric{job_name=\"yolo\",name=\"loss\"} NaN\n"), std::string::npos);
}

TEST_F(JobMetrics, SeveralJobsShareFamiliesInOneScrape) {
  auto history = metrics::MetricHistory::open(m_dir, true);
  ASSERT_TRUE(history) << history.error().message;
  (*history)->append({"loss", 1.5, 1, 1000}, "stdout");
  MetricSet set;
  append_job_metrics("a", running_job(), history->get(), k_new_year, set);
  append_job_metrics("b \"quoted\"", job::JobState{}, history->get(), k_new_year, set);
  auto text = to_prometheus_text(set);
  ASSERT_TRUE(text) << text.error().message;  // no family twice, no label set twice
  EXPECT_EQ(set.find("gpuhost_job_up")->samples.size(), 2u);
  EXPECT_EQ(value_of(set, "gpuhost_job_phase", {{"job_name", "b \"quoted\""}, {"phase", "new"}}), 1);
  EXPECT_NE(text->find("job_name=\"b \\\"quoted\\\"\""), std::string::npos);
}

}  // namespace
}  // namespace gpuhost::telemetry
