#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/version.h"
#include "knowledge/common.h"
#include "knowledge/cuda_drivers.h"
#include "knowledge/knowledge.h"
#include "knowledge/tensorflow.h"

namespace gpuhost::knowledge {

// Whether a TensorFlow version can use an NVIDIA GPU on an OS at all (drivers aside).
struct TensorflowGpuSupport {
  bool gpu = false;
  std::string reason;  // with the fix when `gpu` is false
};

[[nodiscard]] TensorflowGpuSupport tensorflow_gpu_support(const Knowledge& knowledge,
                                                          const Version& tensorflow, Os os);

struct TensorflowHost {
  Os os = Os::linux;
  std::optional<Version> driver;     // nullopt: no NVIDIA driver
  std::optional<Version> python;     // the interpreter TensorFlow is for (native, not WSL2's)
  std::optional<int> windows_build;  // 19045 for Windows 10 22H2; checked for WSL2
};

enum class TensorflowInstallPath {
  linux_pip,       // pip on Linux; from 2.14 the and-cuda extra brings CUDA and cuDNN
  windows_native,  // TensorFlow <= 2.10 with CUDA 11.2 / cuDNN 8.1 from conda-forge
  wsl2,            // a Linux TensorFlow inside WSL2 on the Windows driver
};

[[nodiscard]] const char* tensorflow_install_path_name(TensorflowInstallPath path);

struct TensorflowOption {
  const TensorflowRelease* release = nullptr;  // points into knowledge.tensorflow
  TensorflowInstallPath path = TensorflowInstallPath::linux_pip;
  std::vector<std::string> commands;  // to run in order
  DriverVerdict driver;
  std::vector<std::string> caveats;
  std::string explanation;
};

struct TensorflowAdvice {
  // Best first. Linux: the newest usable release. Windows: native (<= 2.10) when the Python
  // fits, then WSL2 with the newest release.
  std::vector<TensorflowOption> options;
  std::vector<std::string> problems;  // why candidates were rejected, when options is short
};

[[nodiscard]] TensorflowAdvice recommend_tensorflow(const Knowledge& knowledge, const TensorflowHost& host);

}  // namespace gpuhost::knowledge
