#include "supervise/job_peers.h"

#include <algorithm>

#include "platform/socket.h"
#include "supervise/storage_probe.h"

namespace gpuhost::supervise {

namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

json::Value optional_step(std::optional<std::int64_t> step) { return step ? json::Value(*step) : json::Value(); }

}  // namespace

std::uint16_t peer_port_for(const Topology& topology, const PeerSettings& settings) {
  if (settings.port) return *settings.port;
  if (topology.leader_port && *topology.leader_port > 0 && *topology.leader_port < 65535)
    return static_cast<std::uint16_t>(*topology.leader_port + 1);
  return k_default_peer_port;
}

std::optional<std::string> peer_settings_problem(const Topology& topology, const PeerSettings& settings) {
  if (!settings.enabled || !topology.multi_node() || !topology.node_rank) return std::nullopt;
  if (topology.leader_host.empty())
    return "this node cannot tell where node 0 runs (no --master-addr, rendezvous endpoint or Slurm node list): "
           "pass --master-addr to torchrun, or --no-peers to run the nodes without a channel";
  if (!platform::is_loopback_address(topology.leader_host) && settings.token.empty())
    return "the nodes of a multi-node job talk over the network (leader " + topology.leader_host +
           ") and need a shared token: export GPUHOST_PEER_TOKEN=<random> (or --peer-token-file F) on every node, "
           "or --no-peers to run the nodes without a channel";
  return std::nullopt;
}

Result<std::unique_ptr<JobPeers>> JobPeers::start(JobRecorder& recorder, const Topology& topology,
                                                  const PeerSettings& settings, const Joining& joining) {
  if (!topology.multi_node()) return std::unique_ptr<JobPeers>();
  auto unavailable = [&](const std::string& reason) {
    json::Value fields = json::Value::object();
    fields["reason"] = reason;
    recorder.record("peers_unavailable", std::move(fields));
    return std::unique_ptr<JobPeers>();
  };
  if (!settings.enabled) return unavailable("--no-peers: each node is on its own");
  if (!topology.node_rank)
    return unavailable("this node's rank is unknown (torchrun c10d rendezvous without --node-rank): notices stay on this node");
  if (auto problem = peer_settings_problem(topology, settings)) return unavailable(*problem);

  PeerChannelOptions options;
  options.node = *topology.node_rank;
  options.nnodes = topology.nnodes_max;
  options.leader_host = topology.leader_host;
  options.bind_host = platform::is_loopback_address(topology.leader_host) ? "127.0.0.1" : "0.0.0.0";
  options.port = peer_port_for(topology, settings);
  options.token = settings.token;
  options.job_key = topology.job_key;
  options.timing = settings.timing;
  // The steps this node can resume from, newest first: what the leader agrees on.
  for (const job::CommittedCheckpoint* c : job::resume_candidates(recorder.state()))
    if (c->step) options.steps.push_back(*c->step);
  const std::vector<std::int64_t> steps = options.steps;
  options.remote_steps = joining.remote_steps;
  std::filesystem::path probe_dir;
  if (options.node == 0) {
    options.job_remote_steps = joining.job_remote_steps;
    if (!joining.probe_dir.empty())
      options.sees_probe = [dir = joining.probe_dir](int node, const std::string& nonce) {
        return sees_storage_probe(dir, node, nonce);
      };
  } else if (!joining.probe_dir.empty()) {
    if (auto nonce = write_storage_probe(joining.probe_dir, options.node)) {
      options.probe_nonce = *nonce;
      probe_dir = joining.probe_dir;
    } else {
      recorder.message("no storage probe (node 0 takes this node's checkpoint folder for its own): " + nonce.error().message);
    }
  }
  auto channel = PeerChannel::start(std::move(options));
  if (!channel) return std::unexpected(channel.error());

  json::Value fields = json::Value::object();
  fields["role"] = (*channel)->leader() ? "leader" : "follower";
  fields["node"] = *topology.node_rank;
  fields["nnodes"] = topology.nnodes_max;
  fields["leader"] = topology.leader_host + ":" + std::to_string((*channel)->port());
  json::Value step_list = json::Value::array();
  for (std::int64_t step : steps) step_list.push_back(step);
  fields["steps"] = std::move(step_list);
  json::Value remote_list = json::Value::array();
  for (std::int64_t step : joining.remote_steps) remote_list.push_back(step);
  fields["remote_steps"] = std::move(remote_list);
  recorder.record("peers_started", std::move(fields));
  return std::unique_ptr<JobPeers>(
      new JobPeers(recorder, std::move(*channel), settings.join_timeout, *topology.node_rank, topology.nnodes_max,
                   std::move(probe_dir)));
}

std::optional<std::string> JobPeers::handle(const PeerEvent& event, std::vector<PreemptionNotice>& notices) {
  json::Value fields = json::Value::object();
  switch (event.kind) {
    case PeerEvent::Kind::joined:
      m_joined.insert(event.node);
      fields["node"] = event.node;
      m_recorder.record("peer_joined", std::move(fields));
      return std::nullopt;
    case PeerEvent::Kind::agreed:
      m_agreed = event.step;
      m_storage = event.storage;
      m_agreement_seen = true;
      // Node 0 has looked for the probe before it agreed.
      if (!m_probe_dir.empty()) remove_storage_probe(m_probe_dir, m_node);
      fields["step"] = optional_step(event.step);
      fields["storage"] = storage_layout_name(event.storage);
      m_recorder.record("resume_agreed", std::move(fields));
      return std::nullopt;
    case PeerEvent::Kind::notice:
      notices.push_back(event.notice);
      return std::nullopt;
    case PeerEvent::Kind::committed:
      fields["node"] = event.node;
      fields["step"] = optional_step(event.step);
      m_recorder.record("peer_committed", std::move(fields));
      return std::nullopt;
    case PeerEvent::Kind::global:
      fields["step"] = optional_step(event.step);
      m_recorder.record("global_commit", std::move(fields));
      return std::nullopt;
    case PeerEvent::Kind::refused:
      m_refused = event.detail;
      fields["reason"] = event.detail;
      m_recorder.record("peer_refused", std::move(fields));
      return "the leader refused this node: " + event.detail;
    case PeerEvent::Kind::lost: {
      m_departed.insert(event.node);
      fields["node"] = event.node;
      fields["reason"] = event.detail;
      fields["outcome"] = event.outcome;
      m_recorder.record("peer_lost", std::move(fields));
      // A peer whose trainer finished is not a loss: this one finishes too (DDP ranks end
      // together). Any other end (a crash, a preemption, silence) leaves this node's ranks
      // waiting in a collective that can never complete.
      if (event.outcome == "finished") {
        if (!m_ended) m_ended = "node " + std::to_string(event.node) + " ended (" + event.outcome + ")";
        return std::nullopt;
      }
      return "node " + std::to_string(event.node) + " is gone: " + event.detail;
    }
  }
  return std::nullopt;
}

Result<JobPeers::Agreement> JobPeers::agree(const std::function<bool()>& interrupted) {
  const auto began = SteadyClock::now();
  const auto until = began + m_join_timeout;
  auto next_report = began + std::chrono::seconds(5);
  std::vector<PreemptionNotice> early;
  for (;;) {
    for (const PeerEvent& event : m_channel->take_events()) {
      auto broken = handle(event, early);
      if (m_refused) return make_error(ErrorCode::invalid_argument, *broken);
      if (broken && event.kind == PeerEvent::Kind::lost && event.node == 0)
        return make_error(ErrorCode::unavailable, "waiting for the other nodes: " + *broken);
    }
    if (m_agreement_seen) break;
    if (interrupted()) return Agreement{true, std::nullopt};
    // Which node is late, now and then: the one to look at when a job does not start.
    if (const auto now = SteadyClock::now(); now >= next_report) {
      next_report = now + std::chrono::seconds(15);
      if (now > began + std::chrono::seconds(5)) m_recorder.message(waiting_for());
    }
    if (SteadyClock::now() >= until)
      return make_error(ErrorCode::timeout, "the other nodes did not join within " +
                                                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(m_join_timeout).count()) +
                                                " s (" + waiting_for() + "; is gpuhost run started on every node, with the same peer port?)");
    (void)m_channel->wait_for_event(milliseconds(100));
  }
  // A notice that came while waiting is acted on by the first pump (it is kept for it).
  m_early_notices = std::move(early);
  return Agreement{false, m_agreed, m_storage};
}

std::string JobPeers::waiting_for() const {
  if (!leader()) return m_joined.empty() ? "waiting for node 0 to answer" : "waiting for node 0 to hear from every node";
  std::string missing;
  for (int node = 1; node < m_nnodes; ++node)
    if (!m_joined.contains(node)) missing += (missing.empty() ? "" : ", ") + std::to_string(node);
  return missing.empty() ? "every node joined" : "waiting for node " + missing + " to join";
}

void JobPeers::local_notice(const PreemptionNotice& notice) {
  if (notice.source == NoticeSource::peer) return;
  m_channel->send_notice(notice);
}

void JobPeers::committed(std::optional<std::int64_t> step) {
  if (step) m_channel->send_committed(*step);
}

JobPeers::Turn JobPeers::pump() {
  Turn turn;
  turn.notices = std::move(m_early_notices);
  m_early_notices.clear();
  for (const PeerEvent& event : m_channel->take_events()) {
    auto broken = handle(event, turn.notices);
    if (broken && !m_broken) m_broken = broken;
  }
  if (m_broken && !m_broken_reported) {
    m_broken_reported = true;
    turn.broken = m_broken;
  }
  return turn;
}

std::optional<std::string> JobPeers::wait_for_break(std::chrono::milliseconds timeout) {
  const auto until = SteadyClock::now() + timeout;
  std::vector<PreemptionNotice> ignored;
  for (;;) {
    for (const PeerEvent& event : m_channel->take_events()) {
      auto broken = handle(event, ignored);
      if (broken && !m_broken) m_broken = broken;
    }
    if (m_broken) return m_broken;
    const auto now = SteadyClock::now();
    if (now >= until) return std::nullopt;
    (void)m_channel->wait_for_event(std::chrono::duration_cast<milliseconds>(until - now));
  }
}

void JobPeers::wait_for_peers_to_end(std::chrono::milliseconds timeout) {
  if (!leader()) return;
  const auto until = SteadyClock::now() + timeout;
  std::vector<PreemptionNotice> ignored;
  for (;;) {
    for (const PeerEvent& event : m_channel->take_events()) (void)handle(event, ignored);
    if (std::includes(m_departed.begin(), m_departed.end(), m_joined.begin(), m_joined.end())) return;
    const auto now = SteadyClock::now();
    if (now >= until) return;
    (void)m_channel->wait_for_event(std::min(milliseconds(200), std::chrono::duration_cast<milliseconds>(until - now)));
  }
}

std::optional<std::string> JobPeers::ended_peer() const {
  return m_ended;
}

void JobPeers::end(const std::string& outcome) { m_channel->send_bye(outcome); }

}  // namespace gpuhost::supervise
