#include "gpu/nvml_library.h"

#include <filesystem>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "gpu/collector.h"
#include "gpu/fake_nvml_test_support.h"

namespace gpuhost::gpu {
namespace {

using testing::k_fake_nvml;
using testing::k_fake_nvml_legacy;
using testing::k_fake_nvml_minimal;
using testing::scenario_path;
using testing::ScopedEnv;
using testing::snapshot_of;

EnvLookup env_from(std::map<std::string, std::string> values) {
  return [values = std::move(values)](std::string_view name) -> std::optional<std::string> {
    auto it = values.find(std::string(name));
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

TEST(NvmlLibraryCandidates, LinuxUsesTheDriverSoname) {
  EXPECT_EQ(nvml_library_candidates(platform::OsFamily::linux, env_from({})),
            (std::vector<std::string>{"libnvidia-ml.so.1"}));
}

TEST(NvmlLibraryCandidates, WindowsTriesSystem32ThenNvsmi) {
  auto env = env_from({{"SystemRoot", "D:\\WINDOWS"}, {"ProgramFiles", "D:\\Program Files"}});
  EXPECT_EQ(nvml_library_candidates(platform::OsFamily::windows, env),
            (std::vector<std::string>{"D:\\WINDOWS\\System32\\nvml.dll",
                                      "D:\\Program Files\\NVIDIA Corporation\\NVSMI\\nvml.dll"}));
  EXPECT_EQ(nvml_library_candidates(platform::OsFamily::windows, env_from({})),
            (std::vector<std::string>{"C:\\Windows\\System32\\nvml.dll",
                                      "C:\\Program Files\\NVIDIA Corporation\\NVSMI\\nvml.dll"}));
}

TEST(NvmlLibraryCandidates, ExplicitLibraryIsTheOnlyCandidate) {
  auto env =
      env_from({{"GPUHOST_NVML_LIBRARY", "/opt/nvml/libnvidia-ml.so.1"}, {"SystemRoot", "C:\\Windows"}});
  EXPECT_EQ(nvml_library_candidates(platform::OsFamily::linux, env),
            (std::vector<std::string>{"/opt/nvml/libnvidia-ml.so.1"}));
  EXPECT_EQ(nvml_library_candidates(platform::OsFamily::windows, env),
            (std::vector<std::string>{"/opt/nvml/libnvidia-ml.so.1"}));
  // Empty means unset.
  EXPECT_EQ(nvml_library_candidates(platform::OsFamily::linux, env_from({{"GPUHOST_NVML_LIBRARY", ""}})),
            (std::vector<std::string>{"libnvidia-ml.so.1"}));
}

TEST(NvmlLibrary, MissingLibraryMeansNoDriver) {
  std::string path = std::string(GPUHOST_FAKE_NVML_SCENARIOS) + "/no-such-dir/libnvidia-ml.so.1";
  NvmlLibrary nvml = NvmlLibrary::open({path});
  EXPECT_FALSE(nvml.loaded());
  EXPECT_FALSE(nvml.initialized());
  ASSERT_TRUE(nvml.error());
  EXPECT_EQ(nvml.error()->status, 12);
  EXPECT_EQ(nvml.error()->name, "NVML_ERROR_LIBRARY_NOT_FOUND");
  EXPECT_NE(nvml.error()->message.find("no NVIDIA driver is installed"), std::string::npos);
  EXPECT_NE(nvml.error()->message.find("no-such-dir"), std::string::npos) << nvml.error()->message;

  ScopedEnv library(k_nvml_library_env, path);
  GpuSnapshot s = take_snapshot();
  EXPECT_FALSE(s.available);
  ASSERT_TRUE(s.error);
  EXPECT_EQ(s.error->status, 12);
  EXPECT_TRUE(s.library_path.empty());
  EXPECT_TRUE(s.devices.empty());
}

TEST(NvmlLibrary, NoCandidatesMeansNoDriver) {
  NvmlLibrary nvml = NvmlLibrary::open(std::vector<std::string>{});
  ASSERT_TRUE(nvml.error());
  EXPECT_EQ(nvml.error()->status, 12);
}

TEST(NvmlLibrary, FileThatIsNotALibraryIsNotFound) {
  // A scenario file is no shared library: the loader refuses it and gpuhost reports status 12.
  NvmlLibrary nvml = NvmlLibrary::open({scenario_path("a100_sxm4_80gb_x8")});
  EXPECT_FALSE(nvml.loaded());
  ASSERT_TRUE(nvml.error());
  EXPECT_EQ(nvml.error()->status, 12);
}

TEST(NvmlLibrary, FullFakeResolvesNewestNames) {
  ScopedEnv scenario(testing::k_scenario_env, scenario_path("a100_sxm4_80gb_x8"));
  NvmlLibrary nvml = NvmlLibrary::open({k_fake_nvml});
  ASSERT_TRUE(nvml.initialized()) << nvml.error()->message;
  EXPECT_EQ(nvml.path(), k_fake_nvml);
  EXPECT_TRUE(nvml.missing_symbols().empty());
  EXPECT_EQ(nvml.functions().pci_info_version, 3);
  EXPECT_EQ(nvml.functions().grid_licensable_features_version, 4);
  EXPECT_NE(nvml.functions().device_get_memory_info_v2, nullptr);
}

TEST(NvmlLibrary, InitIsReferenceCountedAcrossObjects) {
  ScopedEnv scenario(testing::k_scenario_env, scenario_path("a100_sxm4_80gb_x8"));
  NvmlLibrary first = NvmlLibrary::open({k_fake_nvml});
  ASSERT_TRUE(first.initialized());
  {
    NvmlLibrary second = NvmlLibrary::open({k_fake_nvml});
    ASSERT_TRUE(second.initialized());
    EXPECT_EQ(collect_snapshot(second).devices.size(), 8u);
  }
  // The second object's nvmlShutdown must not have shut NVML down under the first.
  GpuSnapshot s = collect_snapshot(first);
  EXPECT_TRUE(s.available);
  EXPECT_EQ(s.devices.size(), 8u);
  EXPECT_FALSE(s.count_error);

  NvmlLibrary moved = std::move(first);
  EXPECT_TRUE(moved.initialized());
  EXPECT_FALSE(first.initialized());  // NOLINT(bugprone-use-after-move): the moved-from state is the contract
  EXPECT_EQ(collect_snapshot(moved).devices.size(), 8u);
}

TEST(NvmlLibrary, MinimalLibraryListsMissingSymbolsAndUsesPlainNames) {
  GpuSnapshot s = snapshot_of("a100_sxm4_80gb_x8", k_fake_nvml_minimal);
  ASSERT_TRUE(s.available) << (s.error ? s.error->message : "");
  EXPECT_EQ(s.library_path, k_fake_nvml_minimal);
  EXPECT_EQ(s.missing_symbols, (std::vector<std::string>{"nvmlSystemGetNVMLVersion",
                                                         "nvmlSystemGetCudaDriverVersion_v2",
                                                         "nvmlDeviceGetUUID",
                                                         "nvmlDeviceGetSerial",
                                                         "nvmlDeviceGetVbiosVersion",
                                                         "nvmlDeviceGetPciInfo_v3",
                                                         "nvmlDeviceGetArchitecture",
                                                         "nvmlDeviceGetCudaComputeCapability",
                                                         "nvmlDeviceValidateInforom",
                                                         "nvmlDeviceGetMemoryInfo_v2",
                                                         "nvmlDeviceGetEccMode",
                                                         "nvmlDeviceGetTotalEccErrors",
                                                         "nvmlDeviceGetRetiredPages",
                                                         "nvmlDeviceGetRetiredPagesPendingStatus",
                                                         "nvmlDeviceGetRemappedRows",
                                                         "nvmlDeviceGetCurrPcieLinkGeneration",
                                                         "nvmlDeviceGetCurrPcieLinkWidth",
                                                         "nvmlDeviceGetMaxPcieLinkGeneration",
                                                         "nvmlDeviceGetMaxPcieLinkWidth",
                                                         "nvmlDeviceGetGpuMaxPcieLinkGeneration",
                                                         "nvmlDeviceGetPcieReplayCounter",
                                                         "nvmlDeviceGetPersistenceMode",
                                                         "nvmlDeviceGetComputeMode",
                                                         "nvmlDeviceGetDriverModel_v2",
                                                         "nvmlDeviceGetMigMode",
                                                         "nvmlDeviceGetMaxMigDeviceCount",
                                                         "nvmlDeviceGetMigDeviceHandleByIndex",
                                                         "nvmlDeviceGetGpuInstanceId",
                                                         "nvmlDeviceGetComputeInstanceId",
                                                         "nvmlDeviceGetVirtualizationMode",
                                                         "nvmlDeviceGetGridLicensableFeatures_v4",
                                                         "nvmlDeviceGetCurrentClocksEventReasons",
                                                         "nvmlDeviceGetTemperature",
                                                         "nvmlDeviceGetTemperatureThreshold",
                                                         "nvmlDeviceGetClockInfo",
                                                         "nvmlDeviceGetMaxClockInfo",
                                                         "nvmlDeviceGetPowerUsage",
                                                         "nvmlDeviceGetEnforcedPowerLimit",
                                                         "nvmlDeviceGetUtilizationRates",
                                                         "nvmlDeviceGetPerformanceState",
                                                         "nvmlDeviceGetFanSpeed",
                                                         "nvmlDeviceGetTotalEnergyConsumption",
                                                         "nvmlDeviceGetPcieThroughput",
                                                         "nvmlDeviceGetEncoderUtilization",
                                                         "nvmlDeviceGetDecoderUtilization",
                                                         "nvmlDeviceGetFieldValues",
                                                         "nvmlDeviceGetComputeRunningProcesses_v3",
                                                         "nvmlDeviceGetGraphicsRunningProcesses_v3",
                                                         "nvmlEventSetCreate",
                                                         "nvmlDeviceRegisterEvents",
                                                         "nvmlEventSetWait_v2",
                                                         "nvmlEventSetFree",
                                                         "nvmlGpmQueryDeviceSupport",
                                                         "nvmlGpmSampleAlloc",
                                                         "nvmlGpmSampleFree",
                                                         "nvmlGpmSampleGet",
                                                         "nvmlGpmMigSampleGet",
                                                         "nvmlGpmMetricsGet"}));
  // nvmlInit, nvmlDeviceGetCount and nvmlDeviceGetHandleByIndex were found under their plain names.
  EXPECT_EQ(s.driver_version, "535.104.05");
  EXPECT_TRUE(s.nvml_version.empty());
  ASSERT_TRUE(s.cuda_driver_error);
  EXPECT_EQ(s.cuda_driver_error->status, 13);
  ASSERT_EQ(s.devices.size(), 8u);
  const GpuDevice& d = s.devices[0];
  EXPECT_EQ(d.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_TRUE(d.uuid.empty());
  EXPECT_TRUE(d.pci_bus_id.empty());
  EXPECT_FALSE(d.lost);
  for (const std::optional<NvmlIssue>* issue :
       {&d.memory.issue, &d.ecc.issue, &d.pcie.issue, &d.temperature.issue, &d.vgpu_license.issue,
        &d.clocks_event_reasons.issue, &d.driver_model.issue, &d.fan_percent.issue, &d.inforom_valid.issue}) {
    ASSERT_TRUE(issue->has_value());
    EXPECT_EQ((*issue)->status, 13);
    EXPECT_EQ((*issue)->name, "NVML_ERROR_FUNCTION_NOT_FOUND");
  }
}

TEST(NvmlLibrary, LegacyLibraryUsesOlderNamesAndLayouts) {
  ScopedEnv scenario(testing::k_scenario_env, scenario_path("a100_sxm4_80gb_x8"));
  NvmlLibrary nvml = NvmlLibrary::open({k_fake_nvml_legacy});
  ASSERT_TRUE(nvml.initialized());
  EXPECT_EQ(nvml.missing_symbols(),
            (std::vector<std::string>{"nvmlDeviceGetRemappedRows", "nvmlDeviceGetGpuMaxPcieLinkGeneration",
                                      "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetMigDeviceHandleByIndex",
                                      "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId",
                                      "nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleFree",
                                      "nvmlGpmSampleGet", "nvmlGpmMigSampleGet", "nvmlGpmMetricsGet"}));
  // Plain process lists (nvmlProcessInfo_v1_t) and the plain event wait.
  EXPECT_EQ(nvml.functions().device_get_compute_running_processes_v2, nullptr);
  EXPECT_NE(nvml.functions().device_get_compute_running_processes_v1, nullptr);
  EXPECT_NE(nvml.functions().event_set_wait, nullptr);
  EXPECT_EQ(nvml.functions().pci_info_version, 2);
  EXPECT_EQ(nvml.functions().grid_licensable_features_version, 3);
  EXPECT_EQ(nvml.functions().device_get_memory_info_v2, nullptr);

  GpuSnapshot s = collect_snapshot(nvml);
  ASSERT_EQ(s.devices.size(), 8u);
  const GpuDevice& d = s.devices[3];
  EXPECT_EQ(d.pci_bus_id, "00000000:4E:00.0");
  // v1 memory: no reserved figure, and "used" includes it.
  constexpr std::uint64_t mib = 1024 * 1024;
  EXPECT_EQ(d.memory.value, (MemoryState{81920 * mib, 545 * mib, 85327872000ULL, 0}));
  ASSERT_TRUE(d.remapped_rows.issue);
  EXPECT_EQ(d.remapped_rows.issue->status, 13);
  EXPECT_EQ(d.pcie.value, (PcieLink{4, 4, 0, 16, 16}));
  // Read through nvmlDeviceGetCurrentClocksThrottleReasons.
  EXPECT_EQ(d.clocks_event_reasons.value, clocks_event::gpu_idle);
  EXPECT_EQ(s.cuda_driver_version, 12020);
}

TEST(NvmlLibrary, LegacyLibraryReadsGridFeaturesV3Layout) {
  GpuSnapshot s = snapshot_of("vgpu_unlicensed", k_fake_nvml_legacy);
  ASSERT_TRUE(s.available);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].vgpu_license.value,
            (VgpuLicense{true, false, "NVIDIA RTX Virtual Workstation", "unlicensed", 0}));
}

// Windows (and Wine): the real default search, with %SystemRoot% and %ProgramFiles% pointed at
// temporary folders holding copies of the fakes.
TEST(NvmlLibrary, WindowsSearchPrefersSystem32ThenNvsmi) {
  if (platform::current_os() != platform::OsFamily::windows) GTEST_SKIP() << "Windows search order";
  namespace fs = std::filesystem;
  fs::path root =
      fs::temp_directory_path() / ("gpuhost-nvml-search-" + std::to_string(std::random_device{}()));
  struct RemoveOnExit {
    fs::path path;
    ~RemoveOnExit() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } cleanup{root};
  fs::path system_root = root / "Windows";
  fs::path program_files = root / "Program Files";
  fs::create_directories(system_root / "System32");
  fs::create_directories(program_files / "NVIDIA Corporation" / "NVSMI");
  fs::copy_file(fs::path(k_fake_nvml), program_files / "NVIDIA Corporation" / "NVSMI" / "nvml.dll");

  ScopedEnv scenario(testing::k_scenario_env, scenario_path("mig_pending_reset"));
  ScopedEnv system_root_env("SystemRoot", system_root.string());
  ScopedEnv program_files_env("ProgramFiles", program_files.string());
  ScopedEnv no_explicit_library(k_nvml_library_env, std::nullopt);
  {
    // Only the older NVSMI location has it.
    NvmlLibrary nvml = NvmlLibrary::open();
    ASSERT_TRUE(nvml.initialized()) << (nvml.error() ? nvml.error()->message : "");
    EXPECT_EQ(nvml.path(), (program_files / "NVIDIA Corporation" / "NVSMI" / "nvml.dll").string());
  }
  {
    // System32 (DCH drivers) wins when both exist; the minimal fake tells them apart.
    fs::copy_file(fs::path(k_fake_nvml_minimal), system_root / "System32" / "nvml.dll");
    NvmlLibrary nvml = NvmlLibrary::open();
    ASSERT_TRUE(nvml.initialized());
    EXPECT_EQ(nvml.path(), (system_root / "System32" / "nvml.dll").string());
    EXPECT_FALSE(nvml.missing_symbols().empty());
  }
}

// Linux only, run by its own CTest entry with LD_LIBRARY_PATH pointing at the fake (ld.so reads it
// at process start): the default search finds the driver's soname.
TEST(NvmlLibrarySoname, DefaultSearchFindsLibnvidiaMl) {
  if (!platform::get_env("GPUHOST_TEST_NVML_SONAME"))
    GTEST_SKIP() << "run by the gpu_test_soname CTest entry";
  ASSERT_FALSE(platform::get_env(k_nvml_library_env));
  GpuSnapshot s = take_snapshot();
  ASSERT_TRUE(s.available) << (s.error ? s.error->message : "");
  EXPECT_EQ(s.library_path, "libnvidia-ml.so.1");
  EXPECT_EQ(s.devices.size(), 8u);
}

}  // namespace
}  // namespace gpuhost::gpu
