#include "cli/top_job.h"

#include <chrono>
#include <cmath>
#include <thread>

#include <gtest/gtest.h>

#include "job/journal.h"
#include "platform/process.h"
#include "supervise/job.h"

namespace gpuhost::cli {
namespace {

using namespace std::chrono_literals;

metrics::SeriesInfo info(std::string name, double last_time = 0) {
  metrics::SeriesInfo s;
  s.name = std::move(name);
  s.last_time = last_time;
  return s;
}

std::optional<std::string> chosen(std::optional<std::size_t> i,
                                  const std::vector<metrics::SeriesInfo>& series) {
  if (!i) return std::nullopt;
  return series[*i].name;
}

TEST(TopJob, LossIsTheSeriesNamedLossThenTrainingLossOverValidation) {
  std::vector<metrics::SeriesInfo> series = {info("val_loss", 9), info("train/loss", 5), info("lr", 10)};
  EXPECT_EQ(chosen(choose_loss_series(series), series), "train/loss");
  series.push_back(info("Loss", 1));
  EXPECT_EQ(chosen(choose_loss_series(series), series), "Loss");
  std::vector<metrics::SeriesInfo> none = {info("lr"), info("grad_norm")};
  EXPECT_FALSE(choose_loss_series(none).has_value());
}

TEST(TopJob, AmongEqualLossNamesTheNewestWins) {
  std::vector<metrics::SeriesInfo> series = {info("train/box_loss", 3), info("train/cls_loss", 7)};
  EXPECT_EQ(chosen(choose_loss_series(series), series), "train/cls_loss");
}

TEST(TopJob, RateIsASeriesPerSecondPreferringTokensThenSamples) {
  std::vector<metrics::SeriesInfo> series = {info("train_runtime_seconds"), info("it/s", 1),
                                             info("train_samples_per_second", 2)};
  EXPECT_EQ(chosen(choose_rate_series(series), series), "train_samples_per_second");
  series.push_back(info("tokens_per_sec", 0));
  EXPECT_EQ(chosen(choose_rate_series(series), series), "tokens_per_sec");
  std::vector<metrics::SeriesInfo> none = {info("time_seconds"), info("loss"), info("step")};
  EXPECT_FALSE(choose_rate_series(none).has_value());
}

TEST(TopJob, StepRateCountsFromTheLastRestart) {
  metrics::SeriesData data;
  // Steps 10..30 over 20 s, a restart back to step 20 at t=30, then 20..40 over 10 s.
  data.time = {0, 10, 20, 30, 35, 40};
  data.step = {10, 20, 30, 20, 30, 40};
  data.value = {1, 1, 1, 1, 1, 1};
  auto rate = step_rate(data);
  ASSERT_TRUE(rate.has_value());
  EXPECT_DOUBLE_EQ(*rate, 2.0);
}

TEST(TopJob, StepRateNeedsTwoDistinctSteps) {
  metrics::SeriesData data;
  data.time = {0, 10, 20};
  data.step = {std::nan(""), 5, 5};
  data.value = {1, 1, 1};
  EXPECT_FALSE(step_rate(data).has_value());
}

class JobWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    m_root = std::filesystem::temp_directory_path() /
             ("gpuhost-top-test-" + std::to_string(platform::current_process_id()) + "-" +
              std::to_string(counter++));
    std::filesystem::remove_all(m_root);
    std::filesystem::create_directories(m_root);
  }
  void TearDown() override {
    m_journals.clear();  // closed before their folder goes (Windows)
    std::filesystem::remove_all(m_root);
  }

  // A new job's journal with `records` appended ({type, fields}), kept open like a supervisor's.
  void start_job(const std::string& name, const std::vector<std::pair<std::string, json::Value>>& records) {
    std::filesystem::create_directories(job::job_paths(m_root, name).dir);
    auto journal = job::Journal::open(job::job_paths(m_root, name).journal());
    ASSERT_TRUE(journal) << journal.error().message;
    for (const auto& [type, fields] : records) {
      auto appended = journal->append(type, fields);
      ASSERT_TRUE(appended) << appended.error().message;
    }
    m_journals.push_back(std::move(*journal));
  }

  static double now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }

  std::filesystem::path m_root;
  std::vector<job::Journal> m_journals;
};

TEST_F(JobWatcherTest, NoJobsIsNoJob) {
  JobWatcher watcher(m_root, std::nullopt);
  auto job = watcher.poll(now());
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_FALSE(job->has_value());
}

TEST_F(JobWatcherTest, ShowsTheNewestRunningJobBeforeAnyFinishedOne) {
  using Fields = json::Value::Object;
  ASSERT_NO_FATAL_FAILURE(start_job("old-running", {{"supervisor_started", Fields{{"pid", 1}}}}));
  std::this_thread::sleep_for(5ms);
  ASSERT_NO_FATAL_FAILURE(start_job(
      "newer-running", {{"supervisor_started", Fields{{"pid", 2}}}, {"progress", Fields{{"step", 42}}}}));
  std::this_thread::sleep_for(5ms);
  ASSERT_NO_FATAL_FAILURE(start_job("finished", {{"supervisor_started", Fields{{"pid", 3}}},
                                                 {"supervisor_stopped", Fields{{"outcome", "finished"}}}}));

  JobWatcher watcher(m_root, std::nullopt);
  auto job = watcher.poll(now());
  ASSERT_TRUE(job) << job.error().message;
  ASSERT_TRUE(job->has_value());
  EXPECT_EQ((*job)->name, "newer-running");
  EXPECT_EQ((*job)->state.phase, job::JobPhase::running);
  EXPECT_EQ((*job)->step, 42);
  EXPECT_FALSE((*job)->loss.has_value());
  EXPECT_FALSE((*job)->metrics_note.empty());
}

TEST_F(JobWatcherTest, NamedJobShowsItsNewestCommittedCheckpointAndAge) {
  using Fields = json::Value::Object;
  auto commit = [](const char* path, int size, int step) {
    return std::pair<std::string, json::Value>{"checkpoint_committed", Fields{{"path", path},
                                                                              {"format", "torch_zip"},
                                                                              {"size_bytes", size},
                                                                              {"content_hash", "x"},
                                                                              {"step", step}}};
  };
  // Records 1..3; the checkpoint of record 3 (ck-3) then fails re-validation.
  ASSERT_NO_FATAL_FAILURE(
      start_job("llama", {{"supervisor_started", Fields{{"pid", 1}}},
                          commit("/ck/a.pt", 100, 10),
                          commit("/ck/b.pt", 200, 20),
                          {"checkpoint_bad", Fields{{"id", "ck-3"}, {"reason", "crc"}}}}));

  JobWatcher watcher(m_root, std::string("llama"));
  auto job = watcher.poll(now() + 60);
  ASSERT_TRUE(job) << job.error().message;
  ASSERT_TRUE(job->has_value());
  ASSERT_TRUE((*job)->checkpoint.has_value());
  EXPECT_EQ((*job)->checkpoint->path, "/ck/a.pt");
  ASSERT_TRUE((*job)->checkpoint_age_seconds.has_value());
  EXPECT_GE(*(*job)->checkpoint_age_seconds, 59.0);
}

TEST_F(JobWatcherTest, NamedJobThatDoesNotExistSaysTheClosestName) {
  ASSERT_NO_FATAL_FAILURE(start_job("llama-lora", {{"supervisor_started", json::Value::Object{{"pid", 1}}}}));
  JobWatcher watcher(m_root, std::string("llama-lroa"));
  auto job = watcher.poll(now());
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(job.error().message.find("llama-lora"), std::string::npos) << job.error().message;
}

TEST_F(JobWatcherTest, ReadsLossAndStepFromTheJobsMetricHistory) {
  ASSERT_NO_FATAL_FAILURE(start_job("gpt", {{"supervisor_started", json::Value::Object{{"pid", 1}}}}));
  const auto metrics_dir = job::job_paths(m_root, "gpt").metrics();
  auto writer = metrics::MetricHistory::open(metrics_dir, true);
  ASSERT_TRUE(writer) << writer.error().message;
  const double t0 = now() - 10;
  for (int step = 1; step <= 5; ++step) {
    (*writer)->append(metrics::Point{"loss", 1.0 / step, step, t0 + step}, "stdout");
    (*writer)->append(metrics::Point{"lr", 0.001, step, t0 + step}, "stdout");
  }
  (*writer)->flush();

  JobWatcher watcher(m_root, std::nullopt);
  auto job = watcher.poll(now());
  ASSERT_TRUE(job) << job.error().message;
  ASSERT_TRUE(job->has_value());
  ASSERT_TRUE((*job)->loss.has_value()) << (*job)->metrics_note;
  EXPECT_EQ((*job)->loss->name, "loss");
  EXPECT_DOUBLE_EQ((*job)->loss->value, 0.2);
  EXPECT_EQ((*job)->loss->step, 5);
  EXPECT_EQ((*job)->step, 5);
  ASSERT_TRUE((*job)->throughput.has_value());
  EXPECT_TRUE((*job)->throughput->derived);
  EXPECT_DOUBLE_EQ((*job)->throughput->per_second, 1.0);

  // Points appended later show on the next poll.
  (*writer)->append(metrics::Point{"loss", 0.1, 6, t0 + 6}, "stdout");
  (*writer)->flush();
  job = watcher.poll(now());
  ASSERT_TRUE(job && job->has_value());
  ASSERT_TRUE((*job)->loss.has_value());
  EXPECT_DOUBLE_EQ((*job)->loss->value, 0.1);
  EXPECT_EQ((*job)->step, 6);
}

}  // namespace
}  // namespace gpuhost::cli
