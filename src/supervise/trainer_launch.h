#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "base/error.h"
#include "platform/child_process.h"
#include "supervise/checkpoint_ledger.h"
#include "supervise/job.h"

namespace gpuhost::supervise {

// The variable that carries an attempt's run token: every process of the attempt inherits it,
// so what escapes the process group is still found (platform::kill_processes_with_environment).
inline constexpr const char* k_run_token_variable = "GPUHOST_RUN_TOKEN";

struct TrainerLaunchInputs {
  std::string run_token;
  int attempt = 1;  // 1-based, over the job's whole history (engine restarts folded in)
  // Multi-node: this node's index (when known) and the node count, for GPUHOST_NODE_RANK and
  // GPUHOST_NNODES (0: one node, neither is set).
  std::optional<int> node_rank;
  int nnodes = 0;
  ResumePoint resume;
  // Where the trainer may write metrics as JSON lines (empty: none); not set when the user's
  // environment or the job already names one.
  std::filesystem::path metrics_channel;
  // The supervisor's own environment already has these (then they are inherited as they are).
  bool inherited_pythonunbuffered = false;
  bool inherited_metrics_file = false;
};

// One attempt's command line (with the resume checkpoint substituted), working directory and
// environment: the job's variables, then GPUHOST_JOB, GPUHOST_JOB_DIR, the run token,
// GPUHOST_ATTEMPT, GPUHOST_NNODES and GPUHOST_NODE_RANK (multi-node), GPUHOST_RESUME_FROM (with a
// checkpoint), GPUHOST_SAVE_REQUEST (with a request
// file), PYTHONUNBUFFERED=1 (Python buffers a piped stdout for minutes otherwise) and
// GPUHOST_METRICS_FILE. The output handler is the caller's. Pure.
[[nodiscard]] Result<platform::ChildOptions> trainer_launch(const JobSpec& spec, const job::JobPaths& paths,
                                                            const TrainerLaunchInputs& inputs);

}  // namespace gpuhost::supervise
