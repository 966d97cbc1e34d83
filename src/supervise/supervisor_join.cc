// How a run gets to its first resume point: the peer channel of a multi-node job (every node
// joins, node 0 agrees the step and the storage layout), the remote mirror of this node's
// checkpoints, and the restore of what this host lacks.

#include "supervise/supervisor_loop.h"

#include <thread>

#include "base/strings.h"
#include "platform/termination.h"
#include "supervise/storage_probe.h"

namespace gpuhost::supervise::detail {

using std::chrono::milliseconds;

std::optional<SupervisorResult> Supervisor::start_mirror(const std::string& scope) {
  if (m_spec.remote.empty()) return std::nullopt;
  auto mirror = JobMirror::start(m_recorder, m_spec, m_paths, scope);
  if (!mirror) {
    json::Value fields = json::Value::object();
    // Store errors quote the URL: what is journalled holds no secret a bad URL may carry.
    const std::string url = redact_store_url(m_spec.remote);
    fields["reason"] = "the remote store " + url +
                       " cannot be used: " + replace_all(mirror.error().message, m_spec.remote, url);
    record("gave_up", fields);
    return finish(Outcome::failed, fields.get_string("reason"));
  }
  m_mirror = std::move(*mirror);
  return std::nullopt;
}

bool Supervisor::has_committed_step(std::int64_t step) const {
  for (const job::CommittedCheckpoint* c : job::resume_candidates(state()))
    if (c->step == step) return true;
  return false;
}

JobPeers::Joining Supervisor::joining() {
  JobPeers::Joining joining;
  const Topology& t = m_options.topology;
  if (!t.multi_node() || !t.node_rank || !m_options.peers.enabled) return joining;
  joining.probe_dir = storage_probe_dir(m_spec.checkpoint_location);
  if (m_spec.remote.empty()) return joining;
  // What this node could restore, said in its hello: a replacement host with an empty folder
  // resumes from its remote copies like the others from their disks.
  auto listed = [&](const std::string& scope) {
    auto steps = durable_remote_steps(m_spec, scope);
    if (steps) return *steps;
    message("listing the remote checkpoints under " + scope + ": " +
            replace_all(steps.error().message, m_spec.remote, redact_store_url(m_spec.remote)));
    return std::vector<std::int64_t>();
  };
  joining.remote_steps = listed(node_mirror_scope(m_spec.name, *t.node_rank));
  if (*t.node_rank == 0) joining.job_remote_steps = listed(m_spec.name);
  return joining;
}

Result<std::optional<SupervisorResult>> Supervisor::join_peers(ResumePoint& resume) {
  auto peers = JobPeers::start(m_recorder, m_options.topology, m_options.peers, joining());
  if (!peers) {
    json::Value fields = json::Value::object();
    fields["reason"] = peers.error().message;
    record("gave_up", std::move(fields));
    return std::optional<SupervisorResult>(finish(Outcome::failed, peers.error().message));
  }
  m_peers = std::move(*peers);
  if (!m_peers) {
    // One node: the job's copies, and the newest of them restored when it beats what is here.
    if (auto ended = start_mirror(m_spec.name)) return ended;
    if (m_mirror) {
      m_mirror->restore();
      scan_checkpoints(true);
      m_mirror->resume_pending();
    }
    resume = m_ledger.choose_resume_point();
    return std::optional<SupervisorResult>();
  }
  std::optional<StopReason> stop;
  auto interrupted = [&] {
    if (auto request = platform::wait_termination_request(milliseconds(0)))
      stop = *request == platform::TerminationRequest::interrupt ? StopReason::user_stop : StopReason::preemption;
    return stop.has_value();
  };
  auto stopped_while_waiting = [&] {
    return *stop == StopReason::user_stop ? finish(Outcome::stopped, "stopped on request while waiting for the other nodes")
                                          : finish(Outcome::preempted, "preempted while waiting for the other nodes");
  };
  auto agreed = m_peers->agree(interrupted);
  if (!agreed) {
    json::Value fields = json::Value::object();
    fields["reason"] = agreed.error().message;
    record("gave_up", std::move(fields));
    return std::optional<SupervisorResult>(finish(Outcome::failed, agreed.error().message));
  }
  if (agreed->stopped) return std::optional<SupervisorResult>(stopped_while_waiting());
  const std::optional<std::int64_t> step = agreed->step;
  const int node = m_peers->node();
  const bool node_local = agreed->storage == StorageLayout::node_local;

  // Node-local folders: each node mirrors its own ranks' files under <job>/node-<K>/. One shared
  // folder: node 0 alone mirrors it (every node committed the same files), under <job>/.
  if (!m_spec.remote.empty()) {
    if (node_local || node == 0) {
      if (auto ended = start_mirror(node_local ? node_mirror_scope(m_spec.name, node) : m_spec.name))
        return std::optional<SupervisorResult>(std::move(ended));
    } else {
      json::Value fields = json::Value::object();
      fields["reason"] = "the checkpoint folder is node 0's too: node 0 mirrors it to " + redact_store_url(m_spec.remote);
      record("mirror_by_leader", std::move(fields));
    }
  }
  if (m_mirror) {
    if (step && !has_committed_step(*step)) {
      m_mirror->restore(step);
      scan_checkpoints(true);
    }
    m_mirror->resume_pending();
  }
  // A shared folder that lacks the step: node 0 is restoring it there. Its arrival is waited for
  // as long as the nodes waited for each other; node 0's end or loss ends the wait.
  if (step && !node_local && node != 0 && !has_committed_step(*step)) {
    message("waiting for node 0 to restore step " + std::to_string(*step) + " into the shared checkpoint folder");
    const auto until = SteadyClock::now() + m_options.peers.join_timeout;
    for (;;) {
      scan_checkpoints(true);
      if (has_committed_step(*step)) break;
      if (interrupted()) return std::optional<SupervisorResult>(stopped_while_waiting());
      if (auto broken = m_peers->wait_for_break(milliseconds(500))) {
        m_peer_break = broken;
        return std::optional<SupervisorResult>(
            finish(Outcome::peer_lost, "waiting for node 0 to restore step " + std::to_string(*step) + ": " + *broken));
      }
      if (SteadyClock::now() >= until) break;  // said as the error below
    }
  }
  resume =
      m_ledger.choose_resume_point([&](const job::CommittedCheckpoint& c) { return step && c.step == step; });
  if (step && !resume.id) {
    const std::string reason =
        "every node can resume from step " + std::to_string(*step) +
        (node_local ? ", but this node has no valid checkpoint of it, on its disk or restored from its remote copies"
                    : ", but it is not in the shared checkpoint folder as this node sees it") +
        " (see gpuhost status): the nodes cannot resume from the same step";
    json::Value fields = json::Value::object();
    fields["reason"] = reason;
    record("gave_up", std::move(fields));
    return std::optional<SupervisorResult>(finish(Outcome::failed, reason));
  }
  return std::optional<SupervisorResult>();
}

}  // namespace gpuhost::supervise::detail
