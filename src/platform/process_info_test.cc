#include "platform/process_info.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#ifndef _WIN32
#include <pthread.h>
#include <unistd.h>
#else
#include <windows.h>
#endif

#include "platform/process.h"

namespace gpuhost::platform {
namespace {

TEST(ProcessName, NamesThisProcessAfterItsExecutable) {
  auto name = process_name(static_cast<unsigned>(current_process_id()));
  ASSERT_TRUE(name.has_value());
  // The test binary: "platform_test" (Linux, comm keeps 15 bytes) or "platform_test.exe".
  EXPECT_TRUE(name->starts_with("platform_test")) << *name;
}

TEST(ProcessName, IsEmptyForAProcessThatDoesNotExist) {
  EXPECT_FALSE(process_name(0).has_value());
  // Far above any pid_max (Linux 4194304) and not a multiple of 4 (Windows PIDs are).
  EXPECT_FALSE(process_name(2147483645u).has_value());
}

#ifndef _WIN32
// A thread named as PyTorch names its pin-memory thread, busy while the group is read: the
// group's activity lists it under that name with the CPU time it used.
TEST(GroupActivity, CountsTheCpuOfALiveNamedThread) {
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    pthread_setname_np(pthread_self(), "pt_data_pin");
    volatile unsigned long spin = 0;
    while (!stop) spin = spin + 1;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto activity = read_group_activity(getpgrp());
  stop = true;
  busy.join();
  ASSERT_TRUE(activity.has_value()) << activity.error().message;
  const auto pin = std::find_if(activity->threads.begin(), activity->threads.end(),
                                [](const ThreadTimes& t) { return t.name == "pt_data_pin"; });
  ASSERT_NE(pin, activity->threads.end());
  EXPECT_EQ(pin->pid, getpid());
  EXPECT_GT(pin->cpu_seconds, 0.05);               // it spun for half a second, with two cores on the host
  ASSERT_TRUE(pin->runqueue_seconds.has_value());  // Debian's kernel keeps schedstat
  EXPECT_GE(*pin->runqueue_seconds, 0.0);
  const auto main_thread = std::find_if(activity->threads.begin(), activity->threads.end(),
                                        [](const ThreadTimes& t) { return t.tid == getpid(); });
  ASSERT_NE(main_thread, activity->threads.end());
  EXPECT_TRUE(main_thread->name.starts_with("platform_test")) << main_thread->name;
}

TEST(GroupActivity, SaysWhenNoProcessOfTheGroupRuns) {
  auto activity = read_group_activity(2147483645L);
  ASSERT_FALSE(activity.has_value());
  EXPECT_EQ(activity.error().code, ErrorCode::not_found);
}

TEST(HostPressure, ReadsPsiWhereTheKernelHasIt) {
  // /proc/pressure exists on kernels built with PSI (Debian 12's does); a value is a percentage.
  if (auto io = pressure_some_avg10("io")) {
    EXPECT_GE(*io, 0.0);
    EXPECT_LE(*io, 100.0);
  }
  EXPECT_FALSE(pressure_some_avg10("no-such-resource").has_value());
  EXPECT_TRUE(swapped_in_pages().has_value());  // /proc/vmstat always has pswpin
}
#else
// Windows: this process's tree, a spinning thread's CPU time, and the reads; no major faults.
TEST(GroupActivity, CountsTheCpuOfALiveThreadOfTheProcessTree) {
  std::atomic<bool> stop{false};
  std::atomic<long> spinner{0};
  std::thread busy([&] {
    spinner = static_cast<long>(GetCurrentThreadId());
    volatile unsigned long spin = 0;
    while (!stop) spin = spin + 1;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const long self = current_process_id();
  auto activity = read_group_activity(self);
  stop = true;
  busy.join();
  ASSERT_TRUE(activity.has_value()) << activity.error().message;
  ASSERT_FALSE(activity->processes.empty());
  EXPECT_EQ(activity->processes.front().pid, self);
  EXPECT_TRUE(activity->processes.front().name.starts_with("platform_test"))
      << activity->processes.front().name;
  const auto thread = std::find_if(activity->threads.begin(), activity->threads.end(),
                                   [&](const ThreadTimes& t) { return t.tid == spinner; });
  ASSERT_NE(thread, activity->threads.end());
  EXPECT_EQ(thread->pid, self);
  EXPECT_GT(thread->cpu_seconds, 0.05);
  EXPECT_FALSE(thread->runqueue_seconds.has_value());  // Windows keeps no per-thread ready time
  EXPECT_FALSE(activity->faults_visible);
  EXPECT_TRUE(activity->io_visible);
  auto gone = read_group_activity(2147483645L);
  ASSERT_FALSE(gone.has_value());
  EXPECT_EQ(gone.error().code, ErrorCode::not_found);
  EXPECT_FALSE(pressure_some_avg10("io").has_value());
  EXPECT_FALSE(swapped_in_pages().has_value());
}
#endif

}  // namespace
}  // namespace gpuhost::platform
