#include "base/strings.h"
#include "doctor/rules.h"
#include "doctor/rules_support.h"
#include "knowledge/knowledge.h"
#include "knowledge/tensorflow_advice.h"
#include "knowledge/torch_advice.h"

namespace gpuhost::doctor {

namespace {

knowledge::TorchHost torch_host(const HostFacts& facts, const knowledge::Knowledge& k, const PythonFacts& p) {
  knowledge::TorchHost host;
  host.os = knowledge_os(facts);
  host.driver = driver_version(facts);
  host.driver_cuda_version = driver_cuda_version(facts);
  host.compute_capability = host_compute_capability(facts, k);
  host.python = Version::parse(p.version);
  return host;
}

// The fix that runs `pip <pip_args>` for `p`. An externally managed interpreter (PEP 668: Debian
// 12's python3) refuses pip installs, so it is told to let `gpuhost setup` make a venv instead.
std::string pip_install(const PythonFacts& p, std::string_view pip_args, std::string_view framework) {
  if (!p.externally_managed) return pip_for(p.interpreter) + " " + std::string(pip_args);
  return "gpuhost setup --framework " + std::string(framework) + " --env ./venv --apply   (" + p.interpreter +
         " is externally managed (PEP 668) and refuses pip installs; setup makes a venv and runs pip " +
         std::string(pip_args) + " there)";
}

// `pip install ...` from the knowledge tables, made to run for `p`.
std::string pip_command_for(const PythonFacts& p, const std::string& command, std::string_view framework) {
  if (command.rfind("pip ", 0) != 0) return command;
  return pip_install(p, std::string_view(command).substr(4), framework);
}

// The install command a CUDA build of torch should come from, for this interpreter.
std::string torch_install_fix(const HostFacts& facts, const knowledge::Knowledge& k, const PythonFacts& p) {
  auto host = torch_host(facts, k, p);
  if (host.driver) {
    if (auto rec = knowledge::recommend_torch(k, host); rec && !rec->install_command.empty()) {
      std::string cmd =
          pip_command_for(p, rec->install_command, "torch==" + rec->release->pin_version().str());
      return cmd + (rec->cpu_fallback ? "   (no CUDA wheel fits this host: " + rec->explanation + ")" : "");
    }
  }
  // No driver here to judge against: name the newest stable CUDA wheel for this OS and Python and
  // say that doctor on the GPU host picks the exact one.
  for (const auto& release : k.pytorch.releases) {
    if (release.provenance.confidence == knowledge::Confidence::unconfirmed) continue;
    if (host.python && !release.supports_python(*host.python)) continue;
    for (const auto& build : release.builds) {
      if (build.channel != knowledge::TorchChannel::stable || !build.available_on(host.os)) continue;
      std::string cmd = k.pytorch.install_command(release, &build);
      if (cmd.empty()) continue;
      cmd = pip_command_for(p, cmd, "torch==" + release.pin_version().str());
      return cmd + "   (on the GPU host; run gpuhost doctor there to match the build to its driver)";
    }
  }
  return pip_install(p, "install torch --index-url https://download.pytorch.org/whl/cu126", "torch");
}

void judge_torch(const HostFacts& facts, const knowledge::Knowledge& k, const PythonFacts& p, bool gpu_host, Findings& out) {
  const auto& t = p.torch;
  if (!t.installed) return;
  if (!t.error.empty()) {
    auto& f = out.add(Layer::frameworks, Severity::fail, "frameworks.torch.import_failed", "PyTorch is installed but does not import");
    f.subject = p.interpreter;
    f.evidence.push_back(t.error);
    f.fix = pip_install(p, "install --force-reinstall torch", "torch") +
            "  (or, for a CUDA build: " + torch_install_fix(facts, k, p) + ")";
    return;
  }
  auto os = knowledge_os(facts);
  std::string name = "PyTorch " + t.version;
  bool cpu_only = t.cuda_build.empty() && t.hip_build.empty();
  if (!t.hip_build.empty()) {
    auto& f = out.add(Layer::frameworks, gpu_host ? Severity::fail : Severity::info, "frameworks.torch.rocm",
                      name + " is a ROCm (AMD) build");
    f.subject = p.interpreter;
    f.evidence.push_back("torch.version.hip = " + t.hip_build);
    if (gpu_host) f.fix = torch_install_fix(facts, k, p);
    return;
  }
  if (cpu_only) {
    auto& f = out.add(Layer::frameworks, gpu_host ? Severity::fail : Severity::warn, "frameworks.torch.cpu_only",
                      name + " is a CPU-only build");
    f.subject = p.interpreter;
    f.evidence.push_back("torch.version.cuda is None: this build cannot use an NVIDIA GPU");
    if (!gpu_host) f.evidence.push_back("no NVIDIA GPU on this host, so it runs; on a GPU host it would train on the CPU");
    f.fix = torch_install_fix(facts, k, p);
    return;
  }

  auto cuda = Version::parse(t.cuda_build);
  auto driver = driver_version(facts);
  bool problem = false;
  if (cuda && driver) {
    knowledge::DriverQuery q{*cuda, *driver, os, driver_cuda_version(facts)};
    auto verdict = k.cuda_drivers.verdict(q);
    if (verdict.kind == knowledge::DriverVerdictKind::unsupported) {
      problem = true;
      auto& f = out.add(Layer::frameworks, Severity::fail, "frameworks.torch.driver_too_old",
                        name + " (CUDA " + t.cuda_build + ") needs a newer driver than " + driver->str());
      f.subject = p.interpreter;
      f.evidence.push_back(verdict.explanation);
      f.fix = (verdict.required_driver ? "install driver " + verdict.required_driver->str() + " or newer, or " : std::string()) +
              "install a build for an older CUDA: " + torch_install_fix(facts, k, p);
    }
  }
  auto cc = host_compute_capability(facts, k);
  if (cc && !t.arch_list.empty()) {
    auto fit = knowledge::fit_arch_list(t.arch_list, *cc);
    if (fit.match == knowledge::ArchMatch::none) {
      problem = true;
      auto& f = out.add(Layer::frameworks, Severity::fail, "frameworks.torch.arch_mismatch",
                        name + " has no kernels for this GPU (compute capability " + cc->str() + ")");
      f.subject = p.interpreter;
      f.evidence.push_back("compiled for " + join(t.arch_list, " "));
      f.evidence.push_back(fit.explanation);
      f.evidence.push_back("symptom: 'no kernel image is available for execution on the device'");
      f.fix = torch_install_fix(facts, k, p);
    } else if (fit.match == knowledge::ArchMatch::ptx_jit) {
      auto& f = out.add(Layer::frameworks, Severity::warn, "frameworks.torch.ptx_jit",
                        name + " runs on this GPU only by JIT-compiling PTX");
      f.subject = p.interpreter;
      f.evidence.push_back(fit.explanation);
      f.fix = "expect a slow first start; a build with native kernels: " + torch_install_fix(facts, k, p);
    }
  }
  if (gpu_host && driver && !t.cuda_available && !problem) {
    auto& f = out.add(Layer::frameworks, Severity::fail, "frameworks.torch.cuda_unavailable",
                      name + ": torch.cuda.is_available() is False on a GPU host");
    f.subject = p.interpreter;
    if (!t.cuda_unavailable_reason.empty()) f.evidence.push_back(t.cuda_unavailable_reason);
    f.evidence.push_back("CUDA build " + t.cuda_build + ", driver " + driver->str());
    f.fix = "check CUDA_VISIBLE_DEVICES and the GPU findings above; in a container, start it with --gpus all";
    return;
  }
  if (problem) return;
  auto& f = out.add(Layer::frameworks, Severity::ok, "frameworks.torch", name + " with CUDA " + t.cuda_build);
  f.subject = p.interpreter;
  if (t.cuda_available)
    f.evidence.push_back("torch.cuda.is_available(): True; " + join(t.devices, ", "));
  else if (!t.imported)
    f.evidence.push_back("CUDA build; no GPU on this host, so torch was not imported (--full-probe imports it)");
  else
    f.evidence.push_back(gpu_host ? "CUDA not available" : "CUDA build; no GPU on this host to use it");
  if (!t.cudnn_version.empty()) f.evidence.push_back("cuDNN " + t.cudnn_version);
  if (!t.arch_list.empty()) f.evidence.push_back("compiled for " + join(t.arch_list, " "));
}

void judge_tensorflow(const HostFacts& facts, const knowledge::Knowledge& k, const PythonFacts& p, bool gpu_host, Findings& out) {
  const auto& tf = p.tensorflow;
  auto os = knowledge_os(facts);
  std::string pip = pip_for(p.interpreter);
  const std::string tf_spec = "tensorflow" + (tf.version.empty() ? std::string() : "==" + tf.version);
  if (!p.tensorflow_gpu_version.empty()) {
    auto& f = out.add(Layer::frameworks, Severity::warn, "frameworks.tensorflow_gpu.obsolete",
                      "The obsolete tensorflow-gpu package is installed");
    f.subject = p.interpreter;
    f.evidence.push_back("tensorflow-gpu " + p.tensorflow_gpu_version + "; since TF 2.1 the tensorflow package has GPU support");
    if (!k.tensorflow.rules.tensorflow_gpu_removed.empty()) f.evidence.push_back("pip now says: " + k.tensorflow.rules.tensorflow_gpu_removed);
    f.fix = pip + " uninstall -y tensorflow-gpu && " +
            (os == knowledge::Os::windows ? pip + " install \"tensorflow<2.11\"  (native Windows GPU) or use WSL2"
                                          : pip + " install 'tensorflow[and-cuda]'");
  }
  if (!tf.installed) return;
  std::string name = "TensorFlow " + tf.version;
  if (!tf.error.empty()) {
    auto& f = out.add(Layer::frameworks, Severity::fail, "frameworks.tensorflow.import_failed", "TensorFlow is installed but does not import");
    f.subject = p.interpreter;
    f.evidence.push_back(tf.error);
    f.fix = pip_install(p, "install --force-reinstall tensorflow", "tensorflow");
    return;
  }
  auto version = Version::parse(tf.version);
  if (version) {
    auto support = knowledge::tensorflow_gpu_support(k, *version, os);
    if (!support.gpu) {
      auto& f = out.add(Layer::frameworks, gpu_host ? Severity::fail : Severity::info, "frameworks.tensorflow.no_gpu_support",
                        name + " cannot use an NVIDIA GPU here");
      f.subject = p.interpreter;
      f.evidence.push_back(support.reason);
      if (gpu_host) {
        knowledge::TensorflowHost host{os, driver_version(facts), Version::parse(p.version), windows_build(facts)};
        auto advice = knowledge::recommend_tensorflow(k, host);
        if (!advice.options.empty()) f.fix = join(advice.options.front().commands, " && ");
      }
      return;
    }
  }
  if (gpu_host && !tf.built_with_cuda) {
    auto& f = out.add(Layer::frameworks, Severity::fail, "frameworks.tensorflow.cpu_only", name + " is a CPU-only build");
    f.subject = p.interpreter;
    f.evidence.push_back("tf.test.is_built_with_cuda() is False");
    f.fix = pip_install(p, "install 'tensorflow[and-cuda]==" + tf.version + "'", tf_spec);
    return;
  }
  if (gpu_host && tf.imported && tf.gpus.empty()) {
    auto& f = out.add(Layer::frameworks, Severity::fail, "frameworks.tensorflow.no_gpu", name + " sees no GPU");
    f.subject = p.interpreter;
    f.evidence.push_back("tf.config.list_physical_devices('GPU') is empty; built for CUDA " + tf.cuda_build + ", cuDNN " + tf.cudnn_build);
    f.fix = "install the CUDA libraries TensorFlow expects: " +
            pip_install(p, "install 'tensorflow[and-cuda]==" + tf.version + "'", tf_spec);
    return;
  }
  auto& f = out.add(Layer::frameworks, Severity::ok, "frameworks.tensorflow", name);
  f.subject = p.interpreter;
  f.evidence.push_back(!tf.imported ? "not imported: no GPU on this host (--full-probe imports it)"
                       : tf.gpus.empty() ? "no GPU on this host" : "sees " + join(tf.gpus, ", "));
  if (!tf.cuda_build.empty()) f.evidence.push_back("built for CUDA " + tf.cuda_build + ", cuDNN " + tf.cudnn_build);
}

}  // namespace

void judge_frameworks(const HostFacts& facts, const knowledge::Knowledge& knowledge, Findings& out) {
  if (facts.python_skipped) {
    auto& f = out.add(Layer::frameworks, Severity::info, "frameworks.skipped", "Python frameworks not checked (--no-python)");
    f.evidence.push_back("run without --no-python to probe PyTorch and TensorFlow");
    return;
  }
  if (facts.pythons.empty()) {
    auto& f = out.add(Layer::frameworks, Severity::info, "frameworks.python.none", "No Python interpreter found on PATH");
    f.fix = "pass the training environment with --python PATH (a venv, conda env or interpreter)";
    return;
  }
  bool gpu_host = host_has_nvidia_gpu(facts);
  for (const auto& p : facts.pythons) {
    if (p.timed_out || !p.probe_error.empty()) {
      auto& f = out.add(Layer::frameworks, Severity::warn, p.timed_out ? "frameworks.python.timeout" : "frameworks.python.probe_failed",
                        p.timed_out ? "Python interpreter did not answer in time" : "Python interpreter could not be probed");
      f.subject = p.interpreter;
      f.evidence.push_back(p.probe_error);
      f.fix = "run it by hand to see why: " + p.interpreter + " -c \"import torch, tensorflow\"" +
              (p.timed_out ? "  (or raise --python-timeout)" : "");
      continue;
    }
    auto& f = out.add(Layer::frameworks, Severity::info, "frameworks.python", "Python " + p.version);
    f.subject = p.interpreter;
    std::string have;
    if (p.torch.installed) have += "torch " + p.torch.version;
    if (p.tensorflow.installed) have += std::string(have.empty() ? "" : ", ") + "tensorflow " + p.tensorflow.version;
    f.evidence.push_back((p.executable.empty() ? p.interpreter : p.executable) + ": " +
                         (have.empty() ? std::string("neither torch nor tensorflow installed") : have));
    judge_torch(facts, knowledge, p, gpu_host, out);
    judge_tensorflow(facts, knowledge, p, gpu_host, out);
  }
}

}  // namespace gpuhost::doctor
