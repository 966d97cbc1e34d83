#pragma once

// The sockets and threads of the gpuhost-to-gpuhost channel of a multi-node job (the messages
// and the leader's decisions are peer_protocol.h). Node 0 is the leader: it listens, every other
// node connects to it (retrying until it answers), says hello with its token and resumable steps,
// and from then on both sides send heartbeats. The leader relays each node's notice to the
// others and agrees the resume step and the global commits for everyone. What happens arrives
// as PeerEvents for the supervisor's loop to take; sends never block it for long (a send
// timeout), so a peer behind a dead link cannot stall the loop.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "supervise/notice.h"
#include "supervise/peer_protocol.h"

namespace gpuhost::supervise {

struct PeerChannelOptions {
  int node = 0;    // this node's rank; 0 is the leader
  int nnodes = 2;  // every node 0..nnodes-1 must say hello before the resume step is agreed
  std::string leader_host;  // where followers connect
  std::string bind_host;    // where the leader listens ("127.0.0.1", or "0.0.0.0" with a token)
  std::uint16_t port = 0;   // the leader's port; 0 lets a leader pick one (tests)
  std::string token;        // required of every hello when non-empty
  std::string job_key;      // SLURM_JOB_ID, JOBSET_NAME...: a hello with another one is refused
  std::vector<std::int64_t> steps;  // this node's resumable steps, newest first
  std::vector<std::int64_t> remote_steps;      // durable in this node's own remote copies
  std::vector<std::int64_t> job_remote_steps;  // leader: durable in the job's (shared-folder) copies
  // Follower: the nonce of the storage probe it wrote (storage_probe.h); empty: none written.
  std::string probe_nonce;
  // Leader: whether node `node`'s probe with `nonce` is in the leader's checkpoint location.
  // Absent: every node counts as sharing the leader's folder.
  std::function<bool(int node, const std::string& nonce)> sees_probe;
  PeerTiming timing;
};

struct PeerEvent {
  enum class Kind {
    joined,    // node `node` said hello (leader), or the leader welcomed us (follower)
    agreed,    // every node said hello: resume from `step` (nullopt: fresh), on `storage`
    notice,    // another node's notice, to act on as our own
    global,    // `step` is committed on every node
    committed, // leader: node `node` committed `step`
    lost,      // node `node` stopped answering, or ended: `detail` why, `outcome` when it said bye
    refused,   // the leader refused us (`detail`): a configuration error, the channel is over
  };
  Kind kind = Kind::joined;
  int node = -1;
  std::optional<std::int64_t> step;
  StorageLayout storage = StorageLayout::shared;
  PreemptionNotice notice;
  std::string detail;
  std::string outcome;  // lost: the outcome its bye named; empty when it vanished
};

class PeerChannel {
 public:
  // Listens (leader) or starts connecting (follower). Errors: the leader cannot listen (address
  // in use: the fix names --peer-port).
  [[nodiscard]] static Result<std::unique_ptr<PeerChannel>> start(PeerChannelOptions options);
  ~PeerChannel();
  PeerChannel(const PeerChannel&) = delete;
  PeerChannel& operator=(const PeerChannel&) = delete;

  [[nodiscard]] std::uint16_t port() const { return m_port; }
  [[nodiscard]] bool leader() const { return m_options.node == 0; }

  // A notice of this node, for every other node (origin is this node).
  void send_notice(const PreemptionNotice& notice);
  // This node committed a checkpoint of `step`.
  void send_committed(std::int64_t step);
  // The orderly end: every peer is told `outcome`, then the channel closes.
  void send_bye(const std::string& outcome);

  // What happened since the last call, in order.
  [[nodiscard]] std::vector<PeerEvent> take_events();
  // Waits up to `timeout` for an event to be there (without taking it).
  bool wait_for_event(std::chrono::milliseconds timeout);

 private:
  struct Connection;
  explicit PeerChannel(PeerChannelOptions options);
  void accept_loop();
  void serve_follower(std::shared_ptr<Connection> connection);
  void follower_loop();
  // One received message on `connection` (leader side); false ends the connection.
  bool leader_handle(Connection& connection, const PeerMessage& message);
  bool follower_handle(Connection& connection, const PeerMessage& message);
  void push(PeerEvent event);
  // Sends `line` to every follower except `except` (leader), or to the leader (follower).
  void broadcast(const std::string& line, int except = -1);
  void follower_lost(Connection& connection, const std::string& why);
  // Leader: node `node` committed `step`; a global commit is told to everyone.
  void node_committed(int node, std::int64_t step);

  struct Impl;
  PeerChannelOptions m_options;
  std::uint16_t m_port = 0;
  std::unique_ptr<Impl> m_impl;
};

// Reads a PreemptionNotice out of a notice message (what send_notice wrote); nullopt when it is
// malformed. Exposed for the unit tests.
[[nodiscard]] std::optional<PreemptionNotice> notice_from_peer_message(const json::Value& body);
[[nodiscard]] json::Value notice_to_peer_fields(const PreemptionNotice& notice, int origin);

}  // namespace gpuhost::supervise
