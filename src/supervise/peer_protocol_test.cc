#include "supervise/peer_protocol.h"

#include <gtest/gtest.h>

#include "supervise/job_peers.h"

namespace gpuhost::supervise {
namespace {

TEST(PeerLineReader, CutsAStreamIntoMessagesWhereverTheBytesBreak) {
  const std::string stream = encode_peer_message("hb") + encode_peer_message("global", [] {
                               json::Value f = json::Value::object();
                               f["step"] = 150;
                               return f;
                             }());
  PeerLineReader reader;
  std::vector<PeerMessage> messages;
  for (char c : stream) {  // one byte at a time: the worst a socket can do
    reader.feed(std::string_view(&c, 1));
    for (;;) {
      auto next = reader.next();
      ASSERT_TRUE(next) << next.error().message;
      if (!*next) break;
      messages.push_back(std::move(**next));
    }
  }
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].type, "hb");
  EXPECT_EQ(messages[1].type, "global");
  EXPECT_EQ(messages[1].body.get_int("step"), 150);
  EXPECT_EQ(messages[1].body.get_int("v"), k_peer_protocol_version);
}

TEST(PeerLineReader, RefusesWhatIsNotAMessageOfThisVersion) {
  for (const std::string line : {"not json\n", "[1,2]\n", "{\"v\":1}\n", "{\"t\":\"hb\",\"v\":2}\n", "{\"t\":7,\"v\":1}\n"}) {
    PeerLineReader reader;
    reader.feed(line);
    auto next = reader.next();
    ASSERT_FALSE(next) << line;
    EXPECT_EQ(next.error().code, ErrorCode::parse_error);
  }
  PeerLineReader version;
  version.feed("{\"t\":\"hb\",\"v\":2}\n");
  EXPECT_NE(version.next().error().message.find("same gpuhost version"), std::string::npos);
}

TEST(PeerLineReader, AnEndlessLineIsAnErrorNotABuffer) {
  PeerLineReader reader;
  reader.feed(std::string(k_max_peer_line + 1, 'x'));
  auto next = reader.next();
  ASSERT_FALSE(next);
  EXPECT_NE(next.error().message.find("longer than"), std::string::npos);
}

TEST(PeerProtocol, TheCommonStepIsTheNewestEveryNodeHas) {
  EXPECT_EQ(newest_common_step({{300, 200, 100}, {200, 100}}), 200);
  EXPECT_EQ(newest_common_step({{300, 200}, {300, 100}, {200, 300}}), 300);
  // Node 1 committed 300 only and node 0 never did: nothing in common, a fresh start.
  EXPECT_EQ(newest_common_step({{200, 100}, {300}}), std::nullopt);
  EXPECT_EQ(newest_common_step({{100}, {}}), std::nullopt);
  EXPECT_EQ(newest_common_step({}), std::nullopt);
}

NodeReport local(std::vector<std::int64_t> steps, std::vector<std::int64_t> remote = {}) {
  NodeReport report;
  report.steps = std::move(steps);
  report.remote_steps = std::move(remote);
  report.shares_storage = false;
  return report;
}

NodeReport shared(std::vector<std::int64_t> steps, std::vector<std::int64_t> job_remote = {}) {
  NodeReport report;
  report.steps = std::move(steps);
  report.job_remote_steps = std::move(job_remote);
  return report;
}

TEST(PeerLedger, AgreesOnceEveryNodeSaidHello) {
  PeerLedger ledger(3);
  EXPECT_FALSE(ledger.hello(0, local({300, 200})));
  EXPECT_FALSE(ledger.hello(2, local({200})));
  EXPECT_FALSE(ledger.hello(7, local({300})));  // not a node of this job: ignored
  auto agreed = ledger.hello(1, local({300, 200, 100}));
  ASSERT_TRUE(agreed);
  EXPECT_EQ(agreed->step, 200);
  EXPECT_EQ(agreed->storage, StorageLayout::node_local);
  // A node that reconnects does not change what was agreed.
  EXPECT_FALSE(ledger.hello(2, local({300})));
  ASSERT_TRUE(ledger.agreed());
  EXPECT_EQ(ledger.agreed()->step, 200);
}

TEST(PeerLedger, NodeLocalFoldersResumeFromAStepEachNodeHasLocallyOrInItsRemoteCopies) {
  // Fresh node 1 (an empty folder on a replacement host): its copies of 300 and 200 are durable
  // remotely; node 0 still has 300 on its disk.
  PeerLedger ledger(2);
  EXPECT_FALSE(ledger.hello(0, local({300, 200})));
  auto agreed = ledger.hello(1, local({}, {300, 200}));
  ASSERT_TRUE(agreed);
  EXPECT_EQ(agreed->step, 300);
  // Node 1's upload of 300 never finished: 200 is the newest both can start from.
  PeerLedger cut(2);
  EXPECT_FALSE(cut.hello(0, local({}, {300, 200})));
  EXPECT_EQ(cut.hello(1, local({}, {200}))->step, 200);
}

TEST(PeerLedger, ASharedFolderResumesFromWhatNodeZeroHasOrRestores) {
  // Node 1 scanned the same folder as node 0; what node 0 can restore into it counts for both.
  PeerLedger ledger(2);
  EXPECT_FALSE(ledger.hello(0, shared({200}, {400, 200})));
  auto agreed = ledger.hello(1, shared({200}));
  ASSERT_TRUE(agreed);
  EXPECT_EQ(agreed->storage, StorageLayout::shared);
  EXPECT_EQ(agreed->step, 400);
  // A step node 0 has there that node 1 did not validate is no one's.
  PeerLedger torn(2);
  EXPECT_FALSE(torn.hello(0, shared({300, 200}, {300})));
  EXPECT_EQ(torn.hello(1, shared({200}))->step, 200);
  // One follower whose probe node 0 cannot see makes the layout node-local.
  PeerLedger mixed(3);
  EXPECT_FALSE(mixed.hello(0, shared({200})));
  EXPECT_FALSE(mixed.hello(1, shared({200})));
  EXPECT_EQ(mixed.hello(2, local({}))->storage, StorageLayout::node_local);
  EXPECT_EQ(mixed.agreed()->step, std::nullopt);
}

TEST(PeerLedger, AStepIsGlobalWhenEveryNodeCommittedIt) {
  PeerLedger ledger(2);
  EXPECT_FALSE(ledger.committed(0, 100));
  EXPECT_EQ(ledger.missing(100), std::vector<int>{1});
  EXPECT_FALSE(ledger.committed(0, 200));
  EXPECT_EQ(ledger.committed(1, 100), 100);
  EXPECT_EQ(ledger.newest_global(), 100);
  EXPECT_FALSE(ledger.committed(1, 100));  // once per step
  EXPECT_EQ(ledger.committed(1, 200), 200);
  // An older step completing late never moves the global commit back.
  EXPECT_FALSE(ledger.committed(1, 50));
  EXPECT_FALSE(ledger.committed(0, 50));
  EXPECT_EQ(ledger.newest_global(), 200);
  EXPECT_TRUE(ledger.missing(200).empty());
}

TEST(PeerProtocol, TokensCompareWhole) {
  EXPECT_TRUE(peer_token_matches("s3cret", "s3cret"));
  EXPECT_FALSE(peer_token_matches("s3cret", "s3cre"));
  EXPECT_FALSE(peer_token_matches("s3cret", ""));
}

TEST(PeerSettings, ThePortFollowsTheLeadersPort) {
  Topology t;
  t.nnodes = t.nnodes_max = 2;
  t.node_rank = 1;
  t.leader_host = "127.0.0.1";
  PeerSettings settings;
  EXPECT_EQ(peer_port_for(t, settings), k_default_peer_port);
  t.leader_port = 29500;
  EXPECT_EQ(peer_port_for(t, settings), 29501);
  settings.port = 40000;
  EXPECT_EQ(peer_port_for(t, settings), 40000);
}

TEST(PeerSettings, ANetworkLeaderNeedsAToken) {
  Topology t;
  t.nnodes = t.nnodes_max = 2;
  t.node_rank = 0;
  t.leader_host = "127.0.0.1";
  PeerSettings settings;
  EXPECT_EQ(peer_settings_problem(t, settings), std::nullopt);
  t.leader_host = "10.0.0.5";
  auto problem = peer_settings_problem(t, settings);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("GPUHOST_PEER_TOKEN"), std::string::npos);
  settings.token = "t";
  EXPECT_EQ(peer_settings_problem(t, settings), std::nullopt);
  settings.token.clear();
  settings.enabled = false;  // --no-peers: nothing to check
  EXPECT_EQ(peer_settings_problem(t, settings), std::nullopt);
  settings.enabled = true;
  t.leader_host.clear();
  problem = peer_settings_problem(t, settings);
  ASSERT_TRUE(problem);
  EXPECT_NE(problem->find("--master-addr"), std::string::npos);
}

}  // namespace
}  // namespace gpuhost::supervise
