#pragma once

// gpuhost's process exit codes, documented for users and schedulers in doc/exit-codes.md.
// Keep the two in step.
namespace gpuhost::cli {

enum ExitCode : int {
  k_exit_ok = 0,             // the command did what was asked; doctor: no failures
  k_exit_findings = 1,       // doctor: at least one check failed
  k_exit_usage = 2,          // bad command line: unknown command or flag, missing value
  k_exit_error = 3,          // the command could not run: unreadable input, corrupt data file
  k_exit_job_failed = 4,     // run: restarts exhausted, or the trainer cannot be started
  k_exit_not_durable = 5,    // run: the trainer finished, but committed checkpoints are not on the remote
  k_exit_reboot = 6,         // setup: a step needs a restart; run the same command again after it
  k_exit_blocked = 7,        // setup: the plan needs a flag, or a person at the console
  k_exit_preempted = 75,     // run: preempted, checkpoint kept, resumable (EX_TEMPFAIL)
  k_exit_interrupted = 130,  // Ctrl-C / SIGINT (128 + 2, the shell convention)
};

}  // namespace gpuhost::cli
