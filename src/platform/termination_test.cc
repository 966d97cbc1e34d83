#include "platform/termination.h"

#include <csignal>
#include <string>

#include <gtest/gtest.h>

#include "platform/system_info.h"

namespace gpuhost::platform {
namespace {

using namespace std::chrono_literals;

void drain() {
  while (wait_termination_request(0ms)) {
  }
}

TEST(Termination, InjectedRequestsComeOutInOrder) {
  drain();
  inject_termination_request(TerminationRequest::terminate);
  inject_termination_request(TerminationRequest::console_close);
  EXPECT_EQ(wait_termination_request(0ms), TerminationRequest::terminate);
  EXPECT_EQ(wait_termination_request(0ms), TerminationRequest::console_close);
  EXPECT_EQ(wait_termination_request(0ms), std::nullopt);
}

TEST(Termination, WaitReturnsNothingWhenNoneCame) {
  drain();
  EXPECT_EQ(wait_termination_request(20ms), std::nullopt);
}

TEST(Termination, NamesEveryRequest) {
  EXPECT_EQ(std::string(termination_request_name(TerminationRequest::terminate)), "SIGTERM");
  EXPECT_EQ(std::string(termination_request_name(TerminationRequest::interrupt)),
            current_os() == OsFamily::windows ? "CTRL_C/CTRL_BREAK" : "SIGINT");
  EXPECT_EQ(std::string(termination_request_name(TerminationRequest::console_close)), "console close");
}

// std::raise delivers the signal to this thread before it returns, so the request is queued by
// the time we look.
TEST(Termination, RaisedSignalsAreQueuedNotFatal) {
  if (current_os() == OsFamily::windows) GTEST_SKIP() << "console events cannot be raised in-process";
  install_termination_handlers();
  install_termination_handlers();  // idempotent
  drain();
  ASSERT_EQ(std::raise(SIGTERM), 0);
  ASSERT_EQ(std::raise(SIGINT), 0);
  EXPECT_EQ(wait_termination_request(0ms), TerminationRequest::terminate);
  EXPECT_EQ(wait_termination_request(0ms), TerminationRequest::interrupt);
  EXPECT_EQ(wait_termination_request(0ms), std::nullopt);
}

TEST(Termination, NotifyShutdownCompleteIsHarmlessWithoutAClose) {
  notify_shutdown_complete();
  drain();
  EXPECT_EQ(wait_termination_request(0ms), std::nullopt);
}

}  // namespace
}  // namespace gpuhost::platform
