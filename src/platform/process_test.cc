#include "platform/process.h"

#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "platform/environment.h"
#include "platform/system_info.h"
#include "platform/test_support.h"

namespace gpuhost::platform {
namespace {

using test_support::child_path;
using test_support::fresh_temp_dir;
using test_support::on_windows;

using namespace std::chrono_literals;

std::filesystem::path test_dir() {
  auto self = current_executable_path();
  return self ? std::filesystem::path(*self).parent_path() : std::filesystem::path(".");
}

ProcessOptions process_options(std::vector<std::string> args) {
  ProcessOptions options;
  options.argv = {child_path()};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.timeout = 20s;
  return options;
}

// The child's stdout is in text mode on Windows, where "\n" becomes "\r\n".
std::string without_cr(std::string text) {
  std::erase(text, '\r');
  return text;
}

TEST(Process, ChildProgramIsBuilt) {
  ASSERT_TRUE(find_executable(child_path())) << child_path();
}

TEST(Process, CapturesStdoutStderrAndExitCode) {
  auto result = run_process(process_options({"out", "hello", "err", "oops", "exit", "3"}));
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->stdout_text, "hello");
  EXPECT_EQ(result->stderr_text, "oops");
  EXPECT_EQ(result->exit_code, 3);
  EXPECT_FALSE(result->timed_out);
  EXPECT_FALSE(result->signaled);
  EXPECT_FALSE(result->succeeded());
}

TEST(Process, SucceedsOnExitZero) {
  auto result = run_process(process_options({"out", "fine"}));
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_TRUE(result->succeeded());
  EXPECT_EQ(result->exit_code, 0);
}

TEST(Process, RunsTheSystemShell) {
  ProcessOptions options;
  options.argv = on_windows() ? std::vector<std::string>{"cmd", "/c", "echo", "from-shell&", "exit", "4"}
                              : std::vector<std::string>{"/bin/sh", "-c", "echo from-shell; exit 4"};
  auto result = run_process(options);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->exit_code, 4);
  EXPECT_NE(result->stdout_text.find("from-shell"), std::string::npos) << result->stdout_text;
}

TEST(Process, ReportsNotFoundForMissingProgram) {
  ProcessOptions options;
  options.argv = {"gpuhost-no-such-program-7f3a"};
  auto result = run_process(options);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::not_found) << result.error().message;
  EXPECT_NE(result.error().message.find("gpuhost-no-such-program-7f3a"), std::string::npos);

  options.argv = {(test_dir() / "no-such-dir" / "no-such-program").string()};
  result = run_process(options);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::not_found) << result.error().message;
}

TEST(Process, ReportsNotFoundWhenExecFails) {
  if (on_windows()) GTEST_SKIP() << "no #! scripts on Windows";
  // The file exists, so the failure comes from execve in the child (ENOENT for the interpreter).
  auto dir = fresh_temp_dir("exec");
  auto script = dir / "needs-missing-interpreter";
  std::ofstream(script) << "#!/nonexistent/gpuhost-interpreter\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  ProcessOptions options;
  options.argv = {script.string()};
  auto result = run_process(options);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::not_found) << result.error().message;
  EXPECT_NE(result.error().message.find("needs-missing-interpreter"), std::string::npos)
      << result.error().message;
}

TEST(Process, RejectsEmptyCommand) {
  auto result = run_process(ProcessOptions{});
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::invalid_argument);
}

TEST(Process, TimesOutAndKillsChild) {
  auto options = process_options({"out", "started", "sleep", "30000", "out", "never"});
  options.timeout = 500ms;
  auto result = run_process(options);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_TRUE(result->timed_out);
  EXPECT_FALSE(result->succeeded());
  // Killed, not waited for: a child left to finish its 30 s would have written "never" too.
  EXPECT_EQ(result->stdout_text, "started");
}

TEST(Process, KillsGrandchildrenOnTimeout) {
  auto dir = fresh_temp_dir("grandchild");
  auto marker = dir / "grandchild-survived";
  // The grandchild would create the marker 1.5 s in, long after the 0.5 s timeout.
  auto options = process_options({"spawn", "4", "sleep", "1500", "touch", marker.string(), "sleep", "30000"});
  options.timeout = 500ms;
  auto result = run_process(options);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_TRUE(result->timed_out);
  std::this_thread::sleep_for(2500ms);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the grandchild outlived the timeout";
  std::filesystem::remove_all(dir);
}

TEST(Process, DoesNotWaitForGrandchildHoldingOutput) {
  // The child exits at once; its grandchild keeps stdout open for 30 s.
  auto options = process_options({"spawn", "2", "sleep", "30000", "out", "parent-done"});
  options.timeout = 20s;
  auto result = run_process(options);
  ASSERT_TRUE(result) << result.error().message;
  // Waiting for the grandchild's end of the pipe would have run into the 20 s timeout.
  EXPECT_FALSE(result->timed_out);
  EXPECT_EQ(result->exit_code, 0);
  EXPECT_EQ(result->stdout_text, "parent-done");
}

TEST(Process, PassesEnvironmentOverrides) {
  auto options = process_options({"env", "GPUHOST_TEST_ADDED", "out", "|", "env", "PATH"});
  options.environment = {{"GPUHOST_TEST_ADDED", "hello world"}};
  auto result = run_process(options);
  ASSERT_TRUE(result) << result.error().message;
  auto bar = result->stdout_text.find('|');
  ASSERT_NE(bar, std::string::npos) << result->stdout_text;
  EXPECT_EQ(result->stdout_text.substr(0, bar), "hello world");
  EXPECT_NE(result->stdout_text.substr(bar + 1), "<unset>") << "the inherited environment was lost";
}

TEST(Process, OverrideReplacesInheritedVariable) {
  set_env("GPUHOST_TEST_REPLACED", "from-parent");
  auto options = process_options({"env", "GPUHOST_TEST_REPLACED"});
  // Windows names are case-insensitive, so a differently cased override still replaces the variable.
  options.environment = {{on_windows() ? "gpuhost_test_replaced" : "GPUHOST_TEST_REPLACED", "from-override"}};
  auto result = run_process(options);
  unset_env("GPUHOST_TEST_REPLACED");
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->stdout_text, "from-override");
}

TEST(Process, ChildInheritsSetEnv) {
  set_env("GPUHOST_TEST_INHERITED", "inherited-value");
  auto result = run_process(process_options({"env", "GPUHOST_TEST_INHERITED"}));
  unset_env("GPUHOST_TEST_INHERITED");
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->stdout_text, "inherited-value");
}

TEST(Process, WritesStdinText) {
  auto options = process_options({"cat"});
  options.stdin_text = "line one\nline two\n";
  auto result = run_process(options);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(without_cr(result->stdout_text), "line one\nline two\n");
}

TEST(Process, StdinIsEmptyWithoutText) {
  auto options = process_options({"cat", "out", "end"});
  options.timeout = 10s;
  auto result = run_process(options);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_FALSE(result->timed_out) << "the child waited on stdin";
  EXPECT_EQ(result->stdout_text, "end");
}

TEST(Process, LargeStdinAndStdoutDoNotDeadlock) {
  auto options = process_options({"cat"});
  options.stdin_text = std::string(3u << 20, 'z');
  auto result = run_process(options);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_FALSE(result->timed_out);
  EXPECT_EQ(result->stdout_text.size(), options.stdin_text->size());
}

TEST(Process, TruncatesOutputPastLimit) {
  auto options = process_options({"flood", "200000", "err", "tail"});
  options.max_output_bytes = 1000;
  auto result = run_process(options);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->stdout_text.size(), 1000u);
  EXPECT_EQ(result->stderr_text, "tail");
  EXPECT_TRUE(result->output_truncated);
  EXPECT_EQ(result->exit_code, 0);
}

TEST(Process, PassesArgumentsVerbatim) {
  std::vector<std::string> tricky = {"two words", "quote\"inside", "trailing\\", "back\\\\\"slash",
                                     "",          "tab\there",     "%PATH%",     "-dash"};
  std::vector<std::string> args = {"args"};
  args.insert(args.end(), tricky.begin(), tricky.end());
  auto result = run_process(process_options(args));
  ASSERT_TRUE(result) << result.error().message;
  std::string expected;
  for (const auto& arg : tricky) expected += arg + "\n";
  EXPECT_EQ(without_cr(result->stdout_text), expected);
}

TEST(Process, RunsInWorkingDirectory) {
  auto dir = fresh_temp_dir("cwd");
  auto options = process_options({"cwd"});
  options.working_directory = dir.string();
  auto result = run_process(options);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_TRUE(std::filesystem::equivalent(result->stdout_text, dir)) << result->stdout_text;
  std::filesystem::remove_all(dir);
}

TEST(Process, ReportsMissingWorkingDirectory) {
  auto options = process_options({"out", "x"});
  options.working_directory = (test_dir() / "no-such-working-dir").string();
  auto result = run_process(options);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("no-such-working-dir"), std::string::npos) << result.error().message;
}

TEST(Process, ReportsDeathBySignal) {
  if (on_windows()) GTEST_SKIP() << "Windows has no signals";
  ProcessOptions options;
  options.argv = {"/bin/sh", "-c", "kill -9 $$"};
  auto result = run_process(options);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_TRUE(result->signaled);
  EXPECT_EQ(result->signal, 9);
  EXPECT_FALSE(result->succeeded());
}

TEST(Process, FindsExecutablesOnPath) {
  const char* shell = on_windows() ? "cmd" : "sh";
  auto first = find_executable(shell);
  ASSERT_TRUE(first);
  auto all = find_all_executables(shell);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front(), *first);
  EXPECT_FALSE(find_executable("gpuhost-no-such-program-7f3a"));
  EXPECT_TRUE(find_all_executables("gpuhost-no-such-program-7f3a").empty());
}

TEST(Process, FindAllExecutablesListsEachFileOnce) {
  auto saved = get_env("PATH");
  std::string dir = test_dir().string();
  set_env("PATH", dir + path_list_separator() + dir);
  auto all = find_all_executables("platform_test_child");
  auto first = find_executable("platform_test_child");
  if (saved) set_env("PATH", *saved);
  ASSERT_EQ(all.size(), 1u);
  ASSERT_TRUE(first);
  EXPECT_TRUE(std::filesystem::equivalent(*first, child_path()));
}

TEST(Process, IdentifiesItself) {
  EXPECT_GT(current_process_id(), 0);
  auto self = current_executable_path();
  ASSERT_TRUE(self) << self.error().message;
  EXPECT_TRUE(std::filesystem::exists(*self)) << *self;
}

}  // namespace
}  // namespace gpuhost::platform
