#pragma once
// Shared by the plan builders (plan.cc, plan_driver.cc, plan_python.cc, plan_windows.cc).
// Internal to setup/.

#include <optional>
#include <string>
#include <string_view>

#include "doctor/finding.h"
#include "knowledge/compute_capability.h"
#include "setup/plan.h"

namespace gpuhost::setup {

struct PlanContext {
  const doctor::HostFacts& facts;
  const knowledge::Knowledge& k;
  const SetupRequest& request;
  Plan& plan;
  doctor::Findings findings;  // doctor's verdict on the same facts: steps answer its findings
  bool windows = false;
  bool gpu_present = false;     // an NVIDIA GPU, seen by NVML or on the PCI bus
  bool driver_working = false;  // NVML loaded and reported a driver version
  // The driver the frameworks will run on: the working one, or the branch the plan installs.
  std::optional<Version> driver;
  bool driver_planned = false;
  std::optional<knowledge::ComputeCapability> compute_capability;  // the lowest among the GPUs

  [[nodiscard]] bool gpu_host() const { return gpu_present || request.for_image; }
  [[nodiscard]] const doctor::Finding* finding(std::string_view id) const { return findings.find(id); }
};

// Quoting for the plan's shell: sh single quotes; PowerShell single quotes with '' inside.
[[nodiscard]] std::string sh_quote(std::string_view text);
[[nodiscard]] std::string ps_quote(std::string_view text);
[[nodiscard]] std::string quote(const PlanContext& c, std::string_view text);

// Adds a step and returns it for the caller to fill in.
Step& add_step(PlanContext& c, std::string id, std::string title);

void plan_driver(PlanContext& c);
// Replaces a working driver that is too old (--upgrade-driver), or says why it cannot.
void plan_driver_upgrade(PlanContext& c, const std::string& why);
void plan_toolkit(PlanContext& c);
void plan_windows_settings(PlanContext& c);
void plan_python(PlanContext& c);

}  // namespace gpuhost::setup
