#pragma once
// Runs a plan on this host: every step probes, acts and probes again, in order. Progress is kept
// in a state file, so after a restart (or a failed step, once fixed) the same command continues
// where it stopped; a finished run writes the lock, which `setup --check` compares the host with.

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "setup/plan.h"

namespace gpuhost::setup {

// $GPUHOST_HOME/setup, else the per-user state directory's gpuhost/setup (beside jobs/).
[[nodiscard]] std::filesystem::path setup_state_dir();

struct ApplyOptions {
  std::filesystem::path state_dir;  // state.json, lock.json, steps/, logs/
  std::string boot_id;              // this boot (platform::boot_id, or GPUHOST_BOOT_ID)
  bool unattended = false;          // --yes: a step that needs a person stops the run
  // The PowerShell that runs a Windows plan's steps (GPUHOST_POWERSHELL: pwsh.exe for
  // PowerShell 7); Linux plans run with sh.
  std::string powershell = "powershell.exe";
  // One line per step as it starts and ends. May be empty.
  std::function<void(std::string_view)> progress;
};

enum class ApplyOutcome {
  done,           // every step done and verified; lock written
  failed,         // a step failed; fix the cause and run the same command again
  reboot_needed,  // restart, then run the same command again
  blocked,        // the plan has blockers, or a step needs a person
};
[[nodiscard]] const char* apply_outcome_name(ApplyOutcome outcome);

struct StepResult {
  std::string id;
  std::string status;  // "done before", "satisfied", "ran", "failed", "not run"
  std::string detail;  // the failing command's exit and output tail; the verification verdict
  double seconds = 0;
};

struct ApplyResult {
  ApplyOutcome outcome = ApplyOutcome::done;
  std::string message;  // one line: what happened and what to do next
  std::vector<StepResult> steps;
  std::optional<json::Value> verification;  // the GPUHOST_VERIFY report
  std::filesystem::path lock_path;          // written when done
};

[[nodiscard]] Result<ApplyResult> apply_plan(const Plan& plan, const ApplyOptions& options);

[[nodiscard]] json::Value apply_result_to_json(const ApplyResult& result);

}  // namespace gpuhost::setup
