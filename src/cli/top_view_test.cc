#include "cli/top_view.h"

#include <cmath>

#include <gtest/gtest.h>

namespace gpuhost::cli {
namespace {

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

int visible_width(std::string_view line) {
  int width = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b') {
      i = line.find('m', i);
      continue;
    }
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) ++width;
  }
  return width;
}

gpu::GpuDevice busy_gpu() {
  gpu::GpuDevice d;
  d.index = 3;
  d.name = "NVIDIA H100 80GB HBM3";
  d.uuid = "GPU-1";
  d.memory.value = gpu::MemoryState{80ull << 30, 40ull << 30, 40ull << 30, 0};
  d.utilization.value = gpu::Utilization{97, 60};
  d.temperature.value = gpu::Temperatures{71, 92, 87, 85, 95};
  d.power.value = gpu::Power{650000, 700000};
  d.clocks.value = gpu::Clocks{1980, 2619, 1980, 2619};
  d.processes.value = std::vector<gpu::GpuProcess>{{4242, false, 30ull << 30}, {77, true, std::nullopt}};
  return d;
}

TopFrame frame_with(gpu::GpuSnapshot snapshot) {
  TopFrame frame;
  frame.time = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));
  frame.hostname = "node-7";
  frame.gpus = std::move(snapshot);
  frame.process_names[4242] = "python3";
  return frame;
}

gpu::GpuSnapshot one_gpu() {
  gpu::GpuSnapshot s;
  s.available = true;
  s.driver_version = "550.54.15";
  s.cuda_driver_version = 12040;
  s.devices.push_back(busy_gpu());
  return s;
}

JobView running_job(double now) {
  JobView job;
  job.name = "llama-lora";
  job.state.phase = job::JobPhase::running;
  job.state.restarts = 2;
  job.step = 1234;
  job.loss = ScalarReading{"loss", 0.4321, 1230, now - 3};
  job.throughput = RateReading{"steps/s", 4.5, true};
  job::CommittedCheckpoint c;
  c.id = "ck-12";
  c.step = 1200;
  c.size_bytes = 2ull << 30;
  job.checkpoint = c;
  job.checkpoint_age_seconds = 250;
  return job;
}

TEST(TopView, ShowsEachGpuWithBarsClocksAndItsProcesses) {
  auto lines = render_top(frame_with(one_gpu()), TopLayout{120, true, false, {}}, TerminalStyle::plain());
  const std::string text = joined(lines);
  EXPECT_NE(text.find("GPU 3  NVIDIA H100 80GB HBM3  71C"), std::string::npos) << text;
  EXPECT_NE(text.find("sm 1980/1980 MHz"), std::string::npos) << text;
  EXPECT_NE(text.find("97%"), std::string::npos) << text;
  EXPECT_NE(text.find("40.0 GiB/80.0 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("650/700 W"), std::string::npos) << text;
  EXPECT_NE(text.find("driver 550.54.15  CUDA 12.4"), std::string::npos) << text;
  // A process with memory and a name; one without either (WDDM gives no per-process memory).
  EXPECT_NE(text.find("4242  python3"), std::string::npos) << text;
  EXPECT_NE(text.find("30.0 GiB  compute"), std::string::npos) << text;
  EXPECT_NE(text.find("77  ?"), std::string::npos) << text;
  EXPECT_NE(text.find("n/a  graphics"), std::string::npos) << text;
}

TEST(TopView, ShowsTheJobsStepLossThroughputAndCheckpoint) {
  auto frame = frame_with(one_gpu());
  frame.job = running_job(1'800'000'000.0);
  const std::string text = joined(render_top(frame, TopLayout{140, true, false, {}}, TerminalStyle::plain()));
  EXPECT_NE(text.find("job   llama-lora  running  step 1234  restarts 2"), std::string::npos) << text;
  EXPECT_NE(text.find("loss 0.4321 at step 1230, 3s ago"), std::string::npos) << text;
  EXPECT_NE(text.find("throughput 4.5 steps/s"), std::string::npos) << text;
  EXPECT_NE(text.find("checkpoint ck-12 at step 1200, 2.0 GiB, 4m 10s ago"), std::string::npos) << text;
}

TEST(TopView, WithoutNvmlSaysWhyAndStillShowsTheJob) {
  gpu::GpuSnapshot s;
  s.available = false;
  s.error = gpu::NvmlIssue{12, "NVML_ERROR_LIBRARY_NOT_FOUND", "NVML Shared Library Not Found"};
  auto frame = frame_with(s);
  frame.job = running_job(1'800'000'000.0);
  const std::string text = joined(render_top(frame, TopLayout{120, true, false, {}}, TerminalStyle::plain()));
  EXPECT_NE(text.find("unavailable: NVML_ERROR_LIBRARY_NOT_FOUND: NVML Shared Library Not Found"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("llama-lora"), std::string::npos) << text;
}

TEST(TopView, NoJobShowsTheNote) {
  auto frame = frame_with(one_gpu());
  frame.job_note = "no job in /jobs (gpuhost run starts one)";
  const std::string text = joined(render_top(frame, TopLayout{120, true, false, {}}, TerminalStyle::plain()));
  EXPECT_NE(text.find("job   no job in /jobs"), std::string::npos) << text;
}

TEST(TopView, LinesFitTheWidthWithAndWithoutColour) {
  auto frame = frame_with(one_gpu());
  frame.job = running_job(1'800'000'000.0);
  for (int columns : {40, 80, 200}) {
    for (const auto& line :
         render_top(frame, TopLayout{columns, true, true, std::chrono::seconds(1)}, TerminalStyle::plain()))
      EXPECT_LE(visible_width(line), columns) << line;
  }
}

TEST(TopView, OutputForAPipeKeepsWholeLines) {
  auto frame = frame_with(one_gpu());
  frame.job = running_job(1'800'000'000.0);
  const std::string text = joined(render_top(frame, TopLayout{40, false, false, {}}, TerminalStyle::plain()));
  EXPECT_NE(text.find("checkpoint ck-12 at step 1200, 2.0 GiB, 4m 10s ago"), std::string::npos) << text;
}

TEST(TopView, FitLineCountsNeitherColourNorUtf8ContinuationBytes) {
  EXPECT_EQ(fit_line("\x1b[1mabcdef\x1b[0m", 3), "\x1b[1mabc\x1b[0m");
  EXPECT_EQ(fit_line("abc", 3), "abc");
  EXPECT_EQ(fit_line("\xc3\xa9t\xc3\xa9", 2), "\xc3\xa9t");
}

TEST(TopView, JsonHasNullsForWhatNvmlCouldNotGive) {
  auto s = one_gpu();
  s.devices[0].power = {};
  s.devices[0].power.issue = gpu::NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "Not Supported"};
  auto frame = frame_with(s);
  frame.job = running_job(1'800'000'000.0);
  frame.job->loss->value = std::nan("");
  const json::Value doc = top_json(frame);
  const json::Value& gpu = doc.find("gpus")->items().at(0);
  EXPECT_TRUE(gpu.find("power_watts")->is_null());
  EXPECT_EQ(gpu.find("utilization_percent")->as_int(), 97);
  EXPECT_EQ(gpu.find("memory_total_bytes")->as_int(), static_cast<std::int64_t>(80ull << 30));
  const auto& processes = gpu.find("processes")->items();
  ASSERT_EQ(processes.size(), 2u);
  EXPECT_EQ(processes[0].get_string("name"), "python3");
  EXPECT_TRUE(processes[1].find("used_memory_bytes")->is_null());
  EXPECT_TRUE(processes[1].find("name")->is_null());
  const json::Value& job = *doc.find("job");
  EXPECT_EQ(job.get_string("phase"), "running");
  EXPECT_EQ(job.get_int("step"), 1234);
  EXPECT_EQ(job.find("loss")->get_string("value"), "nan");
  EXPECT_EQ(job.find("checkpoint")->get_string("id"), "ck-12");
}

TEST(TopView, AgesReadAsMinutesHoursAndDays) {
  EXPECT_EQ(format_age(4), "4s");
  EXPECT_EQ(format_age(200), "3m 20s");
  EXPECT_EQ(format_age(7500), "2h 05m");
  EXPECT_EQ(format_age(3 * 86400 + 4 * 3600 + 5), "3d 4h");
}

}  // namespace
}  // namespace gpuhost::cli
