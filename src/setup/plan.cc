#include "setup/plan.h"

#include "base/strings.h"
#include "doctor/rules.h"
#include "doctor/rules_support.h"
#include "setup/embedded_assets.h"
#include "setup/plan_internal.h"

namespace gpuhost::setup {

const char* shell_name(Shell shell) {
  return shell == Shell::powershell ? "powershell" : "sh";
}

std::string sh_quote(std::string_view text) {
  bool plain = !text.empty();
  for (char ch : text)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) ||
          std::string_view("/._-+=:,@%").find(ch) != std::string_view::npos))
      plain = false;
  if (plain) return std::string(text);
  return "'" + replace_all(std::string(text), "'", "'\\''") + "'";
}

std::string ps_quote(std::string_view text) {
  return "'" + replace_all(std::string(text), "'", "''") + "'";
}

std::string quote(const PlanContext& c, std::string_view text) {
  return c.windows ? ps_quote(text) : sh_quote(text);
}

Step& add_step(PlanContext& c, std::string id, std::string title) {
  Step& step = c.plan.steps.emplace_back();
  step.id = std::move(id);
  step.title = std::move(title);
  return step;
}

Result<std::vector<FrameworkRequest>> parse_framework(std::string_view text) {
  std::string spec(trim(text));
  if (spec == "both")
    return std::vector<FrameworkRequest>{{Framework::torch, {}}, {Framework::tensorflow, {}}};
  std::string name = spec;
  std::optional<Version> version;
  if (auto eq = spec.find("=="); eq != std::string::npos) {
    name = spec.substr(0, eq);
    version = Version::parse(spec.substr(eq + 2));
    if (!version || version->parts().size() < 2)
      return make_error(ErrorCode::invalid_argument,
                        "--framework " + spec + ": the version after == must look like 2.8 or 2.8.0");
  }
  if (name == "tensorflow-gpu")
    return make_error(
        ErrorCode::invalid_argument,
        "--framework tensorflow-gpu: that package was removed from PyPI (since December 2022 it is an empty "
        "package that fails to install); the tensorflow package has carried GPU support since 2.1, so ask "
        "for --framework tensorflow");
  if (name == "torch" || name == "pytorch") return std::vector<FrameworkRequest>{{Framework::torch, version}};
  if (name == "tensorflow") return std::vector<FrameworkRequest>{{Framework::tensorflow, version}};
  return make_error(ErrorCode::invalid_argument,
                    "--framework " + spec + ": expected torch[==X.Y], tensorflow[==X.Y] or both");
}

namespace {

bool nvidia_on_pci(const doctor::HostFacts& f) {
  for (const auto& d : f.linux.pci_display_devices)
    if (d.vendor_id == 0x10de) return true;
  for (const auto& d : f.windows_devices.display_devices)
    if (d.vendor_id == 0x10de) return true;
  return false;
}

std::string host_line(const PlanContext& c) {
  const auto& f = c.facts;
  std::string line =
      f.system.os.name.empty() ? std::string(c.windows ? "Windows" : "Linux") : f.system.os.name;
  if (f.system.cloud.cloud != platform::CloudVendor::none)
    line += std::string(" on ") + platform::cloud_vendor_name(f.system.cloud.cloud);
  if (!f.gpu.devices.empty()) {
    line += "; " + std::to_string(f.gpu.devices.size()) + "x " + f.gpu.devices.front().name;
  } else if (nvidia_on_pci(f)) {
    line += "; NVIDIA GPU on the PCI bus";
  } else if (c.gpu_present) {
    line += "; NVIDIA driver installed";
  } else {
    line += "; no NVIDIA GPU";
  }
  line += c.driver_working ? "; driver " + f.gpu.driver_version : std::string("; no working NVIDIA driver");
  return line;
}

// Variables that put a system CUDA or cuDNN ahead of the libraries the wheels bundle.
void warn_about_shadowing(PlanContext& c) {
  for (const auto& [name, value] : c.facts.environment) {
    if (name != "LD_LIBRARY_PATH" && name != "PATH") continue;
    for (const auto& entry : split(value, c.windows ? ';' : ':')) {
      std::string lower = to_lower(std::string(entry));
      if (lower.find("cuda") == std::string::npos && lower.find("cudnn") == std::string::npos) continue;
      if (name == "PATH" && lower.find("bin") == std::string::npos) continue;
      if (name == "PATH" && !c.windows) continue;  // PATH only matters for DLLs on Windows
      c.plan.warnings.push_back(name + " has " + std::string(entry) +
                                ": a system CUDA/cuDNN there is loaded ahead of the libraries the torch and "
                                "TensorFlow wheels bundle "
                                "(undefined-symbol errors at import, pytorch#119989, #157381); remove it for "
                                "the training environment "
                                "unless you build CUDA extensions");
    }
  }
}

}  // namespace

Result<Plan> build_plan(const doctor::HostFacts& facts, const knowledge::Knowledge& knowledge,
                        const SetupRequest& request) {
  Plan plan;
  PlanContext c{facts, knowledge,    request, plan,        doctor::evaluate(facts, knowledge), false, false,
                false, std::nullopt, false,   std::nullopt};
  c.windows = facts.is_windows();
  plan.os = c.windows ? knowledge::Os::windows : knowledge::Os::linux;
  plan.shell = c.windows ? Shell::powershell : Shell::sh;
  c.driver_working = facts.gpu.available && !facts.gpu.driver_version.empty();
  // NVML that loads but does not initialise is an installed driver that is broken, stale or not
  // loaded: a GPU host all the same.
  const bool driver_installed =
      facts.gpu.error && facts.gpu.error->status != 12 && !facts.gpu.library_path.empty();
  c.gpu_present =
      (facts.gpu.available && !facts.gpu.devices.empty()) || nvidia_on_pci(facts) || driver_installed;
  if (c.driver_working) c.driver = doctor::driver_version(facts);
  c.compute_capability = doctor::host_compute_capability(facts, knowledge);
  if (!request.conda_name.empty() && !request.env_dir.empty())
    return make_error(ErrorCode::invalid_argument, "give --env DIR or --conda NAME, not both");
  plan.host = host_line(c);

  plan_driver(c);
  if (c.windows) plan_windows_settings(c);
  plan_toolkit(c);
  warn_about_shadowing(c);
  plan_python(c);

  // The frameworks' entries were added by plan_python; these complete the lock's expectations.
  plan.expected["os"] = c.windows ? "windows" : "linux";
  plan.expected["driver"] = c.driver_working ? json::Value(facts.gpu.driver_version) : json::Value();
  plan.expected["environment"] = plan.environment;
  plan.expected["python"] = plan.python;
  return plan;
}

json::Value plan_to_json(const Plan& plan) {
  json::Value out = json::Value::object();
  out["shell"] = shell_name(plan.shell);
  out["os"] = plan.os == knowledge::Os::windows ? "windows" : "linux";
  out["host"] = plan.host;
  out["python"] = plan.python;
  out["environment"] = plan.environment;
  auto strings = [](const std::vector<std::string>& list) {
    json::Value a = json::Value::array();
    for (const auto& s : list) a.push_back(s);
    return a;
  };
  out["decisions"] = strings(plan.decisions);
  out["warnings"] = strings(plan.warnings);
  out["blockers"] = strings(plan.blockers);
  out["first_boot"] = strings(plan.first_boot);
  json::Value steps = json::Value::array();
  for (const auto& s : plan.steps) {
    json::Value step = json::Value::object();
    step["id"] = s.id;
    step["title"] = s.title;
    step["reason"] = s.reason;
    step["finding"] = s.finding.empty() ? json::Value() : json::Value(s.finding);
    step["probe"] = s.probe.empty() ? json::Value() : json::Value(s.probe);
    step["actions"] = strings(s.actions);
    step["expect"] = s.expect;
    step["reboot"] = s.reboot;
    step["attended"] = s.attended;
    step["runtime"] = s.runtime;
    step["admin"] = s.admin;
    step["source"] = s.source.empty() ? json::Value() : json::Value(s.source);
    steps.push_back(std::move(step));
  }
  out["steps"] = std::move(steps);
  out["expected"] = plan.expected;
  return out;
}

std::string_view verify_script() {
  const EmbeddedFile* file = assets::find_embedded("verify.py");
  return file ? file->bytes : std::string_view();
}

}  // namespace gpuhost::setup
