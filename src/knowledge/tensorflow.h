#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/version.h"
#include "knowledge/common.h"

namespace gpuhost::knowledge {

// A TensorFlow release's tested GPU configuration (data/tensorflow.json).
struct TensorflowRelease {
  Version version;  // "2.15.0"
  Version python_min;
  Version python_max;
  Version cudnn;                    // "8.9"
  Version cuda;                     // "12.2": the Linux tested build configuration
  bool windows_native_gpu = false;  // true only up to 2.10
  Provenance provenance;

  [[nodiscard]] bool supports_python(const Version& python) const;
};

// The install rules of data/tensorflow.json "facts", typed. Each value's source stays in `facts`.
struct TensorflowRules {
  Version gpu_in_tensorflow_since;     // 2.1: earlier GPU builds were the tensorflow-gpu package
  Version last_native_windows_gpu;     // 2.10
  Version and_cuda_since;              // 2.14: `pip install 'tensorflow[and-cuda]'` brings CUDA from pip
  Version linux_driver_floor;          // 525.60.13
  Version wsl_driver_floor;            // 528.33 (a Windows driver version)
  int wsl_min_windows_build = 0;       // 19044
  std::string linux_pip_and_cuda;      // pip install 'tensorflow[and-cuda]=={version}'
  std::string windows_native_conda;    // conda install -c conda-forge cudatoolkit=11.2 cudnn=8.1.0
  std::string windows_native_pip;      // pip install "tensorflow<2.11"
  std::string tensorflow_gpu_removed;  // pip's message for the removed tensorflow-gpu package
};

// data/tensorflow.json, loaded and validated; releases newest first. The facts listed in
// TensorflowRules are required. Immutable after loading; safe to share between threads.
struct TensorflowTable {
  std::vector<TensorflowRelease> releases;
  TensorflowRules rules;
  std::vector<Fact> facts;

  // The release with this major.minor (the newest patch row when several); nullptr when unknown.
  [[nodiscard]] const TensorflowRelease* find_release(const Version& tensorflow) const;
};

}  // namespace gpuhost::knowledge
