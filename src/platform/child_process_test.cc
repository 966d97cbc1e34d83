#include "platform/child_process.h"

#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#ifndef _WIN32
#include <signal.h>
#endif

#include "platform/job_cgroup.h"
#include "platform/process.h"
#include "platform/system_info.h"
#include "platform/termination.h"
#include "platform/test_support.h"

namespace gpuhost::platform {
namespace {

using test_support::child_path;
using test_support::fresh_temp_dir;
using test_support::on_windows;

using namespace std::chrono_literals;

// Bounds for waiting on something that should happen at once; only a broken build reaches them.
constexpr auto k_patience = 20s;

bool under_wine() {
  static const bool wine = collect_system_info().os.under_wine;
  return wine;
}

// Output collected from the reader threads.
class Collected {
 public:
  OutputHandler handler() {
    return [this](OutputStream stream, std::string_view chunk) {
      std::lock_guard lock(m_mutex);
      std::string& text = stream == OutputStream::out ? m_out : m_err;
      for (char c : chunk)
        if (c != '\r') text.push_back(c);  // text-mode stdout on Windows
    };
  }
  std::string out() {
    std::lock_guard lock(m_mutex);
    return m_out;
  }
  std::string err() {
    std::lock_guard lock(m_mutex);
    return m_err;
  }
  // Waits until stdout holds `text`; false after k_patience.
  bool wait_for_out(std::string_view text) {
    const auto deadline = std::chrono::steady_clock::now() + k_patience;
    while (std::chrono::steady_clock::now() < deadline) {
      if (out().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

 private:
  std::mutex m_mutex;
  std::string m_out;
  std::string m_err;
};

ChildOptions child_options(std::vector<std::string> args, Collected* collected = nullptr) {
  ChildOptions options;
  options.argv = {child_path()};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  if (collected) options.on_output = collected->handler();
  return options;
}

ChildExit wait_out(ChildProcess& process) {
  auto exit = process.wait_for(std::chrono::duration_cast<std::chrono::milliseconds>(k_patience));
  EXPECT_TRUE(exit) << exit.error().message;
  if (!exit || !*exit) {
    ADD_FAILURE() << "child still running";
    return {};
  }
  return **exit;
}

// The pid a child wrote with "pidfile", or 0 after k_patience.
long read_pid_file(const std::filesystem::path& path) {
  const auto deadline = std::chrono::steady_clock::now() + k_patience;
  while (std::chrono::steady_clock::now() < deadline) {
    long pid = 0;
    if (std::ifstream file(path); file >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(10ms);
  }
  return 0;
}

bool gone_eventually(long pid) {
  const auto deadline = std::chrono::steady_clock::now() + k_patience;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!test_support::process_is_running(pid)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(ChildSignal, ParsesCommonSpellings) {
  EXPECT_EQ(parse_child_signal("SIGUSR1"), ChildSignal::user1);
  EXPECT_EQ(parse_child_signal("usr1"), ChildSignal::user1);
  EXPECT_EQ(parse_child_signal("USR2"), ChildSignal::user2);
  EXPECT_EQ(parse_child_signal("sigterm"), ChildSignal::terminate);
  EXPECT_EQ(parse_child_signal("INT"), ChildSignal::interrupt);
  EXPECT_EQ(parse_child_signal("SIGHUP"), ChildSignal::hangup);
  EXPECT_EQ(parse_child_signal("CTRL_BREAK"), ChildSignal::ctrl_break);
  EXPECT_EQ(parse_child_signal("ctrl-break"), ChildSignal::ctrl_break);
  EXPECT_EQ(parse_child_signal("SIGKILL"), std::nullopt);
  EXPECT_EQ(parse_child_signal(""), std::nullopt);
  EXPECT_EQ(parse_child_signal("SIG"), std::nullopt);
}

TEST(ChildSignal, NamesRoundTrip) {
  for (ChildSignal signal : {ChildSignal::interrupt, ChildSignal::terminate, ChildSignal::hangup,
                             ChildSignal::user1, ChildSignal::user2, ChildSignal::ctrl_break})
    EXPECT_EQ(parse_child_signal(child_signal_name(signal)), signal) << child_signal_name(signal);
}

TEST(ChildSignal, DefaultsFitTheOs) {
  if (on_windows()) {
    EXPECT_EQ(default_save_signal(), ChildSignal::ctrl_break);
    EXPECT_EQ(default_stop_signal(), ChildSignal::ctrl_break);
  } else {
    EXPECT_EQ(default_save_signal(), ChildSignal::user1);
    EXPECT_EQ(default_stop_signal(), ChildSignal::terminate);
  }
}

TEST(ChildExit, DescribesExitCodes) {
  ChildExit exit;
  exit.exit_code = 3;
  EXPECT_EQ(exit.describe(), "exit code 3");
  EXPECT_FALSE(exit.succeeded());
  exit.exit_code = 0;
  EXPECT_TRUE(exit.succeeded());
}

TEST(ChildExit, DescribesCrashes) {
  ChildExit exit;
  if (on_windows()) {
    exit.exit_code = static_cast<int>(0xC0000005u);
    EXPECT_EQ(exit.describe(), "exit code 0xC0000005 (access violation)");
  } else {
    exit.signaled = true;
    exit.signal = 9;
    EXPECT_EQ(exit.describe(), "killed by SIGKILL");
  }
}

TEST(ChildProcess, StreamsBothOutputsAndReportsTheExitCode) {
  Collected collected;
  auto process = ChildProcess::spawn(
      child_options({"out", "hello", "err", "oops", "out", " world", "exit", "3"}, &collected));
  ASSERT_TRUE(process) << process.error().message;
  EXPECT_GT(process->pid(), 0);
  ChildExit exit = wait_out(*process);
  EXPECT_EQ(exit.exit_code, 3);
  EXPECT_FALSE(exit.signaled);
  EXPECT_FALSE(exit.succeeded());
  EXPECT_EQ(collected.out(), "hello world");
  EXPECT_EQ(collected.err(), "oops");
}

TEST(ChildProcess, DeliversOutputWhileTheChildRuns) {
  Collected collected;
  auto process = ChildProcess::spawn(child_options({"out", "early", "sleep", "60000"}, &collected));
  ASSERT_TRUE(process) << process.error().message;
  EXPECT_TRUE(collected.wait_for_out("early"));
}

TEST(ChildProcess, LaterWaitsReturnTheSameExit) {
  auto process = ChildProcess::spawn(child_options({"exit", "5"}));
  ASSERT_TRUE(process) << process.error().message;
  EXPECT_EQ(wait_out(*process).exit_code, 5);
  auto again = process->wait_for(0ms);
  ASSERT_TRUE(again && *again);
  EXPECT_EQ((*again)->exit_code, 5);
  EXPECT_TRUE(process->send(on_windows() ? ChildSignal::ctrl_break : ChildSignal::terminate));
}

TEST(ChildProcess, PassesEnvironmentAndWorkingDirectory) {
  Collected collected;
  auto dir = fresh_temp_dir("cwd");
  auto options = child_options({"env", "GPUHOST_CHILD_TEST_VALUE", "out", "|", "cwd"}, &collected);
  options.environment = {{"GPUHOST_CHILD_TEST_VALUE", "seven"}};
  options.working_directory = dir.string();
  auto process = ChildProcess::spawn(options);
  ASSERT_TRUE(process) << process.error().message;
  EXPECT_TRUE(wait_out(*process).succeeded());
  std::string out = collected.out();
  ASSERT_NE(out.find('|'), std::string::npos) << out;
  EXPECT_EQ(out.substr(0, out.find('|')), "seven");
  EXPECT_TRUE(std::filesystem::equivalent(out.substr(out.find('|') + 1), dir)) << out;
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

TEST(ChildProcess, ReportsNotFoundForAMissingProgram) {
  ChildOptions options;
  options.argv = {"gpuhost-no-such-program-4711"};
  auto process = ChildProcess::spawn(options);
  ASSERT_FALSE(process);
  EXPECT_EQ(process.error().code, ErrorCode::not_found) << process.error().message;

  options.argv = {(fresh_temp_dir("missing") / "nothing-here").string()};
  process = ChildProcess::spawn(options);
  ASSERT_FALSE(process);
  EXPECT_EQ(process.error().code, ErrorCode::not_found) << process.error().message;
}

TEST(ChildProcess, ReportsAMissingWorkingDirectory) {
  auto options = child_options({"exit", "0"});
  options.working_directory = (fresh_temp_dir("nodir") / "absent").string();
  auto process = ChildProcess::spawn(options);
  ASSERT_FALSE(process);
  EXPECT_NE(process.error().message.find("absent"), std::string::npos) << process.error().message;
}

TEST(ChildProcess, WaitTimesOutWhileTheChildRuns) {
  auto process = ChildProcess::spawn(child_options({"sleep", "60000"}));
  ASSERT_TRUE(process) << process.error().message;
  auto exit = process->wait_for(50ms);
  ASSERT_TRUE(exit) << exit.error().message;
  EXPECT_FALSE(*exit);
}

TEST(ChildProcess, SaveSignalReachesATrappingChild) {
  Collected collected;
  const char* trap_name = on_windows() ? "break" : "usr1";
  auto process = ChildProcess::spawn(
      child_options({"trap", trap_name, "42", "out", "ready", "sleep", "60000"}, &collected));
  ASSERT_TRUE(process) << process.error().message;
  ASSERT_TRUE(collected.wait_for_out("ready"));
  auto sent = process->send(default_save_signal());
  ASSERT_TRUE(sent) << sent.error().message;
  ChildExit exit = wait_out(*process);
  EXPECT_EQ(exit.exit_code, 42) << exit.describe() << "; output: " << collected.out();
  EXPECT_NE(collected.out().find(on_windows() ? "trapped CTRL_" : "trapped SIGUSR1"), std::string::npos)
      << collected.out();
}

// Windows: the default console handler ends the process with STATUS_CONTROL_C_EXIT.
TEST(ChildProcess, StopSignalEndsAChildThatDoesNotTrapIt) {
  if (under_wine())
    GTEST_SKIP()
        << "Wine delivers CTRL_C in place of CTRL_BREAK, which a new process group ignores by default";
  Collected collected;
  auto process = ChildProcess::spawn(child_options({"out", "ready", "sleep", "60000"}, &collected));
  ASSERT_TRUE(process) << process.error().message;
  ASSERT_TRUE(collected.wait_for_out("ready"));
  ASSERT_TRUE(process->send(default_stop_signal()));
  ChildExit exit = wait_out(*process);
  EXPECT_EQ(exit.describe(), on_windows() ? "exit code 0xC000013A (control-C exit)" : "killed by SIGTERM");
}

TEST(ChildProcess, RefusesSignalsTheOsLacks) {
  auto process = ChildProcess::spawn(child_options({"sleep", "60000"}));
  ASSERT_TRUE(process) << process.error().message;
  auto sent = process->send(on_windows() ? ChildSignal::user1 : ChildSignal::ctrl_break);
  ASSERT_FALSE(sent);
  EXPECT_EQ(sent.error().code, ErrorCode::unsupported);
}

TEST(ChildProcess, SupervisorDoesNotReceiveTheSignalItSends) {
  install_termination_handlers();
  while (wait_termination_request(0ms)) {
  }
  Collected collected;
  const char* trap_name = on_windows() ? "break" : "usr1";
  auto process = ChildProcess::spawn(
      child_options({"trap", trap_name, "42", "out", "ready", "sleep", "60000"}, &collected));
  ASSERT_TRUE(process) << process.error().message;
  ASSERT_TRUE(collected.wait_for_out("ready"));
  ASSERT_TRUE(process->send(default_save_signal()));
  EXPECT_EQ(wait_out(*process).exit_code, 42);
  EXPECT_EQ(wait_termination_request(200ms), std::nullopt);
}

TEST(ChildProcess, KillTreeEndsGrandchildren) {
  auto dir = fresh_temp_dir("tree");
  auto pid_file = dir / "grandchild.pid";
  auto process = ChildProcess::spawn(
      child_options({"spawn", "4", "pidfile", pid_file.string(), "sleep", "60000", "sleep", "60000"}));
  ASSERT_TRUE(process) << process.error().message;
  long grandchild = read_pid_file(pid_file);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(test_support::process_is_running(grandchild));
  process->kill_tree();
  ChildExit exit = wait_out(*process);
  EXPECT_FALSE(exit.succeeded());
  EXPECT_TRUE(gone_eventually(grandchild)) << "grandchild " << grandchild << " survived kill_tree";
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

// The save request goes only to processes with a handler: members() says which catch it. The
// child traps the save signal; the grandchild it spawned does not.
TEST(ChildProcess, MembersListTheTreeAndWhoCatchesASignal) {
  auto dir = fresh_temp_dir("members");
  auto pid_file = dir / "grandchild.pid";
  Collected collected;
  const char* trap_name = on_windows() ? "break" : "usr1";
  auto process =
      ChildProcess::spawn(child_options({"trap", trap_name, "42", "spawn", "4", "pidfile", pid_file.string(),
                                         "sleep", "60000", "out", "ready", "sleep", "60000"},
                                        &collected));
  ASSERT_TRUE(process) << process.error().message;
  ASSERT_TRUE(collected.wait_for_out("ready"));
  long grandchild = read_pid_file(pid_file);
  ASSERT_GT(grandchild, 0);
  auto members = process->members(default_save_signal());
  ASSERT_TRUE(members) << members.error().message;
  const TreeMember* own = nullptr;
  const TreeMember* grand = nullptr;
  for (const TreeMember& m : *members) {
    if (m.pid == process->pid()) own = &m;
    if (m.pid == grandchild) grand = &m;
  }
  ASSERT_NE(own, nullptr) << "the child itself is not listed";
  ASSERT_NE(grand, nullptr) << "grandchild " << grandchild << " is not listed";
  EXPECT_FALSE(own->name.empty());
  if (on_windows()) {
    EXPECT_FALSE(own->catches.has_value()) << "Windows cannot see console handlers from outside";
  } else {
    EXPECT_EQ(grand->parent_pid, process->pid());
    ASSERT_TRUE(own->catches.has_value());
    EXPECT_TRUE(*own->catches);
    ASSERT_TRUE(grand->catches.has_value());
    EXPECT_FALSE(*grand->catches);
    EXPECT_NE(own->command_line.find("trap"), std::string::npos) << own->command_line;
    // One process, not the group: the grandchild (no handler) dies of it, the child does not
    // even hear of it; then the child alone gets it and takes its trap.
    ASSERT_TRUE(process->send_to(grandchild, default_save_signal()));
    EXPECT_TRUE(gone_eventually(grandchild));
    EXPECT_EQ(collected.out().find("trapped"), std::string::npos) << collected.out();
    ASSERT_TRUE(process->send_to(process->pid(), default_save_signal()));
    EXPECT_EQ(wait_out(*process).exit_code, 42);
  }
  process->kill_tree();
  (void)wait_out(*process);
  EXPECT_TRUE(gone_eventually(grandchild));
  EXPECT_TRUE(process->members(default_save_signal())->empty()) << "a reaped child has no members";
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

// An attempt ends with its child: what the child left running in its group is killed before the
// child is reaped, so nothing of one attempt runs beside the next.
TEST(ChildProcess, WaitEndsWhatTheChildLeftInItsGroup) {
  auto dir = fresh_temp_dir("leftover");
  auto pid_file = dir / "grandchild.pid";
  auto process = ChildProcess::spawn(
      child_options({"spawn", "4", "pidfile", pid_file.string(), "sleep", "60000", "sleep", "200"}));
  ASSERT_TRUE(process) << process.error().message;
  long grandchild = read_pid_file(pid_file);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(wait_out(*process).succeeded());
  EXPECT_TRUE(gone_eventually(grandchild)) << "grandchild " << grandchild << " outlived its attempt";
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

// The intermediate child supervises a grandchild of its own (in its own process group / nested
// job); killing the intermediate outright must take the grandchild along: PR_SET_PDEATHSIG on
// Linux, the job on Windows.
TEST(ChildProcess, ChildDiesWithAKilledSupervisor) {
  auto dir = fresh_temp_dir("pdeath");
  auto pid_file = dir / "grandchild.pid";
  auto supervisor = ChildProcess::spawn(
      child_options({"child", "4", "pidfile", pid_file.string(), "sleep", "60000", "sleep", "60000"}));
  ASSERT_TRUE(supervisor) << supervisor.error().message;
  long grandchild = read_pid_file(pid_file);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(test_support::process_is_running(grandchild));
  supervisor->kill_tree();
  EXPECT_FALSE(wait_out(*supervisor).succeeded());
  EXPECT_TRUE(gone_eventually(grandchild)) << "grandchild " << grandchild << " outlived its supervisor";
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

// A cgroup of the job's own where this machine delegates one (Linux as root here). Skipped only
// where the kernel or the user cannot have one; any other failure to make it fails the test.
std::unique_ptr<JobCgroup> test_cgroup(const char* tag) {
  auto cgroup = JobCgroup::open(job_cgroup_name(std::string("child-test-") + tag, std::to_string(current_process_id())));
  if (cgroup) return std::move(*cgroup);
  const std::string& why = cgroup.error().message;
  if (why.find("no cgroup v2") == std::string::npos && why.find("not writable") == std::string::npos)
    ADD_FAILURE() << why;
  return nullptr;
}

TEST(JobCgroup, NamesAreSafeAndTellJobFoldersApart) {
  const std::string a = job_cgroup_name("llama 3/ft", "/jobs/a");
  EXPECT_TRUE(a.starts_with("gpuhost-llama_3_ft-")) << a;
  EXPECT_EQ(a.size(), std::string("gpuhost-llama_3_ft-").size() + 16);
  EXPECT_NE(a, job_cgroup_name("llama 3/ft", "/jobs/b"));
  EXPECT_EQ(a, job_cgroup_name("llama 3/ft", "/jobs/a"));
  EXPECT_EQ(job_cgroup_name(std::string(100, 'x'), "k").size(), 8 + 40 + 1 + 16);
}

// A daemon-like grandchild (setsid, its parent gone) is outside the child's process group and
// parent chain: only the cgroup still holds it. Without one it outlives the attempt (the
// control case); with one, the end of the child ends it too.
TEST(ChildProcess, CgroupEndsWhatLeftTheGroupAndTheSession) {
  if (on_windows()) GTEST_SKIP() << "Windows keeps the tree in a Job Object (KillTreeEndsGrandchildren)";
  auto cgroup = test_cgroup("escape");
  if (!cgroup) GTEST_SKIP() << "no delegated cgroup v2 for this user";
  auto dir = fresh_temp_dir("cgroup");
  auto run = [&](JobCgroup* into, const char* name) {
    auto pid_file = dir / name;
    auto options = child_options(
        {"spawn", "5", "setsid", "pidfile", pid_file.string(), "sleep", "60000", "sleep", "300"});
    options.cgroup = into;
    auto process = ChildProcess::spawn(options);
    EXPECT_TRUE(process) << process.error().message;
    if (!process) return 0L;
    long grandchild = read_pid_file(pid_file);
    EXPECT_GT(grandchild, 0);
    if (into) {
      EXPECT_TRUE(into->contains(grandchild));
      auto members = process->members(ChildSignal::user1);
      EXPECT_TRUE(members && std::any_of(members->begin(), members->end(),
                                         [&](const TreeMember& m) { return m.pid == grandchild; }));
    }
    EXPECT_TRUE(wait_out(*process).succeeded());
    return grandchild;
  };
  long escaped = run(nullptr, "control.pid");
  EXPECT_TRUE(test_support::process_is_running(escaped)) << "the control case: the group alone misses it";
#ifndef _WIN32
  if (escaped > 0) ::kill(static_cast<pid_t>(escaped), SIGKILL);
#endif
  long held = run(cgroup.get(), "held.pid");
  EXPECT_TRUE(gone_eventually(held)) << "grandchild " << held << " outlived its attempt";
  EXPECT_TRUE(cgroup->processes().empty());
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

TEST(JobCgroup, KillAllEmptiesIt) {
  if (on_windows()) GTEST_SKIP() << "cgroups are Linux's";
  auto cgroup = test_cgroup("killall");
  if (!cgroup) GTEST_SKIP() << "no delegated cgroup v2 for this user";
  auto dir = fresh_temp_dir("killall");
  auto options =
      child_options({"spawn", "4", "pidfile", (dir / "g.pid").string(), "sleep", "60000", "sleep", "60000"});
  options.cgroup = cgroup.get();
  auto process = ChildProcess::spawn(options);
  ASSERT_TRUE(process) << process.error().message;
  ASSERT_GT(read_pid_file(dir / "g.pid"), 0);
  EXPECT_EQ(cgroup->processes().size(), 2u);
  auto killed = cgroup->kill_all(k_patience);
  ASSERT_TRUE(killed) << killed.error().message;
  EXPECT_EQ(*killed, 2);
  EXPECT_TRUE(cgroup->processes().empty());
  EXPECT_TRUE(wait_out(*process).signaled);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

TEST(ChildProcess, DestructorKillsARunningChild) {
  auto dir = fresh_temp_dir("dtor");
  auto pid_file = dir / "child.pid";
  long pid = 0;
  {
    Collected collected;
    auto process =
        ChildProcess::spawn(child_options({"pidfile", pid_file.string(), "sleep", "60000"}, &collected));
    ASSERT_TRUE(process) << process.error().message;
    pid = read_pid_file(pid_file);
    ASSERT_EQ(pid, process->pid());
    EXPECT_TRUE(test_support::process_is_running(pid));
  }
  EXPECT_TRUE(gone_eventually(pid));
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

TEST(ChildProcess, DoesNotWaitForAGrandchildHoldingTheOutput) {
  Collected collected;
  // The child exits at once; its grandchild keeps stdout open for a minute.
  auto process =
      ChildProcess::spawn(child_options({"spawn", "2", "sleep", "60000", "out", "child-done"}, &collected));
  ASSERT_TRUE(process) << process.error().message;
  ChildExit exit = wait_out(*process);
  EXPECT_TRUE(exit.succeeded()) << exit.describe();
  EXPECT_EQ(collected.out(), "child-done");
}

TEST(ChildProcess, InheritsOurOutputWithoutAHandler) {
  auto process = ChildProcess::spawn(child_options({"out", "", "exit", "4"}));
  ASSERT_TRUE(process) << process.error().message;
  EXPECT_EQ(wait_out(*process).exit_code, 4);
}

TEST(ChildProcess, MovesOwnership) {
  auto process = ChildProcess::spawn(child_options({"exit", "6"}));
  ASSERT_TRUE(process) << process.error().message;
  ChildProcess moved = std::move(*process);
  ChildProcess assigned = std::move(moved);
  EXPECT_EQ(wait_out(assigned).exit_code, 6);
}

TEST(ChildProcess, ReportsResourceUsage) {
  Collected collected;
  auto process = ChildProcess::spawn(child_options({"flood", "1000000"}, &collected));
  ASSERT_TRUE(process) << process.error().message;
  ChildExit exit = wait_out(*process);
  EXPECT_TRUE(exit.succeeded());
  EXPECT_EQ(collected.out().size(), 1000000u);
  if (!under_wine()) {  // Wine accounts for neither the job nor an exited process
    EXPECT_GT(exit.peak_rss_bytes, 0u);
  }
  ResourceUsage self = self_resource_usage();
  EXPECT_GT(self.peak_rss_bytes, 0u);
  EXPECT_GT(self.cpu_time.count(), 0);
}

TEST(KillProcessesWithEnvironment, KillsOnlyProcessesCarryingTheToken) {
  std::random_device random;
  const std::string token = std::to_string(random()) + "-" + std::to_string(current_process_id());
  Collected collected;
  auto options = child_options({"out", "ready", "sleep", "60000"}, &collected);
  options.environment = {{"GPUHOST_CHILD_TEST_TOKEN", token}};
  auto process = ChildProcess::spawn(options);
  ASSERT_TRUE(process) << process.error().message;
  ASSERT_TRUE(collected.wait_for_out("ready"));
  EXPECT_EQ(kill_processes_with_environment("GPUHOST_CHILD_TEST_TOKEN", token + "x"), 0);
  EXPECT_EQ(kill_processes_with_environment("GPUHOST_CHILD_TEST_TOKE", token), 0);
  if (on_windows()) {
    EXPECT_EQ(kill_processes_with_environment("GPUHOST_CHILD_TEST_TOKEN", token), 0);
    return;
  }
  EXPECT_EQ(kill_processes_with_environment("GPUHOST_CHILD_TEST_TOKEN", token), 1);
  ChildExit exit = wait_out(*process);
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.describe(), "killed by SIGKILL");
}

}  // namespace
}  // namespace gpuhost::platform
