// The subcommand table. Adding a command: one row here, one <name>_command.cc with its entry
// point, its --help text with examples, and a line in README.md.
#include <array>

#include "cli/ckpt_command.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/top_command.h"

namespace gpuhost::cli {

namespace {

const std::array k_commands = {
    Command{"bench", "measure disk, memory, network and GPUs against the spec sheet and acceptance bands",
            k_bench_help, run_bench},
    Command{"doctor", "check GPU, driver, CUDA, frameworks and OS settings; say what is wrong and the fix",
            k_doctor_help, run_doctor},
    Command{"setup",
            "make this host a verified training environment: driver, Python env, matching framework build",
            k_setup_help, run_setup},
    Command{"plan", "estimate GPU memory for a job; rank instance types by the cost of the whole job",
            k_plan_help, run_plan},
    Command{"run",
            "supervise a training command: validated checkpoints, preemption notices, automatic resume",
            k_run_help, run_run},
    Command{"jobs", "list the jobs gpuhost run has supervised here, with their state", k_jobs_help, run_jobs},
    Command{"status", "one job's state, checkpoints and events (notices, saves, restarts)", k_status_help,
            run_status},
    Command{"advise",
            "watch a running job and say what limits it (input, memory, clocks, precision), with the fix",
            k_advise_help, run_advise},
    Command{"mig", "split GPUs into MIG instances from mig-parted files: apply, assert, export, list",
            k_mig_help, run_mig},
    Command{"verify", "validate checkpoint files and directories as gpuhost run does", k_verify_help,
            run_verify},
    Command{"ckpt", "list, verify, pull, push and prune checkpoints in object storage (gpuhost run --remote)",
            k_ckpt_help, run_ckpt},
    Command{"serve",
            "serve Prometheus /metrics for this host's GPUs (dcgm-exporter names), on 127.0.0.1:9808",
            k_serve_help, run_serve},
    Command{"service",
            "run serve or a supervised job as a Windows service; stopping it saves the job (Linux: systemd "
            "units)",
            k_service_help, run_service},
    Command{"top", "live view of the GPUs, their processes and the training job (loss, step, checkpoint)",
            k_top_help, run_top},
    Command{"help", "show the commands, or one command's help: gpuhost help doctor", k_help_help, run_help},
    Command{"version", "print gpuhost's version and build", k_version_help, run_version},
};

}  // namespace

std::span<const Command> commands() { return k_commands; }

const Command* find_command(std::string_view name) {
  for (const auto& c : k_commands)
    if (c.name == name) return &c;
  return nullptr;
}

}  // namespace gpuhost::cli
