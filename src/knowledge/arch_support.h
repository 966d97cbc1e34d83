#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/version.h"
#include "knowledge/common.h"
#include "knowledge/compute_capability.h"

namespace gpuhost::knowledge {

// The CUDA support window of a group of compute capabilities (data/cuda_arch_support.json).
struct ArchitectureSupport {
  std::string architecture;  // "Volta"
  std::vector<ComputeCapability> compute_capabilities;
  Version first_cuda;                             // first toolkit that targets it
  std::optional<int> last_cuda_major;             // last CUDA major that targets it; nullopt: ongoing
  std::optional<std::string> last_driver_branch;  // "R580"; nullopt: ongoing or unknown
  Provenance provenance;
};

// A release-note event about targets: "removed" ends support, "feature_complete" and "renamed"
// are informational.
struct ArchDropEvent {
  Version cuda;
  std::string kind;  // "removed", "feature_complete", "renamed"
  std::vector<ComputeCapability> compute_capabilities;
  std::string text;
  Provenance provenance;
};

enum class CudaCcStatus {
  supported,
  not_yet_supported,  // the toolkit predates the architecture
  dropped,            // a later CUDA major removed it
  unknown,            // the compute capability is not in the table
};

[[nodiscard]] const char* cuda_cc_status_name(CudaCcStatus status);

struct CudaCcSupport {
  CudaCcStatus status = CudaCcStatus::unknown;
  const ArchitectureSupport* architecture = nullptr;  // points into the table
  const ArchDropEvent* event = nullptr;               // the removal that applies, when dropped
  std::string explanation;
};

// data/cuda_arch_support.json, loaded and validated. Each compute capability appears in at most
// one row. Immutable after loading; safe to share between threads.
struct ArchSupportTable {
  std::vector<ArchitectureSupport> architectures;
  std::vector<ArchDropEvent> events;  // oldest first
  std::vector<Fact> facts;

  // The row listing `cc`; nullptr when none does.
  [[nodiscard]] const ArchitectureSupport* find(ComputeCapability cc) const;

  // Whether CUDA `cuda` (major.minor is enough) can build and run code for `cc`.
  [[nodiscard]] CudaCcSupport cuda_supports(const Version& cuda, ComputeCapability cc) const;
};

}  // namespace gpuhost::knowledge
