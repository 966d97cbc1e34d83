// The peer channel over real loopback sockets: leader and followers in one process, each with
// its own threads, as two gpuhost processes would run them.
#include "supervise/peer_channel.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "platform/socket.h"

namespace gpuhost::supervise {
namespace {

using namespace std::chrono_literals;

PeerTiming fast_timing() {
  PeerTiming timing;
  timing.heartbeat = 100ms;
  timing.timeout = 1500ms;
  timing.connect_retry = 50ms;
  return timing;
}

PeerChannelOptions options_for(int node, int nnodes, std::uint16_t port, std::vector<std::int64_t> steps = {}) {
  PeerChannelOptions options;
  options.node = node;
  options.nnodes = nnodes;
  options.leader_host = "127.0.0.1";
  options.bind_host = "127.0.0.1";
  options.port = port;
  options.job_key = "job-7";
  options.steps = std::move(steps);
  options.timing = fast_timing();
  return options;
}

// Collects a channel's events until one of `kind` (from `node`, when >= 0) arrives.
struct Events {
  explicit Events(PeerChannel& c) : channel(c) {}
  PeerChannel& channel;
  std::vector<PeerEvent> seen;
  std::optional<PeerEvent> wait(PeerEvent::Kind kind, int node = -1, std::chrono::milliseconds timeout = 10s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    std::size_t looked = 0;
    for (;;) {
      for (; looked < seen.size(); ++looked)
        if (seen[looked].kind == kind && (node < 0 || seen[looked].node == node)) return seen[looked++];
      if (std::chrono::steady_clock::now() >= until) return std::nullopt;
      (void)channel.wait_for_event(50ms);
      for (auto& event : channel.take_events()) seen.push_back(std::move(event));
    }
  }
};

std::unique_ptr<PeerChannel> start(PeerChannelOptions options) {
  auto channel = PeerChannel::start(std::move(options));
  EXPECT_TRUE(channel) << channel.error().message;
  return channel ? std::move(*channel) : nullptr;
}

TEST(PeerChannel, AFollowerWhoseProbeTheLeaderCannotSeeMakesTheFoldersNodeLocal) {
  PeerChannelOptions leader_options = options_for(0, 2, 0, {300, 200});
  std::vector<std::pair<int, std::string>> asked;
  std::mutex asked_mutex;
  leader_options.sees_probe = [&](int node, const std::string& nonce) {
    std::lock_guard lock(asked_mutex);
    asked.emplace_back(node, nonce);
    return false;
  };
  auto leader = start(std::move(leader_options));
  ASSERT_TRUE(leader);
  // A fresh node 1: nothing on its disk, 300 durable in its own remote copies.
  PeerChannelOptions follower_options = options_for(1, 2, leader->port());
  follower_options.remote_steps = {300};
  follower_options.probe_nonce = "5f3a9c";
  auto follower = start(std::move(follower_options));
  ASSERT_TRUE(follower);
  Events on_leader{*leader};
  Events on_follower{*follower};
  for (Events* side : {&on_leader, &on_follower}) {
    auto agreed = side->wait(PeerEvent::Kind::agreed);
    ASSERT_TRUE(agreed);
    EXPECT_EQ(agreed->step, 300);
    EXPECT_EQ(agreed->storage, StorageLayout::node_local);
  }
  std::lock_guard lock(asked_mutex);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], (std::pair<int, std::string>{1, "5f3a9c"}));
}

TEST(PeerChannel, AFollowerWhoseProbeTheLeaderSeesSharesItsFolder) {
  PeerChannelOptions leader_options = options_for(0, 2, 0, {200});
  leader_options.job_remote_steps = {400, 200};
  leader_options.sees_probe = [](int, const std::string& nonce) { return nonce == "77"; };
  auto leader = start(std::move(leader_options));
  ASSERT_TRUE(leader);
  PeerChannelOptions follower_options = options_for(1, 2, leader->port(), {200});
  follower_options.probe_nonce = "77";
  auto follower = start(std::move(follower_options));
  ASSERT_TRUE(follower);
  Events on_follower{*follower};
  auto agreed = on_follower.wait(PeerEvent::Kind::agreed);
  ASSERT_TRUE(agreed);
  EXPECT_EQ(agreed->storage, StorageLayout::shared);
  EXPECT_EQ(agreed->step, 400);  // node 0 restores 400 into the folder both see
}

TEST(PeerChannel, NodesAgreeOnTheNewestCommonStepAndShareNotices) {
  auto leader = start(options_for(0, 2, 0, {300, 200, 100}));
  ASSERT_TRUE(leader);
  auto follower = start(options_for(1, 2, leader->port(), {200, 100}));
  ASSERT_TRUE(follower);
  Events on_leader{*leader};
  Events on_follower{*follower};

  auto joined = on_leader.wait(PeerEvent::Kind::joined, 1);
  ASSERT_TRUE(joined);
  auto agreed = on_leader.wait(PeerEvent::Kind::agreed);
  ASSERT_TRUE(agreed);
  EXPECT_EQ(agreed->step, 200);
  agreed = on_follower.wait(PeerEvent::Kind::agreed);
  ASSERT_TRUE(agreed);
  EXPECT_EQ(agreed->step, 200);

  // A notice on node 1 reaches node 0 with node 1's deadline.
  PreemptionNotice notice;
  notice.source = NoticeSource::aws;
  notice.deadline = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'900'000'000'123));
  notice.detail = "spot/instance-action terminate";
  notice.noticed = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'899'999'880'000));
  follower->send_notice(notice);
  auto got = on_leader.wait(PeerEvent::Kind::notice, 1);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->notice.source, NoticeSource::peer);
  EXPECT_EQ(got->notice.deadline, notice.deadline);
  EXPECT_EQ(got->notice.detail, "node 1: aws spot/instance-action terminate");
  // When node 1 saw it: a checkpoint its ranks wrote since then is node 0's save too.
  EXPECT_EQ(got->notice.noticed, notice.noticed);

  // And one on node 0 reaches node 1.
  leader->send_notice(notice);
  got = on_follower.wait(PeerEvent::Kind::notice, 0);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->notice.detail, "node 0: aws spot/instance-action terminate");

  // A step is global once both committed it; both hear of it.
  leader->send_committed(400);
  follower->send_committed(400);
  auto global = on_leader.wait(PeerEvent::Kind::global);
  ASSERT_TRUE(global);
  EXPECT_EQ(global->step, 400);
  global = on_follower.wait(PeerEvent::Kind::global);
  ASSERT_TRUE(global);
  EXPECT_EQ(global->step, 400);

  // An orderly end is a departure with its outcome, not a silent loss.
  follower->send_bye("finished");
  auto lost = on_leader.wait(PeerEvent::Kind::lost, 1);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->outcome, "finished");
}

TEST(PeerChannel, TheLeaderRelaysOneFollowersNoticeToTheOthers) {
  auto leader = start(options_for(0, 3, 0));
  ASSERT_TRUE(leader);
  auto one = start(options_for(1, 3, leader->port()));
  auto two = start(options_for(2, 3, leader->port()));
  ASSERT_TRUE(one && two);
  Events on_one{*one};
  Events on_two{*two};
  auto agreed = on_two.wait(PeerEvent::Kind::agreed);
  ASSERT_TRUE(agreed);
  EXPECT_EQ(agreed->step, std::nullopt);  // nobody has a checkpoint: a fresh start everywhere
  ASSERT_TRUE(on_one.wait(PeerEvent::Kind::agreed));

  PreemptionNotice notice;
  notice.source = NoticeSource::drill;
  notice.deadline = std::chrono::system_clock::now() + 30s;
  two->send_notice(notice);
  auto got = on_one.wait(PeerEvent::Kind::notice, 2);
  ASSERT_TRUE(got);
  EXPECT_NE(got->notice.detail.find("node 2: drill"), std::string::npos);
  // The origin does not get its own notice back.
  EXPECT_FALSE(on_two.wait(PeerEvent::Kind::notice, -1, 500ms));
}

TEST(PeerChannel, AFollowerThatVanishesIsLostAndTheOthersAreTold) {
  auto leader = start(options_for(0, 3, 0));
  ASSERT_TRUE(leader);
  auto one = start(options_for(1, 3, leader->port()));
  auto two = start(options_for(2, 3, leader->port()));
  Events on_leader{*leader};
  Events on_one{*one};
  ASSERT_TRUE(on_one.wait(PeerEvent::Kind::agreed));
  two.reset();  // its sockets close without a bye, as when its process is killed
  auto lost = on_leader.wait(PeerEvent::Kind::lost, 2);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->outcome, "");
  EXPECT_NE(lost->detail.find("without saying goodbye"), std::string::npos) << lost->detail;
  lost = on_one.wait(PeerEvent::Kind::lost, 2);
  ASSERT_TRUE(lost);
  EXPECT_NE(lost->detail.find("without saying goodbye"), std::string::npos) << lost->detail;
}

TEST(PeerChannel, AFollowerLosesALeaderThatVanishes) {
  auto leader = start(options_for(0, 2, 0));
  auto follower = start(options_for(1, 2, leader->port()));
  Events on_follower{*follower};
  ASSERT_TRUE(on_follower.wait(PeerEvent::Kind::agreed));
  leader.reset();
  auto lost = on_follower.wait(PeerEvent::Kind::lost, 0);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->outcome, "");
}

TEST(PeerChannel, ASilentPeerIsLostAfterTheHeartbeatTimeout) {
  auto leader = start(options_for(0, 2, 0));
  ASSERT_TRUE(leader);
  Events on_leader{*leader};
  // A follower that says hello and then nothing: a link that went down without a reset.
  auto stream = platform::TcpStream::connect("127.0.0.1", leader->port(), 5s);
  ASSERT_TRUE(stream) << stream.error().message;
  json::Value hello = json::Value::object();
  hello["node"] = 1;
  hello["nnodes"] = 2;
  hello["job"] = "job-7";
  const std::string line = encode_peer_message("hello", std::move(hello));
  ASSERT_TRUE(stream->send_all(line.data(), line.size()));
  ASSERT_TRUE(on_leader.wait(PeerEvent::Kind::joined, 1));
  const auto joined = std::chrono::steady_clock::now();
  auto lost = on_leader.wait(PeerEvent::Kind::lost, 1);
  ASSERT_TRUE(lost);
  EXPECT_NE(lost->detail.find("no heartbeat"), std::string::npos) << lost->detail;
  EXPECT_GE(std::chrono::steady_clock::now() - joined, fast_timing().timeout);
}

TEST(PeerChannel, AWrongTokenOrJobIsRefused) {
  PeerChannelOptions leader_options = options_for(0, 2, 0);
  leader_options.token = "right";
  auto leader = start(leader_options);
  ASSERT_TRUE(leader);
  PeerChannelOptions wrong = options_for(1, 2, leader->port());
  wrong.token = "wrong";
  auto follower = start(wrong);
  Events on_follower{*follower};
  auto refused = on_follower.wait(PeerEvent::Kind::refused);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->detail.find("token"), std::string::npos) << refused->detail;

  PeerChannelOptions other_job = options_for(1, 2, leader->port());
  other_job.token = "right";
  other_job.job_key = "job-8";
  auto stranger = start(other_job);
  Events on_stranger{*stranger};
  refused = on_stranger.wait(PeerEvent::Kind::refused);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->detail.find("job-8"), std::string::npos) << refused->detail;

  PeerChannelOptions twin = options_for(1, 3, leader->port());
  twin.token = "right";
  auto mismatched = start(twin);
  Events on_mismatched{*mismatched};
  refused = on_mismatched.wait(PeerEvent::Kind::refused);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->detail.find("3 nodes"), std::string::npos) << refused->detail;
}

TEST(PeerChannel, AFollowerStartedFirstWaitsForTheLeader) {
  // A free port: taken, then released for the leader that starts later.
  std::uint16_t port = 0;
  {
    auto probe = platform::TcpListener::listen("127.0.0.1", 0);
    ASSERT_TRUE(probe);
    port = probe->port();
  }
  auto follower = start(options_for(1, 2, port, {50}));
  ASSERT_TRUE(follower);
  std::this_thread::sleep_for(300ms);  // a few refused connects
  auto leader = start(options_for(0, 2, port, {50}));
  ASSERT_TRUE(leader);
  Events on_follower{*follower};
  auto agreed = on_follower.wait(PeerEvent::Kind::agreed);
  ASSERT_TRUE(agreed);
  EXPECT_EQ(agreed->step, 50);
}

TEST(PeerChannel, TheLeadersPortInUseSaysTheFix) {
  auto taken = platform::TcpListener::listen("127.0.0.1", 0);
  ASSERT_TRUE(taken);
  auto leader = PeerChannel::start(options_for(0, 2, taken->port()));
  ASSERT_FALSE(leader);
  EXPECT_NE(leader.error().message.find("--peer-port"), std::string::npos) << leader.error().message;
}

}  // namespace
}  // namespace gpuhost::supervise
