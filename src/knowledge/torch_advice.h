#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/version.h"
#include "knowledge/arch_support.h"
#include "knowledge/common.h"
#include "knowledge/compute_capability.h"
#include "knowledge/cuda_drivers.h"
#include "knowledge/knowledge.h"
#include "knowledge/pytorch.h"

namespace gpuhost::knowledge {

// The host a PyTorch wheel is judged for. Unknown parts are left empty and are not checked.
struct TorchHost {
  Os os = Os::linux;
  std::optional<Version> driver;                        // nullopt: no NVIDIA driver
  std::optional<Version> driver_cuda_version;           // NVML's newest CUDA for the driver, when read
  std::optional<ComputeCapability> compute_capability;  // of the GPU the job will use
  std::optional<Version> python;                        // the interpreter the wheel is for
};

enum class DriverPolicy {
  allow_minor_version_compat,  // PyTorch relies on it: cu12x wheels run on any driver >= 525
  require_full_support,
};

struct TorchAdviceOptions {
  DriverPolicy driver_policy = DriverPolicy::allow_minor_version_compat;
  bool include_unconfirmed = false;  // consider releases whose confidence is `unconfirmed`
  std::optional<Version> release_line;  // consider only this release line ("2.8"); a patch is cut to it
};

// The verdict on one wheel for one host.
struct TorchBuildCheck {
  bool usable = false;
  std::optional<DriverVerdict> driver;   // when the host has a driver
  std::optional<ArchListFit> arch;       // when the build's arch list is published
  std::optional<CudaCcSupport> cuda_cc;  // when it is not: whether its CUDA supports the GPU at all
  std::vector<std::string> problems;     // why it is not usable, a sentence each
  std::vector<std::string> caveats;      // usable, but worth saying (minor-version compat, PTX JIT,
                                         // arch list not published)
};

[[nodiscard]] TorchBuildCheck check_torch_build(const Knowledge& knowledge, const TorchRelease& release,
                                                const TorchBuild& build, const TorchHost& host,
                                                const TorchAdviceOptions& options = {});

struct TorchRecommendation {
  const TorchRelease* release = nullptr;  // points into knowledge.pytorch
  const TorchBuild* build = nullptr;      // nullptr: the CPU wheel
  bool cpu_fallback = false;              // a GPU host on which no known CUDA wheel is usable
  std::string index_url;                  // https://download.pytorch.org/whl/cu126
  std::string install_command;            // pip install torch==2.13.0 --index-url ...
  std::optional<TorchBuildCheck> check;   // for a CUDA build
  std::string explanation;
};

// The newest (release, CUDA build) usable on `host`, with its exact pip command. Within a
// release, builds without caveats beat builds that lean on minor-version compatibility or an
// inferred arch list; then the newer CUDA wins. A host without a driver or GPU, or one no CUDA
// wheel fits, gets the newest CPU wheel (cpu_fallback tells the latter). nullopt only when no
// release supports host.python.
[[nodiscard]] std::optional<TorchRecommendation> recommend_torch(const Knowledge& knowledge,
                                                                 const TorchHost& host,
                                                                 const TorchAdviceOptions& options = {});

}  // namespace gpuhost::knowledge
