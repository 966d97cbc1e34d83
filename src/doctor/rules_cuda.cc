#include "base/strings.h"
#include "doctor/rules.h"
#include "doctor/rules_support.h"
#include "knowledge/knowledge.h"

namespace gpuhost::doctor {

namespace {

std::string unset_fix(const HostFacts& facts, const std::string& name) {
  if (facts.is_windows())
    return "Remove-Item Env:" + name + "  (and remove it from System Properties > Environment Variables to make it stick)";
  return "unset " + name + "  (and remove it from ~/.bashrc, /etc/environment or the job script)";
}

void judge_environment(const HostFacts& facts, Findings& out) {
  for (const auto& [name, value] : facts.cuda.risky_environment) {
    if (name == "CUDA_VISIBLE_DEVICES") {
      std::string v(trim(value));
      bool hides_all = v.empty() || v == "-1" || v == "NoDevFiles" || v == "none";
      auto& f = out.add(Layer::cuda, hides_all ? Severity::warn : Severity::info,
                        hides_all ? "cuda.env.visible_devices.none" : "cuda.env.visible_devices",
                        hides_all ? "CUDA_VISIBLE_DEVICES hides every GPU" : "CUDA_VISIBLE_DEVICES restricts the GPUs");
      f.evidence.push_back("CUDA_VISIBLE_DEVICES=\"" + value + "\"");
      if (hides_all) f.fix = unset_fix(facts, name);
      continue;
    }
    if (name == "CUDA_LAUNCH_BLOCKING") {
      if (trim(value) == "0") continue;
      auto& f = out.add(Layer::cuda, Severity::warn, "cuda.env.launch_blocking", "CUDA_LAUNCH_BLOCKING serialises every kernel launch");
      f.evidence.push_back(name + "=" + value + " (a debugging aid; training runs much slower)");
      f.fix = unset_fix(facts, name);
      continue;
    }
    auto& f = out.add(Layer::cuda, Severity::warn, "cuda.env." + to_lower(name), name + " is set and changes how CUDA runs");
    f.evidence.push_back(name + "=" + value);
    f.evidence.push_back("DCGM's deployment check flags this variable (debugger, injection, profiling or core-dump hooks)");
    f.fix = unset_fix(facts, name);
    f.reference = "repo NVIDIA/DCGM nvvs/src/Software.cpp (Environment Variables subtest)";
  }
}

}  // namespace

void judge_cuda(const HostFacts& facts, const knowledge::Knowledge& knowledge, Findings& out) {
  const auto& cuda = facts.cuda;
  auto driver = driver_version(facts);
  auto driver_cuda = driver_cuda_version(facts);
  auto os = knowledge_os(facts);
  if (cuda.toolkits.empty()) {
    auto& f = out.add(Layer::cuda, Severity::info, "cuda.toolkit.none", "No CUDA toolkit installed");
    f.evidence.push_back("PyTorch and TensorFlow wheels bundle their own CUDA runtime; a toolkit (nvcc) is only "
                         "needed to compile CUDA extensions");
  }
  for (const auto& t : cuda.toolkits) {
    auto version = Version::parse(t.version);
    if (!version) {
      auto& f = out.add(Layer::cuda, Severity::warn, "cuda.toolkit.unknown_version", "CUDA toolkit of unknown version");
      f.subject = t.path;
      f.evidence.push_back("found by " + t.found_by + "; no version.json, version.txt or working nvcc");
      f.fix = "reinstall the toolkit, or remove the stale directory";
      continue;
    }
    if (!driver) {
      auto& f = out.add(Layer::cuda, Severity::info, "cuda.toolkit", "CUDA toolkit " + t.version);
      f.subject = t.path;
      f.evidence.push_back("found by " + t.found_by + "; not checked against a driver (none loaded)");
      continue;
    }
    knowledge::DriverQuery q;
    q.cuda = *version;
    q.driver = *driver;
    q.os = os;
    q.driver_cuda_version = driver_cuda;
    auto verdict = knowledge.cuda_drivers.verdict(q);
    Severity sev = Severity::ok;
    std::string id = "cuda.toolkit";
    std::string title = "CUDA toolkit " + t.version + " runs on driver " + driver->str();
    if (verdict.kind == knowledge::DriverVerdictKind::supported_via_minor_version_compat) {
      sev = Severity::warn;
      id = "cuda.toolkit.minor_version_compat";
      title = "CUDA toolkit " + t.version + " runs on driver " + driver->str() + " only through minor-version compatibility";
    } else if (verdict.kind == knowledge::DriverVerdictKind::unsupported) {
      sev = Severity::fail;
      id = "cuda.toolkit.driver_too_old";
      title = "Driver " + driver->str() + " is too old for CUDA toolkit " + t.version;
    } else if (verdict.kind == knowledge::DriverVerdictKind::unknown) {
      sev = Severity::info;
      id = "cuda.toolkit.unknown";
      title = "CUDA toolkit " + t.version + " is newer than gpuhost's driver table";
    }
    auto& f = out.add(Layer::cuda, sev, id, title);
    f.subject = t.path;
    f.evidence.push_back("found by " + t.found_by);
    if (!verdict.explanation.empty()) f.evidence.push_back(verdict.explanation);
    if (sev == Severity::fail || sev == Severity::warn) {
      std::string upgrade = verdict.required_driver ? "install driver " + verdict.required_driver->str() + " or newer"
                                                    : std::string("update the driver");
      const auto* newest = knowledge.cuda_drivers.newest_fully_supported(*driver, os);
      f.fix = upgrade + (newest ? ", or use CUDA toolkit " + newest->release + " or older, which this driver fully supports" : "");
    }
    for (const auto& d : facts.gpu.devices) {
      auto cc = compute_capability(d, knowledge);
      if (!cc) continue;
      auto support = knowledge.arch_support.cuda_supports(*version, *cc);
      if (support.status == knowledge::CudaCcStatus::dropped || support.status == knowledge::CudaCcStatus::not_yet_supported) {
        auto& g = out.add(Layer::cuda, Severity::fail, "cuda.toolkit.arch_unsupported",
                          "CUDA " + t.version + " cannot build for GPU " + std::to_string(d.index) + " (compute capability " + cc->str() + ")");
        g.subject = t.path;
        g.evidence.push_back(support.explanation);
        g.fix = support.status == knowledge::CudaCcStatus::dropped ? "use a CUDA 12.x toolkit for this GPU"
                                                                   : "use a newer CUDA toolkit that supports this GPU";
        break;
      }
    }
  }
  if (cuda.toolkits.size() > 1 && !cuda.nvcc_on_path.empty()) {
    auto& f = out.add(Layer::cuda, Severity::info, "cuda.toolkit.several", std::to_string(cuda.toolkits.size()) + " CUDA toolkits installed");
    for (const auto& t : cuda.toolkits) f.evidence.push_back(t.version + " at " + t.path + " (" + t.found_by + ")");
    f.evidence.push_back("nvcc on PATH: " + cuda.nvcc_on_path);
  }

  for (const auto& c : cuda.cudnn) {
    auto version = Version::parse(c.version);
    if (!version) continue;
    std::vector<std::string> fits, misfits;
    for (const auto& t : cuda.toolkits) {
      auto tv = Version::parse(t.version);
      if (!tv) continue;
      bool ok = false;
      for (const auto* row : knowledge.cudnn.for_cuda(*tv))
        if (row->cudnn.major() == version->major() && row->cudnn.minor() <= version->minor()) ok = true;
      (ok ? fits : misfits).push_back(t.version);
    }
    Severity sev = misfits.empty() || !fits.empty() ? Severity::ok : Severity::warn;
    auto& f = out.add(Layer::cuda, sev, sev == Severity::ok ? "cuda.cudnn" : "cuda.cudnn.mismatch",
                      sev == Severity::ok ? "cuDNN " + c.version : "cuDNN " + c.version + " is not built for the installed CUDA toolkit");
    f.subject = c.path;
    if (!fits.empty()) f.evidence.push_back("built for CUDA " + join(fits, ", "));
    if (!misfits.empty()) f.evidence.push_back("no cuDNN " + std::to_string(version->major()) + ".x row for CUDA " + join(misfits, ", "));
    if (sev == Severity::warn) f.fix = "install the cuDNN build for your CUDA major (cuDNN ships per CUDA family: 'for CUDA 12.x')";
  }
  judge_environment(facts, out);
}

}  // namespace gpuhost::doctor
