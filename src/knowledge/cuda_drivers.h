#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/version.h"
#include "knowledge/common.h"

namespace gpuhost::knowledge {

// One CUDA toolkit release and the driver it needs for full support (data/cuda_drivers.json).
struct CudaToolkitRelease {
  Version cuda;         // "12.2.2": major.minor.update (10.x rows carry the build number)
  std::string release;  // "12.2 Update 2"
  std::optional<Version> min_driver_linux;
  // nullopt where NVIDIA lists N/A: from 13.0 the Windows installer no longer bundles the driver.
  std::optional<Version> min_driver_windows;
  Provenance provenance;

  [[nodiscard]] const std::optional<Version>& min_driver(Os os) const {
    return os == Os::windows ? min_driver_windows : min_driver_linux;
  }
};

// The minor-version-compatibility floor of a CUDA major family: an application built with any
// 12.x toolkit runs, with a limited feature set, on a driver >= 525.
struct MinorVersionFloor {
  int cuda_major = 0;
  Version min_driver_linux;
  Version min_driver_windows;
  // Drivers from here on run the family with full support through backward compatibility;
  // nullopt when open-ended.
  std::optional<Version> upper_driver_exclusive;
  Provenance provenance;

  [[nodiscard]] const Version& min_driver(Os os) const {
    return os == Os::windows ? min_driver_windows : min_driver_linux;
  }
};

// A data-center driver branch and its end of life ("R535", LTSB, "2026-06").
struct DriverBranch {
  int branch = 0;           // 535
  std::string kind;         // "LTSB", "PB" (production), "NFB" (new feature)
  std::string end_of_life;  // "2026-06"
  Provenance provenance;
};

enum class DriverVerdictKind {
  supported,                           // the driver meets the toolkit's own minimum
  supported_via_minor_version_compat,  // only the family floor is met: limited feature set, and
                                       // PTX JIT of newer kernels may fail
                                       // (cudaErrorUnsupportedPtxVersion, 222)
  unsupported,                         // below both; `required_driver` says what is needed
  unknown,                             // the CUDA version is not in the table and has no floor
};

[[nodiscard]] const char* driver_verdict_name(DriverVerdictKind kind);

struct DriverVerdict {
  DriverVerdictKind kind = DriverVerdictKind::unknown;
  // The toolkit's full-support minimum on that OS; when the table has none (Windows 13.x, or a
  // release newer than the table) the family floor.
  std::optional<Version> required_driver;
  std::optional<Version> minor_version_floor;   // the family floor on that OS, when one exists
  std::string explanation;                      // one or two sentences for a report
  const CudaToolkitRelease* release = nullptr;  // the governing row; nullptr when not in the table
  const MinorVersionFloor* floor = nullptr;
};

// What a verdict is asked about.
struct DriverQuery {
  Version cuda;    // the CUDA runtime an application uses: "12.4" (torch.version.cuda) or "12.4.1"
  Version driver;  // the installed driver: "535.104.05" (Linux), "537.13" (Windows)
  Os os = Os::linux;
  // What the driver itself reports as its newest CUDA (nvmlSystemGetCudaDriverVersion_v2), when
  // known. It settles the cases the table cannot (Windows 13.x, releases newer than the table).
  std::optional<Version> driver_cuda_version;
};

// data/cuda_drivers.json, loaded and validated. Rows are sorted newest first. Immutable after
// loading; safe to share between threads.
struct CudaDriverTable {
  std::vector<CudaToolkitRelease> releases;
  std::vector<MinorVersionFloor> minor_version_floors;  // newest major first
  std::vector<DriverBranch> driver_branches;
  std::vector<Fact> facts;

  // The row that governs `cuda`. With an update component ("12.4.1") the newest row of that
  // major.minor not above it; with major.minor only ("12.4") the GA row, whose minimum is the
  // lowest of that minor. nullptr when the major.minor is not in the table.
  [[nodiscard]] const CudaToolkitRelease* find_release(const Version& cuda) const;

  // The driver `cuda` needs for full support on `os`; nullopt when the table has none.
  [[nodiscard]] std::optional<Version> min_driver(const Version& cuda, Os os) const;

  // The minor-version-compatibility floor of a CUDA major family (11 and later); nullptr before.
  [[nodiscard]] const MinorVersionFloor* minor_version_floor(int cuda_major) const;

  // The newest toolkit release `driver` fully supports on `os`; nullptr when none. Windows 13.x
  // rows have no minimum and are skipped, so cross-check with NVML's CUDA driver version.
  [[nodiscard]] const CudaToolkitRelease* newest_fully_supported(const Version& driver, Os os) const;

  // The branch row for a driver (535.104.05 -> R535); nullptr when not listed.
  [[nodiscard]] const DriverBranch* driver_branch(const Version& driver) const;

  // Whether `query.driver` can run applications built with `query.cuda`.
  [[nodiscard]] DriverVerdict verdict(const DriverQuery& query) const;
};

}  // namespace gpuhost::knowledge
