#pragma once

// The gpuhost-to-gpuhost channel of a job that spans nodes, as pure parts: the messages, how a
// byte stream is cut into them, and the two decisions the leader makes for everyone (which step
// all nodes resume from, which step is committed on all of them). No sockets, no threads, no
// clock of its own: peer_channel.h carries the messages; this is unit-tested alone
// (peer_protocol_test.cc). doc/run-multinode.md describes the behaviour for users.
//
// Wire format: one JSON object per line ("\n"), at most k_max_peer_line bytes, every object with
// "t" (its type) and "v" (k_peer_protocol_version). Followers connect to the leader (node 0);
// the leader relays what one follower says to the others. Types:
//   hello     follower -> leader: job, node, nnodes, token, steps (its resumable steps, newest first),
//             remote_steps (steps durable in its own remote copies), probe (the nonce of the
//             storage probe it wrote into its checkpoint location; absent: shares the leader's)
//   welcome   leader -> follower: the hello is accepted
//   refused   leader -> follower: reason; the leader closes the connection
//   resume    leader -> all: step (or null: start fresh) and storage ("shared" or "node_local"),
//             once every node has said hello
//   notice    any -> leader -> all others: origin, source, deadline_ms (Unix ms), detail
//   committed follower -> leader: node, step (a checkpoint this node committed)
//   global    leader -> all: step, committed on every node
//   lost      leader -> followers: node, reason (a node stopped answering or left mid-training)
//   bye       any: outcome ("finished", "preempted", ...): an orderly end, not a loss
//   hb        any: a heartbeat, carrying nothing

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"

namespace gpuhost::supervise {

inline constexpr int k_peer_protocol_version = 1;
inline constexpr std::size_t k_max_peer_line = 64 * 1024;

// Heartbeats: each side sends one every interval and gives a peer up after `timeout` without a
// byte from it. c10d's keep-alive is 5 s x 3 misses (research/06 §9.10); 1 s x 10 s notices a
// lost node within the 30 s with room for a loaded machine to be late.
struct PeerTiming {
  std::chrono::milliseconds heartbeat{std::chrono::seconds(1)};
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds connect_retry{std::chrono::milliseconds(300)};
};

// One message: its type and the whole object (type and version included).
struct PeerMessage {
  std::string type;
  json::Value body = json::Value::object();
};

// The line for `type` with `fields` (an object; "t" and "v" are added).
[[nodiscard]] std::string encode_peer_message(std::string_view type, json::Value fields = json::Value::object());

// Cuts a byte stream into messages. feed() takes what a receive returned; next() gives the
// complete messages in order. A line that is not a JSON object with a string "t", carries another
// version, or grows past k_max_peer_line is a protocol error: the connection cannot be trusted
// after it and is closed by the caller.
class PeerLineReader {
 public:
  void feed(std::string_view bytes);
  // The next message, nullopt when no whole line is buffered, or the error.
  [[nodiscard]] Result<std::optional<PeerMessage>> next();

 private:
  std::string m_buffer;
  std::size_t m_start = 0;
};

// Where the nodes keep their checkpoints: one folder every node sees (NFS, Lustre, a shared PVC),
// or a folder of each node's own (local NVMe). Decided by node 0 from the followers' probe files
// (storage_probe.h): shared only when node 0 sees every follower's.
enum class StorageLayout { shared, node_local };
[[nodiscard]] const char* storage_layout_name(StorageLayout layout);  // "shared", "node_local"

// What a node says of itself when it joins.
struct NodeReport {
  std::vector<std::int64_t> steps;         // committed in its checkpoint location, resumable
  std::vector<std::int64_t> remote_steps;  // durable in its own remote copies (<job>/node-<K>/)
  // Durable in the job's remote copies of a shared folder (<job>/): node 0 alone mirrors those.
  std::vector<std::int64_t> job_remote_steps;
  bool shares_storage = true;  // node 0 sees its probe file (always true of node 0 itself)
};

// The leader's bookkeeping for the whole job: who said hello with which steps, the resume step
// once everyone has, and which steps each node committed. Pure; the leader's channel owns one.
class PeerLedger {
 public:
  explicit PeerLedger(int nnodes) : m_nnodes(nnodes) {}

  // Node `node` (0 = the leader itself) joined with `report`. Returns the agreed resume point
  // once every node has said hello, the first time only (later hellos of a node that
  // reconnects get agreed() instead). The step is the newest one every node can start from:
  // in a shared folder, one every node validated there or one node 0 lacks and restores into
  // it; in node-local folders, a step each node has in its own folder or its own remote copies.
  struct Agreement {
    std::optional<std::int64_t> step;  // nullopt: no step is on every node, start fresh
    StorageLayout storage = StorageLayout::shared;
  };
  std::optional<Agreement> hello(int node, NodeReport report);
  [[nodiscard]] const std::optional<Agreement>& agreed() const { return m_agreed; }
  [[nodiscard]] bool joined(int node) const { return m_steps.contains(node); }
  [[nodiscard]] int joined_count() const { return static_cast<int>(m_steps.size()); }

  // Node `node` committed `step`. Returns the step when that makes it the newest step committed
  // on every node (a global commit), once per step.
  std::optional<std::int64_t> committed(int node, std::int64_t step);
  [[nodiscard]] std::optional<std::int64_t> newest_global() const { return m_global; }
  // The nodes that have not committed `step` (for "which node is late").
  [[nodiscard]] std::vector<int> missing(std::int64_t step) const;

 private:
  int m_nnodes;
  std::map<int, NodeReport> m_steps;
  std::optional<Agreement> m_agreed;
  std::map<std::int64_t, std::set<int>> m_committed;
  std::optional<std::int64_t> m_global;
};

// The newest step present in every list: the step every node can resume from (NVRx
// find_latest's rule, research/06 §9.4). nullopt when there is none.
[[nodiscard]] std::optional<std::int64_t> newest_common_step(const std::vector<std::vector<std::int64_t>>& steps);

// Compares a token in constant time for equal lengths.
[[nodiscard]] bool peer_token_matches(std::string_view expected, std::string_view given);

}  // namespace gpuhost::supervise
