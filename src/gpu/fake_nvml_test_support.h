#pragma once
// Test-only helpers for loading the fake NVML libraries (tests/fake_nvml) through the real loader.
// Paths come from compile definitions set in src/gpu/CMakeLists.txt.

#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "gpu/collector.h"
#include "gpu/nvml_library.h"
#include "platform/scoped_env.h"

namespace gpuhost::gpu::testing {

inline constexpr const char* k_fake_nvml = GPUHOST_FAKE_NVML_PATH;
inline constexpr const char* k_fake_nvml_minimal = GPUHOST_FAKE_NVML_MINIMAL_PATH;
inline constexpr const char* k_fake_nvml_legacy = GPUHOST_FAKE_NVML_LEGACY_PATH;
inline constexpr const char* k_scenario_env = "GPUHOST_FAKE_NVML_SCENARIO";

// Every scenario file under tests/fake_nvml/scenarios except malformed.json.
inline constexpr const char* k_scenarios[] = {
    "a100_sxm4_80gb_x8",
    "t4_windows_wddm",
    "h100_pending_row_remap",
    "pcie_x8_gen3",
    "no_driver",
    "driver_mismatch",
    "vgpu_unlicensed",
    "vgpu_licensed",
    "mig_pending_reset",
    "gpu_lost",
    "thermal_slowdown",
    "eight_h100",
    "mid_scrape_error",
    "a100_80gb_mig_all_balanced",
    "h100_mig_instances_busy",
};

inline std::string scenario_path(const std::string& name) {
  return std::string(GPUHOST_FAKE_NVML_SCENARIOS) + "/" + name + ".json";
}

using platform::ScopedEnv;

// take_snapshot() with `library` as $GPUHOST_NVML_LIBRARY answering from `scenario`.
inline GpuSnapshot snapshot_of(const std::string& scenario, const std::string& library = k_fake_nvml) {
  ScopedEnv scenario_env(k_scenario_env, scenario_path(scenario));
  ScopedEnv library_env(k_nvml_library_env, library);
  return take_snapshot();
}

// A reading that failed with NVML status STATUS (WHAT names it in the failure message).
template <typename T>
void expect_issue(const Reading<T>& reading, int status, const char* what) {
  EXPECT_FALSE(reading.has_value()) << what;
  ASSERT_TRUE(reading.issue.has_value()) << what;
  EXPECT_EQ(reading.issue->status, status) << what << ": " << reading.issue->message;
}

}  // namespace gpuhost::gpu::testing
