#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "supervise/job_recorder.h"
#include "supervise/notice.h"
#include "supervise/peer_channel.h"
#include "supervise/topology.h"

namespace gpuhost::supervise {

// How the nodes of one job find each other (doc/run-multinode.md). Everything has a default
// derived from the topology; `gpuhost run` fills these from --peer-port / GPUHOST_PEER_PORT and
// --peer-token-file / GPUHOST_PEER_TOKEN.
struct PeerSettings {
  bool enabled = true;                   // --no-peers: every node on its own, as before
  std::optional<std::uint16_t> port;     // default: peer_port_for(topology)
  std::string token;                     // required when the leader is not on loopback
  // How long the nodes wait for each other before the first trainer starts. torchrun's own
  // rendezvous waits 600 s by default (torch/distributed/elastic/rendezvous/
  // dynamic_rendezvous.py, join_timeout default 600 s); gpuhost waits as long.
  std::chrono::milliseconds join_timeout{std::chrono::seconds(600)};
  PeerTiming timing;
};

// The peer port: --peer-port, else the leader's port + 1 (torchrun's master or rendezvous port
// is taken by its store), else k_default_peer_port.
inline constexpr std::uint16_t k_default_peer_port = 29501;
[[nodiscard]] std::uint16_t peer_port_for(const Topology& topology, const PeerSettings& settings);

// Why a multi-node topology cannot have a channel as configured, or nullopt: a leader off
// loopback needs a token. For `gpuhost run` to refuse before anything exists (exit 2).
[[nodiscard]] std::optional<std::string> peer_settings_problem(const Topology& topology, const PeerSettings& settings);

// The channel of a multi-node job as the supervisor's loop drives it: journals who joined, the
// agreed resume step, global commits and lost peers; hands peers' notices to the loop and says
// when the gang is broken. Lives on the supervisor's thread.
class JobPeers {
 public:
  // What this node brings besides its committed steps: the steps durable in its remote copies
  // and where its checkpoints live (the storage probe goes there: storage_probe.h).
  struct Joining {
    std::vector<std::int64_t> remote_steps;      // <job>/node-<K>/ in the store
    std::vector<std::int64_t> job_remote_steps;  // node 0: <job>/ (a shared folder's copies)
    std::filesystem::path probe_dir;             // empty: no probe (counts as shared)
  };

  // Null when the job runs on one node, peers are off, or the node rank is unknown (journalled as
  // peers_unavailable with the reason). Errors: the leader cannot listen.
  [[nodiscard]] static Result<std::unique_ptr<JobPeers>> start(JobRecorder& recorder, const Topology& topology,
                                                               const PeerSettings& settings, const Joining& joining = {});

  // Waits until every node has joined and the leader has agreed the step all of them resume
  // from (nullopt: a fresh start everywhere). `interrupted` is asked every turn: a termination
  // request ends the wait (nullopt returned and `stopped` set). Errors: refused by the leader,
  // the leader lost, or nobody came within the join timeout.
  struct Agreement {
    bool stopped = false;
    std::optional<std::int64_t> step;
    StorageLayout storage = StorageLayout::shared;
  };
  [[nodiscard]] Result<Agreement> agree(const std::function<bool()>& interrupted);

  // A notice of this node (not a peer's): every other node acts on it too.
  void local_notice(const PreemptionNotice& notice);
  // This node committed a checkpoint.
  void committed(std::optional<std::int64_t> step);

  // Each loop turn: the peers' notices to act on, and once a peer is lost or ended while
  // training, why the gang is broken (the first time only; lost peers are journalled).
  struct Turn {
    std::vector<PreemptionNotice> notices;
    std::optional<std::string> broken;
  };
  [[nodiscard]] Turn pump();
  // After the trainer failed: waits up to `timeout` for the channel to say a peer is gone (a
  // trainer whose peer vanished usually fails on its collective before the heartbeat misses).
  [[nodiscard]] std::optional<std::string> wait_for_break(std::chrono::milliseconds timeout);

  // A node that ended while this one trains (it said bye, e.g. "finished"): this node's trainer
  // cannot be restarted, since the engine's rendezvous would wait for ranks that never come back.
  // Empty while every node is still running.
  [[nodiscard]] std::optional<std::string> ended_peer() const;

  // Node 0 at its end: waits up to `timeout` until every node that joined has ended or is lost,
  // so what it does last (a Slurm requeue ends the whole job) cannot cut a peer's own end short.
  void wait_for_peers_to_end(std::chrono::milliseconds timeout);

  // The orderly end: peers learn `outcome` (outcome_name()).
  void end(const std::string& outcome);

  [[nodiscard]] bool leader() const { return m_channel->leader(); }
  [[nodiscard]] int node() const { return m_node; }

 private:
  JobPeers(JobRecorder& recorder, std::unique_ptr<PeerChannel> channel, std::chrono::milliseconds join_timeout, int node,
           int nnodes, std::filesystem::path probe)
      : m_recorder(recorder),
        m_channel(std::move(channel)),
        m_join_timeout(join_timeout),
        m_node(node),
        m_nnodes(nnodes),
        m_probe_dir(std::move(probe)) {}
  // Who the join waits for ("waiting for node 1, 3 to join").
  [[nodiscard]] std::string waiting_for() const;
  // Journals one event; returns why the gang broke, for a lost peer that did not finish.
  std::optional<std::string> handle(const PeerEvent& event, std::vector<PreemptionNotice>& notices);

  JobRecorder& m_recorder;
  std::unique_ptr<PeerChannel> m_channel;
  std::chrono::milliseconds m_join_timeout;
  int m_node = 0;
  int m_nnodes = 2;
  std::filesystem::path m_probe_dir;  // a follower's probe, removed once the agreement is here
  std::optional<std::int64_t> m_agreed;
  StorageLayout m_storage = StorageLayout::shared;
  bool m_agreement_seen = false;
  std::optional<std::string> m_refused;
  std::optional<std::string> m_broken;
  bool m_broken_reported = false;
  std::vector<PreemptionNotice> m_early_notices;  // came while agree() waited
  std::set<int> m_joined;    // nodes that said hello (node 0) / node 0 (the others)
  std::set<int> m_departed;  // nodes that ended or were lost
  std::optional<std::string> m_ended;  // the first departure that was an orderly end
};

}  // namespace gpuhost::supervise
