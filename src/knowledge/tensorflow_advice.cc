#include "knowledge/tensorflow_advice.h"

#include "base/strings.h"

namespace gpuhost::knowledge {
namespace {

bool driver_ok(const DriverVerdict& verdict) {
  return verdict.kind == DriverVerdictKind::supported ||
         verdict.kind == DriverVerdictKind::supported_via_minor_version_compat;
}

std::string windows_fix(const TensorflowRules& rules) {
  return "use WSL2 (Windows 10 build " + std::to_string(rules.wsl_min_windows_build) +
         " or later) with pip install 'tensorflow[and-cuda]', or native " + rules.windows_native_pip +
         " after " + rules.windows_native_conda;
}

// The newest release usable through pip on a Linux userland (native Linux or WSL2).
std::optional<TensorflowOption> linux_option(const Knowledge& knowledge, const Version& driver, Os driver_os,
                                             const std::optional<Version>& python, TensorflowInstallPath path,
                                             std::vector<std::string>& problems) {
  const TensorflowTable& table = knowledge.tensorflow;
  const TensorflowRules& rules = table.rules;
  const Version& floor = driver_os == Os::windows ? rules.wsl_driver_floor : rules.linux_driver_floor;
  for (const auto& release : table.releases) {  // newest first
    if (release.version < rules.gpu_in_tensorflow_since) break;
    if (python && !release.supports_python(*python)) continue;
    bool and_cuda = release.version >= rules.and_cuda_since;
    DriverVerdict verdict =
        knowledge.cuda_drivers.verdict(DriverQuery{release.cuda, driver, driver_os, std::nullopt});
    if (!driver_ok(verdict)) {
      problems.push_back("tensorflow " + release.version.str() + ": " + verdict.explanation);
      continue;
    }
    if (and_cuda && driver < floor) {
      problems.push_back("tensorflow " + release.version.str() + " asks for driver >= " + floor.str() +
                         "; driver " + driver.str() + " is older");
      continue;
    }
    TensorflowOption option;
    option.release = &release;
    option.path = path;
    option.driver = std::move(verdict);
    std::string pin = release.version.str();
    if (and_cuda) {
      option.commands.push_back(replace_all(rules.linux_pip_and_cuda, "{version}", pin));
    } else {
      option.commands.push_back("pip install tensorflow==" + pin);
      option.caveats.push_back(
          "tensorflow " + pin + " needs CUDA " + release.cuda.str() + " and cuDNN " + release.cudnn.str() +
          " installed on the system (the and-cuda extra starts at " + rules.and_cuda_since.str() + ")");
    }
    if (option.driver.kind == DriverVerdictKind::supported_via_minor_version_compat)
      option.caveats.push_back(option.driver.explanation);
    option.explanation = "tensorflow " + pin + " (tested with CUDA " + release.cuda.str() + ", cuDNN " +
                         release.cudnn.str() + ")" +
                         (path == TensorflowInstallPath::wsl2 ? " inside WSL2" : "") +
                         " is the newest that uses the GPU here";
    return option;
  }
  return std::nullopt;
}

}  // namespace

const char* tensorflow_install_path_name(TensorflowInstallPath path) {
  switch (path) {
    case TensorflowInstallPath::linux_pip: return "linux_pip";
    case TensorflowInstallPath::windows_native: return "windows_native";
    case TensorflowInstallPath::wsl2: return "wsl2";
  }
  return "unknown";
}

TensorflowGpuSupport tensorflow_gpu_support(const Knowledge& knowledge, const Version& tensorflow, Os os) {
  const TensorflowRules& rules = knowledge.tensorflow.rules;
  const std::string name = "tensorflow " + tensorflow.str();
  TensorflowGpuSupport support;
  if (major_minor(tensorflow) < rules.gpu_in_tensorflow_since) {
    support.reason = name + " predates GPU support in the tensorflow package (" +
                     rules.gpu_in_tensorflow_since.str() +
                     "); its GPU build was tensorflow-gpu, which pip now refuses: \"" +
                     rules.tensorflow_gpu_removed + "\"";
    return support;
  }
  if (os == Os::windows) {
    const TensorflowRelease* release = knowledge.tensorflow.find_release(tensorflow);
    bool native =
        release ? release->windows_native_gpu : major_minor(tensorflow) <= rules.last_native_windows_gpu;
    if (!native) {
      support.reason = name + " has no GPU support on native Windows (the last release with it is " +
                       rules.last_native_windows_gpu.str() + "): " + windows_fix(rules);
      return support;
    }
    support.gpu = true;
    support.reason = name + " supports the GPU on native Windows with CUDA " +
                     (release ? release->cuda.str() : std::string("11.2")) + " and cuDNN " +
                     (release ? release->cudnn.str() : std::string("8.1")) + " installed";
    return support;
  }
  support.gpu = true;
  const TensorflowRelease* release = knowledge.tensorflow.find_release(tensorflow);
  support.reason =
      name + " supports the GPU on Linux" +
      (release ? " (tested with CUDA " + release->cuda.str() + ", cuDNN " + release->cudnn.str() + ")"
               : std::string());
  return support;
}

TensorflowAdvice recommend_tensorflow(const Knowledge& knowledge, const TensorflowHost& host) {
  TensorflowAdvice advice;
  const TensorflowTable& table = knowledge.tensorflow;
  const TensorflowRules& rules = table.rules;
  if (!host.driver) {
    advice.problems.push_back("no NVIDIA driver is installed, so no TensorFlow can use a GPU");
    return advice;
  }
  if (host.os == Os::linux) {
    if (auto option = linux_option(knowledge, *host.driver, Os::linux, host.python,
                                   TensorflowInstallPath::linux_pip, advice.problems))
      advice.options.push_back(std::move(*option));
    else if (host.python)
      advice.problems.push_back("no TensorFlow release with GPU support fits Python " +
                                major_minor(*host.python).str() + " and driver " + host.driver->str());
    return advice;
  }

  for (const auto& release : table.releases) {  // newest first
    if (!release.windows_native_gpu || release.version < rules.gpu_in_tensorflow_since) continue;
    if (host.python && !release.supports_python(*host.python)) continue;
    DriverVerdict verdict =
        knowledge.cuda_drivers.verdict(DriverQuery{release.cuda, *host.driver, Os::windows, std::nullopt});
    if (!driver_ok(verdict)) {
      advice.problems.push_back("tensorflow " + release.version.str() +
                                " on native Windows: " + verdict.explanation);
      continue;
    }
    TensorflowOption option;
    option.release = &release;
    option.path = TensorflowInstallPath::windows_native;
    option.commands = {rules.windows_native_conda, rules.windows_native_pip};
    option.driver = std::move(verdict);
    option.caveats.push_back(
        "TensorFlow " + rules.last_native_windows_gpu.str() +
        " is the last release with GPU support on native Windows; newer releases need WSL2");
    option.explanation =
        "tensorflow " + release.version.str() + " is the newest that uses the GPU on native Windows";
    advice.options.push_back(std::move(option));
    break;
  }
  if (advice.options.empty() && host.python)
    advice.problems.push_back("Python " + major_minor(*host.python).str() +
                              " is outside every TensorFlow release with native Windows GPU support (<= " +
                              rules.last_native_windows_gpu.str() + ")");

  if (host.windows_build && *host.windows_build < rules.wsl_min_windows_build) {
    advice.problems.push_back("WSL2 GPU support needs Windows 10 build " +
                              std::to_string(rules.wsl_min_windows_build) + " or later; this is build " +
                              std::to_string(*host.windows_build));
    return advice;
  }
  // WSL2 has its own Python, so the Windows interpreter does not constrain it.
  if (auto option = linux_option(knowledge, *host.driver, Os::windows, std::nullopt,
                                 TensorflowInstallPath::wsl2, advice.problems)) {
    option->caveats.push_back("run inside WSL2 (Windows 10 build " +
                              std::to_string(rules.wsl_min_windows_build) + " or later)");
    advice.options.push_back(std::move(*option));
  }
  return advice;
}

}  // namespace gpuhost::knowledge
