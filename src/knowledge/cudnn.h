#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "base/version.h"
#include "knowledge/common.h"
#include "knowledge/compute_capability.h"

namespace gpuhost::knowledge {

// A cuDNN release built for a set of CUDA toolkits (data/cudnn.json). One cuDNN version may
// have several rows (one per CUDA family, or per compute-capability range).
struct CudnnRelease {
  Version cudnn;  // "9.10.2"
  // Inclusive major.minor ranges of CUDA toolkits: {12.0, 12.9}; a single version has first == second.
  std::vector<std::pair<Version, Version>> cuda_ranges;
  std::optional<Version> min_driver_linux;
  std::optional<Version> min_driver_windows;  // nullopt: N/A or not given
  std::optional<ComputeCapability> cc_min;
  std::optional<ComputeCapability> cc_max;
  Provenance provenance;

  // Whether this row is built for `cuda` (compared by major.minor).
  [[nodiscard]] bool fits_cuda(const Version& cuda) const;
  // Whether `cc` is inside the row's compute-capability range (true when the row gives none).
  [[nodiscard]] bool fits_compute_capability(ComputeCapability cc) const;
};

// data/cudnn.json, loaded and validated; rows newest cuDNN first. Immutable after loading.
struct CudnnTable {
  std::vector<CudnnRelease> releases;

  // Rows built for `cuda`, newest cuDNN first.
  [[nodiscard]] std::vector<const CudnnRelease*> for_cuda(const Version& cuda) const;
  // Rows built for `cuda` that also cover `cc`, newest cuDNN first.
  [[nodiscard]] std::vector<const CudnnRelease*> for_cuda(const Version& cuda, ComputeCapability cc) const;
};

}  // namespace gpuhost::knowledge
