#include "telemetry/dashboard.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>

#include <gtest/gtest.h>

#include "base/json.h"
#include "job/job_paths.h"
#include "job/journal.h"
#include "metrics/history.h"
#include "platform/process.h"
#include "telemetry/exporter.h"

namespace gpuhost::telemetry {
namespace {

constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();

// ---- pure parts -------------------------------------------------------------------------------

TEST(DebiasedEma, MatchesTensorBoardsFormula) {
  // last = last*w + (1-w)*y; out = last / (1 - w^n), by hand for w = 0.5.
  const std::vector<double> values = {1, 2, 3};
  const auto out = debiased_ema(values, 0.5);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_DOUBLE_EQ(out[0], 1.0);  // debiasing makes the first value its own average
  EXPECT_DOUBLE_EQ(out[1], 1.25 / 0.75);
  EXPECT_DOUBLE_EQ(out[2], 2.125 / 0.875);
  EXPECT_EQ(debiased_ema(values, 0), values);
}

TEST(DebiasedEma, PassesNonFiniteValuesAndConstantSeriesThrough) {
  const auto out = debiased_ema(std::vector<double>{1, k_nan, 3}, 0.5);
  EXPECT_DOUBLE_EQ(out[0], 1.0);
  EXPECT_TRUE(std::isnan(out[1]));
  EXPECT_DOUBLE_EQ(out[2], 1.75 / 0.75);  // the NaN does not count as a step
  EXPECT_EQ(debiased_ema(std::vector<double>{0.3, 0.3, 0.3}, 0.9), (std::vector<double>{0.3, 0.3, 0.3}));
}

TEST(SelectPoints, KeepsEverythingUpToTwicePerPixelThenDownsamples) {
  std::vector<double> x(1000), y(1000);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<double>(i);
    y[i] = std::sin(static_cast<double>(i) / 10);
  }
  auto full = select_points(x, y, 500, DownsampleMethod::lttb);
  EXPECT_EQ(full.method, DownsampleMethod::full);
  EXPECT_EQ(full.indices.size(), 1000u);
  auto lttb = select_points(x, y, 100, DownsampleMethod::lttb);
  EXPECT_EQ(lttb.method, DownsampleMethod::lttb);
  EXPECT_EQ(lttb.indices.size(), 100u);
  EXPECT_EQ(lttb.indices.front(), 0u);
  EXPECT_EQ(lttb.indices.back(), 999u);
  auto min_max = select_points(x, y, 100, DownsampleMethod::min_max);
  EXPECT_EQ(min_max.method, DownsampleMethod::min_max);
  EXPECT_LE(min_max.indices.size(), 202u);
  EXPECT_GT(min_max.indices.size(), 100u);
}

TEST(StepOrder, DropsStepsARestartedTrainerRedid) {
  // Steps 1 2 3, crash, resume from step 1: 2 3 4. The first run's 2 and 3 were redone.
  const std::vector<double> steps = {1, 2, 3, 2, 3, 4};
  EXPECT_EQ(step_order(steps), (std::vector<std::size_t>{0, 3, 4, 5}));
  EXPECT_EQ(step_order(std::vector<double>{k_nan, 5, k_nan, 6}), (std::vector<std::size_t>{1, 3}));
  EXPECT_EQ(step_order(std::vector<double>{7, 7}), (std::vector<std::size_t>{1}));  // logged twice: last
}

TEST(SseMessage, FramesEventIdAndEveryDataLine) {
  EXPECT_EQ(sse_message("points", "3,1.5,null", "{\"a\":1}"),
            "event: points\nid: 3,1.5,null\ndata: {\"a\":1}\n\n");
  EXPECT_EQ(sse_message("", "", "one\ntwo"), "data: one\ndata: two\n\n");
}

TEST(ChartOrder, PutsLossFirstThenOtherLosses) {
  EXPECT_EQ(chart_order({"lr", "val/box_loss", "loss", "accuracy", "train/loss"}),
            (std::vector<std::string>{"loss", "train/loss", "val/box_loss", "accuracy", "lr"}));
}

// ---- the API over a real job directory ---------------------------------------------------------

gpu::GpuSnapshot two_gpus() {
  gpu::GpuSnapshot s;
  s.available = true;
  for (unsigned i = 0; i < 2; ++i) {
    gpu::GpuDevice d;
    d.index = i;
    d.name = "NVIDIA A100-SXM4-80GB";
    d.uuid = "GPU-" + std::to_string(i);
    d.memory.value = gpu::MemoryState{80ull << 30, (10ull + i) << 30, 0, 0};
    d.temperature.value = gpu::Temperatures{40 + i, {}, {}, {}, {}};
    d.power.value = gpu::Power{250000 + 1000 * i, 400000};
    d.utilization.value = gpu::Utilization{90 + i, 50};
    s.devices.push_back(d);
  }
  return s;
}

// Collects what a stream writes; wait() runs the test's next step, and ends the stream when
// there is none left.
class FakeWriter final : public ResponseWriter {
 public:
  std::vector<std::function<void()>> steps;
  std::string written;
  bool write(std::string_view bytes) override {
    written += bytes;
    return true;
  }
  bool wait(std::chrono::milliseconds) override {
    if (m_next >= steps.size()) return false;
    steps[m_next++]();
    return true;
  }

 private:
  std::size_t m_next = 0;
};

class DashboardApi : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    m_root = std::filesystem::temp_directory_path() /
             ("gpuhost-dashboard-test-" + std::to_string(platform::current_process_id()) + "-" +
              std::to_string(counter++));
    std::filesystem::remove_all(m_root);
    const auto paths = job::job_paths(m_root, "train1");
    std::filesystem::create_directories(paths.dir);
    auto journal = job::Journal::open(paths.journal());
    ASSERT_TRUE(journal) << journal.error().message;
    m_journal.emplace(std::move(*journal));
    append("job_created", {{"name", "train1"}});
    append("supervisor_started", {{"pid", 10}, {"cloud", "none"}});
    append("child_started", {{"pid", 11}, {"attempt", 1}});
    append("checkpoint_committed",
           {{"path", "/ck/step-2.pt"}, {"format", "torch_zip"}, {"size_bytes", 100}, {"step", 2}});
    append("notice", {{"source", "drill"}, {"kind", "preemption"}});
    append("child_started", {{"pid", 12}, {"attempt", 2}});

    auto history = metrics::MetricHistory::open(paths.metrics(), true);
    ASSERT_TRUE(history) << history.error().message;
    m_writer = std::move(*history);
    m_catalog = std::make_unique<JobCatalog>(JobCatalogOptions{m_root, {}, std::chrono::milliseconds(0)});
    m_sampler = std::make_unique<GpuSampler>([] { return two_gpus(); });
    m_dashboard = std::make_unique<Dashboard>(*m_catalog, *m_sampler);
  }
  void TearDown() override {
    m_dashboard.reset();
    m_sampler.reset();
    m_catalog.reset();
    m_writer.reset();
    m_journal.reset();
    std::filesystem::remove_all(m_root);
  }

  void append(std::string_view type, json::Value::Object fields) {
    ASSERT_TRUE(m_journal->append(type, json::Value(std::move(fields))));
  }
  void add_points(std::string name, int first_step, int count, double t0, double dt = 1) {
    for (int i = 0; i < count; ++i)
      m_writer->append(metrics::Point{name, 1.0 / (first_step + i), first_step + i, t0 + i * dt}, "stdout");
    m_writer->flush();
  }

  Response get(std::string target, HeaderList headers = {}) {
    auto r = m_dashboard->handle(RequestHead{"GET", std::move(target), "HTTP/1.1", std::move(headers)});
    EXPECT_TRUE(r);
    return r ? *r : Response{};
  }
  json::Value get_json(std::string target, int status = 200) {
    Response r = get(std::move(target));
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.content_type, "application/json; charset=utf-8");
    auto value = json::parse(r.body);
    EXPECT_TRUE(value) << r.body;
    return value ? *value : json::Value();
  }
  std::vector<double> numbers(const json::Value& array) {
    std::vector<double> out;
    for (const auto& v : array.items()) out.push_back(v.is_null() ? k_nan : v.as_number());
    return out;
  }

  std::filesystem::path m_root;
  std::optional<job::Journal> m_journal;
  std::unique_ptr<metrics::MetricHistory> m_writer;
  std::unique_ptr<JobCatalog> m_catalog;
  std::unique_ptr<GpuSampler> m_sampler;
  std::unique_ptr<Dashboard> m_dashboard;
};

TEST_F(DashboardApi, ListsJobsWithTheirStateAndSeries) {
  add_points("loss", 1, 10, 1000);
  add_points("lr", 1, 5, 1000);
  auto doc = get_json("/api/jobs");
  const auto& jobs = doc.find("jobs")->items();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].get_string("name"), "train1");
  EXPECT_EQ(jobs[0].get_string("phase"), "running");
  EXPECT_EQ(jobs[0].get_int("checkpoints"), 1);
  EXPECT_EQ(jobs[0].get_int("child_starts"), 2);
  EXPECT_EQ(jobs[0].get_int("series"), 2);
  EXPECT_EQ(jobs[0].get_int("points"), 15);
  EXPECT_DOUBLE_EQ(jobs[0].get_number("last_time"), 1009);
}

TEST_F(DashboardApi, AMultiNodeJobShowsEachNodesStepAndWhichIsLate) {
  // Node 0 of a two-node job: it committed step 300, node 1 only 200.
  append("peers_started", {{"role", "leader"}, {"node", 0}, {"nnodes", 2}, {"leader", "127.0.0.1:29501"}});
  append("peer_joined", {{"node", 1}});
  append("resume_agreed", {{"step", json::Value()}, {"storage", "node_local"}});
  append("checkpoint_committed",
         {{"path", "/ck/step-300.pt"}, {"format", "torch_zip"}, {"size_bytes", 100}, {"step", 300}});
  append("peer_committed", {{"node", 1}, {"step", 200}});
  append("global_commit", {{"step", 200}});
  auto doc = get_json("/api/jobs");
  const auto& job = doc.find("jobs")->items().at(0);
  EXPECT_EQ(job.get_int("global_step"), 200);
  const auto& nodes = job.find("nodes")->items();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_TRUE(nodes[0].get_bool("self"));
  EXPECT_EQ(nodes[0].get_int("step"), 300);
  EXPECT_FALSE(nodes[0].get_bool("late"));
  EXPECT_EQ(nodes[1].get_int("step"), 200);
  EXPECT_EQ(nodes[1].get_string("state"), "joined");
  EXPECT_TRUE(nodes[1].get_bool("late"));
  // The detail view carries the same.
  auto detail = get_json("/api/job/train1");
  EXPECT_EQ(detail.find("nodes")->items().size(), 2u);
}

TEST_F(DashboardApi, JobDetailNamesCheckpointsOnceAsTheirList) {
  // Not the summary's count and then the list under the same key: a parser keeps one of them.
  auto response = get("/api/job/train1");
  ASSERT_EQ(response.status, 200);
  std::size_t keys = 0;
  for (auto at = response.body.find("\"checkpoints\":"); at != std::string::npos;
       at = response.body.find("\"checkpoints\":", at + 1))
    ++keys;
  EXPECT_EQ(keys, 1u) << response.body;
  auto detail = get_json("/api/job/train1");
  EXPECT_TRUE(detail.find("checkpoints")->is_array());
}

TEST_F(DashboardApi, JobDetailGivesMarkersWithEpochTimes) {
  auto doc = get_json("/api/job/train1");
  const auto& checkpoints = doc.find("checkpoints")->items();
  ASSERT_EQ(checkpoints.size(), 1u);
  EXPECT_EQ(checkpoints[0].get_int("step"), 2);
  EXPECT_EQ(checkpoints[0].get_string("status"), "committed");
  std::vector<std::string> markers;
  double checkpoint_event_time = 0;
  for (const auto& e : doc.find("events")->items()) {
    if (e.find("marker")->is_string()) markers.push_back(e.get_string("marker"));
    if (e.get_string("type") == "checkpoint_committed") checkpoint_event_time = e.get_number("time");
  }
  // The first child start is the job starting, the second a restart.
  EXPECT_EQ(markers, (std::vector<std::string>{"checkpoint", "notice", "restart"}));
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(checkpoint_event_time, now, 600);
  // The page finds a checkpoint marker's step by this equality.
  EXPECT_EQ(checkpoints[0].get_number("time"), checkpoint_event_time);
}

TEST_F(DashboardApi, SeriesListPutsLossFirst) {
  add_points("lr", 1, 3, 1000);
  add_points("val_loss", 1, 3, 1000);
  add_points("loss", 1, 3, 1000);
  auto doc = get_json("/api/job/train1/series");
  std::vector<std::string> names;
  for (const auto& s : doc.find("series")->items()) names.push_back(s.get_string("name"));
  EXPECT_EQ(names, (std::vector<std::string>{"loss", "val_loss", "lr"}));
  EXPECT_EQ(doc.find("series")->items()[0].get_string("source"), "stdout");
  EXPECT_EQ(doc.find("series")->items()[0].get_int("last_step"), 3);
}

TEST_F(DashboardApi, FewPointsComeAtFullResolutionExactly) {
  add_points("loss", 1, 50, 1000.125, 0.1);
  auto doc = get_json("/api/job/train1/series/loss?width=100&x=time");
  EXPECT_EQ(doc.get_string("method"), "full");
  EXPECT_EQ(doc.get_int("total"), 50);
  const auto values = numbers(*doc.find("value"));
  const auto times = numbers(*doc.find("time"));
  ASSERT_EQ(values.size(), 50u);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(values[i], 1.0 / (1 + i));  // bit for bit: the text reads back as the same double
    EXPECT_EQ(times[i], 1000.125 + i * 0.1);
  }
}

TEST_F(DashboardApi, ManyPointsAreDownsampledForTheWidthAsked) {
  add_points("loss", 1, 10000, 1000);
  auto lttb = get_json("/api/job/train1/series/loss?width=200");
  EXPECT_EQ(lttb.get_string("method"), "lttb");
  EXPECT_EQ(lttb.get_int("total"), 10000);
  EXPECT_EQ(lttb.find("value")->size(), 200u);
  EXPECT_EQ(numbers(*lttb.find("step")).front(), 1);
  EXPECT_EQ(numbers(*lttb.find("step")).back(), 10000);
  auto min_max = get_json("/api/job/train1/series/loss?width=200&method=min_max");
  EXPECT_EQ(min_max.get_string("method"), "min_max");
  EXPECT_LE(min_max.find("value")->size(), 402u);
  // A range: only its points, still downsampled to the width.
  auto range = get_json("/api/job/train1/series/loss?width=200&from=2000&to=2999");
  EXPECT_EQ(range.get_int("total"), 1000);
  EXPECT_GE(numbers(*range.find("time")).front(), 2000);
  EXPECT_LE(numbers(*range.find("time")).back(), 2999);
}

TEST_F(DashboardApi, SmoothsOverEveryPointBeforeDownsampling) {
  add_points("loss", 1, 5000, 1000);
  auto doc = get_json("/api/job/train1/series/loss?width=100&smooth=0.9");
  std::vector<double> all(5000);
  for (int i = 0; i < 5000; ++i) all[i] = 1.0 / (1 + i);
  const auto expected = debiased_ema(all, 0.9);
  const auto steps = numbers(*doc.find("step"));
  const auto smoothed = numbers(*doc.find("smoothed"));
  ASSERT_EQ(steps.size(), smoothed.size());
  for (std::size_t k = 0; k < steps.size(); ++k)
    EXPECT_EQ(smoothed[k], expected[static_cast<std::size_t>(steps[k]) - 1]);
}

TEST_F(DashboardApi, StepAxisKeepsWhatARestartRedid) {
  add_points("loss", 1, 5, 1000);  // steps 1..5
  add_points("loss", 3, 4, 1010);  // resumed from step 2: 3..6
  auto doc = get_json("/api/job/train1/series/loss?x=step");
  EXPECT_EQ(numbers(*doc.find("step")), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(numbers(*doc.find("time")), (std::vector<double>{1000, 1001, 1010, 1011, 1012, 1013}));
  EXPECT_EQ(get_json("/api/job/train1/series/loss?x=time").get_int("total"), 9);
}

TEST_F(DashboardApi, MetricNamesWithSlashesAreFound) {
  add_points("train/box_loss", 1, 3, 1000);
  EXPECT_EQ(get_json("/api/job/train1/series/train%2Fbox_loss").get_int("total"), 3);
  EXPECT_EQ(get_json("/api/job/train1/series/train/box_loss").get_int("total"), 3);
}

TEST_F(DashboardApi, AnswersMistakesWithJsonErrors) {
  add_points("loss", 1, 3, 1000);
  EXPECT_NE(get_json("/api/job/nope", 404).get_string("error"), "");
  get_json("/api/job/nope/series", 404);
  get_json("/api/job/train1/series/nope", 404);
  get_json("/api/nope", 404);
  get_json("/api/job/train1/series/loss?width=abc", 400);
  get_json("/api/job/train1/series/loss?x=epoch", 400);
  get_json("/api/job/train1/series/loss?method=average", 400);
  get_json("/api/job/train1/series/loss?smooth=1.5", 400);
  get_json("/api/stream?job=nope", 404);
  auto post = m_dashboard->handle(RequestHead{"POST", "/api/jobs", "HTTP/1.1", {}});
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_FALSE(m_dashboard->handle(RequestHead{"GET", "/metrics", "HTTP/1.1", {}}));
}

TEST_F(DashboardApi, ServesThePageWithAStrictPolicyAndItsAssets) {
  Response page = get("/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("assets/uPlot.iife.min.js"), std::string::npos);
  EXPECT_NE(page.body.find("href=\"metrics\""), std::string::npos);
  std::string policy;
  for (const auto& [name, value] : page.headers)
    if (name == "Content-Security-Policy") policy = value;
  EXPECT_NE(policy.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(policy.find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(policy.find("unsafe"), std::string::npos);
  Response script = get("/assets/uPlot.iife.min.js");
  EXPECT_EQ(script.status, 200);
  EXPECT_EQ(script.content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(script.body.find("uPlot"), std::string::npos);
  EXPECT_EQ(get("/assets/dashboard.css").content_type, "text/css; charset=utf-8");
  EXPECT_EQ(get("/assets/../CMakeLists.txt").status, 404);
  EXPECT_EQ(get("/assets/nope.js").status, 404);
}

TEST_F(DashboardApi, GpusAnswerWithASampleOnTheFirstLook) {
  auto doc = get_json("/api/gpus");
  EXPECT_TRUE(doc.get_bool("available"));
  ASSERT_EQ(doc.find("gpus")->size(), 2u);
  EXPECT_EQ(doc.find("gpus")->items()[1].get_string("uuid"), "GPU-1");
  EXPECT_EQ(doc.find("gpus")->items()[0].get_number("power_limit_w"), 400);
  ASSERT_GE(doc.find("time")->size(), 1u);
  const auto& util = doc.find("utilization_percent")->items();
  ASSERT_EQ(util.size(), 2u);
  EXPECT_EQ(util[1].items()[0].as_number(), 91);
  EXPECT_EQ(doc.find("memory_used_bytes")->items()[0].items()[0].as_number(),
            static_cast<double>(10ull << 30));
  EXPECT_EQ(doc.find("power_w")->items()[1].items()[0].as_number(), 251);
  EXPECT_EQ(doc.find("temperature_c")->items()[0].items()[0].as_number(), 40);
  // Nothing newer than the newest sample.
  const double newest = doc.find("time")->items().back().as_number();
  EXPECT_EQ(get_json("/api/gpus?since=" + std::to_string(newest + 1)).find("time")->size(), 0u);
}

TEST_F(DashboardApi, AnEndedJobsHistoryIsLoadedOnlyWhenAskedFor) {
  add_points("loss", 1, 3, 1000);
  append("supervisor_stopped", {{"outcome", "finished"}});
  JobCatalog catalog(JobCatalogOptions{m_root, {}, std::chrono::milliseconds(0)});
  catalog.refresh();
  ASSERT_EQ(catalog.jobs().size(), 1u);
  EXPECT_EQ(catalog.jobs()[0].journal->state.phase, job::JobPhase::finished);
  EXPECT_FALSE(catalog.jobs()[0].history);
  EXPECT_FALSE(catalog.job("train1")->history);
  auto loaded = catalog.job("train1", HistoryNeed::load);
  ASSERT_TRUE(loaded && loaded->history);
  EXPECT_EQ(loaded->history->series().size(), 1u);
  catalog.refresh();  // and kept, and refreshed, from then on
  add_points("loss", 4, 1, 1003);
  catalog.refresh();
  ASSERT_TRUE(catalog.jobs()[0].history);
  EXPECT_EQ(catalog.jobs()[0].history->series()[0].points, 4u);
  // Through the dashboard too.
  EXPECT_EQ(get_json("/api/job/train1/series/loss").get_int("total"), 4);
}

// ---- the stream ------------------------------------------------------------------------------

TEST_F(DashboardApi, StreamSendsNewPointsEventsAndGpuSamples) {
  add_points("loss", 1, 3, 1000);
  Response r = get("/api/stream?job=train1&since=1002&events=6");
  ASSERT_TRUE(r.stream);
  EXPECT_EQ(r.content_type, "text/event-stream");
  FakeWriter out;
  out.steps = {
      [&] {
        add_points("loss", 4, 2, 1003);
        append("checkpoint_committed", {{"path", "/ck/step-5.pt"}, {"step", 5}});
        m_sampler->sample_now();
      },
      [&] { add_points("accuracy", 1, 1, 1010); },
  };
  r.stream(out);
  const std::string& s = out.written;
  EXPECT_TRUE(s.starts_with("retry: 3000\n\n"));
  // The first look reports the job (no new events) and nothing else of the history: since=1002.
  EXPECT_NE(s.find("event: job\n"), std::string::npos);
  EXPECT_EQ(s.find("[1000"), std::string::npos);
  EXPECT_EQ(s.find("[1002"), std::string::npos);
  // Then the two new loss points, the checkpoint event with its marker, a GPU sample, and the
  // new series.
  EXPECT_NE(s.find("\"loss\":{\"time\":[1003,1004],\"step\":[4,5],\"value\":[0.25,0.2]}"), std::string::npos)
      << s;
  EXPECT_NE(s.find("\"index\":6,"), std::string::npos) << s;
  EXPECT_NE(s.find("\"marker\":\"checkpoint\""), std::string::npos);
  EXPECT_NE(s.find("event: gpu\n"), std::string::npos);
  EXPECT_NE(s.find("\"accuracy\":{\"time\":[1010]"), std::string::npos) << s;
  // Every message ends with an empty line and carries the cursor to resume from.
  EXPECT_TRUE(s.ends_with("\n\n"));
  EXPECT_NE(s.find("\nid: 7,1010,"), std::string::npos) << s;
}

TEST_F(DashboardApi, StreamResumesFromLastEventId) {
  add_points("loss", 1, 5, 1000);
  // A browser that saw 5 events and points up to t=1002 reconnects.
  Response r = get("/api/stream?job=train1", {{"Last-Event-ID", "5,1002,null"}});
  ASSERT_TRUE(r.stream);
  FakeWriter out;
  out.steps = {[&] { m_sampler->sample_now(); }};
  r.stream(out);
  EXPECT_NE(out.written.find("\"loss\":{\"time\":[1003,1004]"), std::string::npos) << out.written;
  EXPECT_NE(out.written.find("\"events\":[{\"index\":5,"), std::string::npos) << out.written;
  EXPECT_NE(out.written.find("event: gpu\n"), std::string::npos);  // GPU history since -inf
}

TEST_F(DashboardApi, StreamTellsThePageToRefetchABurst) {
  add_points("loss", 1, 3, 1000);
  JobCatalog catalog(JobCatalogOptions{m_root, {}, std::chrono::milliseconds(0)});
  DashboardOptions options;
  options.max_stream_points = 10;
  Dashboard dashboard(catalog, *m_sampler, options);
  auto r = dashboard.handle(RequestHead{"GET", "/api/stream?job=train1&since=1002", "HTTP/1.1", {}});
  ASSERT_TRUE(r && r->stream);
  FakeWriter out;
  out.steps = {[&] { add_points("loss", 4, 11, 1003); }};
  r->stream(out);
  EXPECT_NE(out.written.find("\"reload\":[\"loss\"]"), std::string::npos) << out.written;
}

// ---- /metrics carries the jobs -----------------------------------------------------------------

TEST_F(DashboardApi, ScrapeAddsTheJobsMetrics) {
  add_points("loss", 1, 3, 1000);
  MetricsExporter exporter(ExporterOptions{"h", m_root, {}, [] { return two_gpus(); }});
  const std::string text = exporter.scrape();
  EXPECT_NE(text.find("job_name=\"train1\""), std::string::npos) << text;
  EXPECT_NE(text.find("DCGM_FI_DEV_GPU_UTIL"), std::string::npos);
  // And routes the dashboard.
  auto page = exporter.handle(RequestHead{"GET", "/api/jobs", "HTTP/1.1", {}});
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("\"train1\""), std::string::npos);
}

}  // namespace
}  // namespace gpuhost::telemetry
