#include <set>

#include "base/strings.h"
#include "doctor/rules.h"
#include "doctor/rules_support.h"
#include "knowledge/knowledge.h"
#include "knowledge/tensorflow_advice.h"
#include "knowledge/torch_advice.h"

namespace gpuhost::doctor {

void judge_preflight(const HostFacts& facts, const knowledge::Knowledge& knowledge, Findings& out) {
  auto os = knowledge_os(facts);
  auto driver = driver_version(facts);
  auto cc = host_compute_capability(facts, knowledge);

  // One recommendation per distinct Python version (wheels are per Python); the host's default
  // when no interpreter was probed.
  std::vector<std::optional<Version>> pythons;
  std::set<std::string> seen;
  for (const auto& p : facts.pythons) {
    auto v = Version::parse(p.version);
    if (!v || !seen.insert(std::to_string(v->major()) + "." + std::to_string(v->minor())).second) continue;
    pythons.push_back(v);
  }
  if (pythons.empty()) pythons.push_back(std::nullopt);

  std::string gpu_text = !driver ? std::string("no NVIDIA driver")
                                 : "driver " + driver->str() + (cc ? ", compute capability " + cc->str() : std::string());
  for (const auto& python : pythons) {
    std::string py = python ? " for Python " + std::to_string(python->major()) + "." + std::to_string(python->minor()) : "";
    knowledge::TorchHost host;
    host.os = os;
    host.driver = driver;
    host.driver_cuda_version = driver_cuda_version(facts);
    host.compute_capability = cc;
    host.python = python;
    auto rec = knowledge::recommend_torch(knowledge, host);
    if (!rec) {
      auto& f = out.add(Layer::preflight, Severity::info, "preflight.torch.none", "No PyTorch release supports this Python" + py);
      f.fix = "use a Python version PyTorch supports (3.10 to 3.13 for current releases)";
      continue;
    }
    std::string what = rec->build ? "torch " + rec->release->pin_version().str() + " with CUDA " + rec->build->cuda.str()
                                  : "torch " + rec->release->pin_version().str() + " (CPU)";
    auto& f = out.add(Layer::preflight, Severity::info, "preflight.torch", "PyTorch" + py + ": " + what);
    f.evidence.push_back("for " + std::string(knowledge::os_name(os)) + ", " + gpu_text);
    if (!rec->explanation.empty()) f.evidence.push_back(rec->explanation);
    if (rec->check)
      for (const auto& c : rec->check->caveats)
        if (rec->explanation.find(c) == std::string::npos) f.evidence.push_back(c);
    if (!driver) f.evidence.push_back("install the NVIDIA driver first to use a CUDA build; gpuhost doctor then picks it");
    f.fix = rec->install_command;
  }

  knowledge::TensorflowHost tf_host{os, driver, pythons.front(), windows_build(facts)};
  auto advice = knowledge::recommend_tensorflow(knowledge, tf_host);
  if (advice.options.empty()) {
    auto& f = out.add(Layer::preflight, Severity::info, "preflight.tensorflow.none", "No TensorFlow GPU build fits this host");
    f.evidence = advice.problems;
    return;
  }
  const auto& best = advice.options.front();
  auto& f = out.add(Layer::preflight, Severity::info, "preflight.tensorflow",
                    "TensorFlow: " + best.release->version.str() + " (" + knowledge::tensorflow_install_path_name(best.path) + ")");
  if (!best.explanation.empty()) f.evidence.push_back(best.explanation);
  for (const auto& c : best.caveats)
    if (best.explanation.find(c) == std::string::npos) f.evidence.push_back(c);
  for (std::size_t i = 1; i < advice.options.size(); ++i) {
    const auto& alt = advice.options[i];
    f.evidence.push_back(std::string("or ") + knowledge::tensorflow_install_path_name(alt.path) + ": " + join(alt.commands, " && "));
  }
  f.fix = join(best.commands, " && ");
}

}  // namespace gpuhost::doctor
