#pragma once
// `gpuhost setup`: a typed plan from doctor's facts and the knowledge tables. The plan is data;
// a script (POSIX sh or PowerShell) is one rendering of it, --apply another (setup/apply.h).

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "base/version.h"
#include "doctor/facts.h"
#include "knowledge/knowledge.h"

namespace gpuhost::setup {

enum class Shell { sh, powershell };
[[nodiscard]] const char* shell_name(Shell shell);  // "sh", "powershell"

enum class Framework { torch, tensorflow };

struct FrameworkRequest {
  Framework framework = Framework::torch;
  std::optional<Version> version;  // "2.8" or "2.8.0"; nullopt: the newest that fits the host
};

// `--framework torch==2.8`, `tensorflow`, `both`. invalid_argument with the reason (and, for the
// removed tensorflow-gpu package, what replaced it).
[[nodiscard]] Result<std::vector<FrameworkRequest>> parse_framework(std::string_view text);

struct SetupRequest {
  std::vector<FrameworkRequest> frameworks{FrameworkRequest{}};
  std::optional<Version> python;  // --python 3.X: the environment's Python
  std::string env_dir;            // --env DIR (absolute); default: ./venv
  std::string conda_name;         // --conda NAME instead of a venv
  bool toolkit = false;           // --toolkit: a CUDA toolkit for nvcc (extension builds)
  bool for_image = false;         // --for-image: no GPU here; skip runtime checks
  bool upgrade_driver = false;    // --upgrade-driver: may replace a working driver that is too old
  bool offline = false;           // --offline: no wheel index; frameworks from the system's packages
  bool allow_cpu = false;         // --allow-cpu: a CPU build on a GPU host is acceptable
  std::string driver_flavour;     // --driver-flavour open|proprietary; empty: from the GPU
  std::string torch_index;        // --torch-index: a mirror of https://download.pytorch.org/whl
};

// One step: probe -> act -> probe again. The probe says whether the step is already done; a step
// without a probe always runs (verification).
struct Step {
  std::string id;       // "driver.install", "python.env", "torch.install", "verify.torch"
  std::string title;    // "Install PyTorch 2.8.0 (CUDA 12.6) into /opt/venv"
  std::string reason;   // why, tied to what doctor found
  std::string finding;  // the doctor finding id this answers, when one does
  // Plan's shell. sh: a command that exits 0 when done. PowerShell: an expression that is $true.
  std::string probe;
  std::vector<std::string> actions;  // in order; each must succeed
  std::string expect;                // the state after the step
  bool reboot = false;               // the host must restart before the next step
  bool attended = false;             // needs a person (MOK enrolment at the console)
  bool runtime = false;              // needs the GPU and loaded driver: skipped for --for-image
  bool admin = false;                // needs root / Administrator
  std::string source;                // where the rule comes from
};

struct Plan {
  Shell shell = Shell::sh;
  knowledge::Os os = knowledge::Os::linux;
  std::string host;         // one line: OS, GPUs, driver
  std::string python;       // the environment's interpreter, as the script names it
  std::string environment;  // the venv directory or conda env name
  std::vector<Step> steps;
  std::vector<std::string> decisions;  // what was chosen and why, a sentence each
  std::vector<std::string> warnings;
  // Why the goal cannot be reached as asked, each with the flag or fix that would allow it.
  // A plan with blockers is printed but not applied.
  std::vector<std::string> blockers;
  std::vector<std::string> first_boot;           // --for-image: the checks to run on the first GPU boot
  json::Value expected = json::Value::object();  // the lock's expected state
};

[[nodiscard]] Result<Plan> build_plan(const doctor::HostFacts& facts, const knowledge::Knowledge& knowledge,
                                      const SetupRequest& request);

[[nodiscard]] json::Value plan_to_json(const Plan& plan);

// The verification program (setup/verify.py), run in the environment's Python.
[[nodiscard]] std::string_view verify_script();

}  // namespace gpuhost::setup
