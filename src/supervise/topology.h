#pragma once

// Where one supervised job runs: how many nodes, which one this is, who the leader is and which
// engine restarts what — read from what the engines already give (research/06 §1, §4, §5, §6.1,
// §9), never from new flags: the torchrun command line (and its PET_* variables), Slurm's
// SLURM_* variables, a Kubernetes Indexed Job's JOB_COMPLETION_INDEX, SkyPilot's SKYPILOT_*.
// One gpuhost runs per node, as the engine's task.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpuhost::supervise {

// How a variable is looked up: the supervisor's environment, or a table in tests.
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;

struct Topology {
  // Who placed this node: "" (gpuhost alone), "torchrun", "slurm", "kubernetes", "skypilot".
  std::string engine;
  int nnodes = 1;                 // nodes in the job (the minimum for an elastic "1:4")
  int nnodes_max = 1;             // the maximum for an elastic range, else == nnodes
  std::optional<int> node_rank;   // this node's index; unknown for c10d rendezvous without --node-rank
  std::string leader_host;        // MASTER_ADDR, the rendezvous endpoint's host, or the first Slurm node
  std::optional<int> leader_port;
  std::string rdzv_backend;       // "static", "c10d", "etcd"... ("" when not torchrun)
  std::optional<int> nproc_per_node;
  bool torchrun = false;          // the command runs torchrun (or torch.distributed.run/launch)
  int torchrun_max_restarts = 0;  // torchrun --max-restarts: it restarts its workers itself
  std::string job_key;            // SLURM_JOB_ID (array: JOBID_TASK), SKYPILOT_TASK_ID, JOBSET_NAME...
  std::vector<std::string> slurm_nodes;  // SLURM_JOB_NODELIST expanded, in order
  int engine_restarts = 0;        // SLURM_RESTART_COUNT: how often the engine restarted the whole job
  std::vector<std::string> evidence;  // "torchrun --nnodes=2", "SLURM_NODEID=1": what was read

  [[nodiscard]] bool multi_node() const { return nnodes_max > 1; }
  // Who restarts failed workers, when not gpuhost: "torchrun --max-restarts=3", "slurm
  // (--requeue)"... "" when gpuhost is the only restart owner.
  [[nodiscard]] std::string restart_owner() const;
  // "node 1 of 2 (torchrun, c10d at 10.0.0.1:29400)" or "single node".
  [[nodiscard]] std::string describe() const;
};

// Reads the topology from the trainer's command and the environment. Errors (invalid_argument)
// only for values that contradict each other or cannot be numbers, such as --node-rank=2 with
// --nnodes=2, naming the source of each.
[[nodiscard]] Result<Topology> detect_topology(const std::vector<std::string>& command, const EnvLookup& env);

// Slurm's compressed host list ("gpu[01-03,07],login1", scontrol show hostnames) expanded in
// order, zero padding kept. invalid_argument for unbalanced brackets or a bad range.
[[nodiscard]] Result<std::vector<std::string>> expand_slurm_hostlist(std::string_view list);

// Whether this build can run `topology` at all: multi-node torch.distributed does not run on
// native Windows (gloo only, no NCCL, elastic rendezvous broken without libuv: research/06 §8),
// so there a multi-node topology is refused with the reason and the way out (Linux or WSL2).
[[nodiscard]] Result<void> check_topology_supported(const Topology& topology);

}  // namespace gpuhost::supervise
