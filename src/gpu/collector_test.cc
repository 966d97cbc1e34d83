// Every scenario of the fake NVML, loaded through the real NvmlLibrary loader, read into a
// snapshot and checked field by field.

#include "gpu/collector.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "gpu/fake_nvml_test_support.h"

namespace gpuhost::gpu {
namespace {

using testing::expect_issue;
using testing::k_fake_nvml;
using testing::snapshot_of;

// A reading that was never attempted.
template <typename T>
void expect_untouched(const Reading<T>& reading, const char* what) {
  EXPECT_FALSE(reading.has_value()) << what;
  EXPECT_FALSE(reading.issue.has_value()) << what;
}

constexpr std::uint64_t k_gib = 1024ULL * 1024 * 1024;
constexpr std::uint64_t k_mib = 1024ULL * 1024;

TEST(Collector, HealthyA100HostReadsEveryField) {
  GpuSnapshot s = snapshot_of("a100_sxm4_80gb_x8");
  ASSERT_TRUE(s.available) << (s.error ? s.error->message : "");
  EXPECT_EQ(s.library_path, k_fake_nvml);
  EXPECT_FALSE(s.error);
  EXPECT_TRUE(s.missing_symbols.empty());
  EXPECT_EQ(s.driver_version, "535.104.05");
  EXPECT_EQ(s.nvml_version, "12.535.104.05");
  EXPECT_EQ(s.cuda_driver_version, 12020);
  EXPECT_FALSE(s.cuda_driver_error);
  EXPECT_FALSE(s.count_error);
  ASSERT_EQ(s.devices.size(), 8u);

  const GpuDevice& d = s.devices[0];
  EXPECT_EQ(d.index, 0u);
  EXPECT_FALSE(d.lost);
  EXPECT_FALSE(d.handle_error);
  EXPECT_EQ(d.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(d.uuid, "GPU-9c5eefb0-e541-de5d-758c-568dca402e98");
  EXPECT_EQ(d.serial, "1323321012345");
  EXPECT_EQ(d.pci_bus_id, "00000000:07:00.0");
  EXPECT_EQ(d.pci_device_id, 0x20B210DEu);
  EXPECT_EQ(d.architecture.value, 7);
  EXPECT_EQ(d.cc_major.value, 8);
  EXPECT_EQ(d.cc_minor.value, 0);
  EXPECT_EQ(d.vbios_version, "92.00.45.00.03");
  EXPECT_EQ(d.inforom_valid.value, true);
  EXPECT_EQ(d.memory.value, (MemoryState{80 * k_gib, 4 * k_mib, 85327872000ULL, 541 * k_mib}));
  EXPECT_EQ(d.ecc.value, (EccState{true, true, 0, 0, 0, 0}));
  expect_issue(d.retired_pages, 3, "Ampere has row remapping instead of page retirement");
  EXPECT_EQ(d.remapped_rows.value, (RemappedRows{0, 0, false, false}));
  EXPECT_EQ(d.pcie.value, (PcieLink{4, 4, 4, 16, 16}));
  EXPECT_EQ(d.pcie_replay_counter.value, 0u);
  EXPECT_EQ(d.persistence_mode.value, true);
  EXPECT_EQ(d.compute_mode.value, 0);
  expect_issue(d.driver_model, 3, "driver model is Windows only");
  EXPECT_EQ(d.mig.value, (MigState{false, false}));
  EXPECT_EQ(d.virtualization.value, VirtualizationMode::none);
  expect_issue(d.vgpu_license, 3, "no vGPU licensing on bare metal");
  EXPECT_EQ(d.clocks_event_reasons.value, clocks_event::gpu_idle);
  EXPECT_EQ(d.temperature.value, (Temperatures{31, 92, 89, 85, 95}));
  EXPECT_EQ(d.clocks.value, (Clocks{210, 1593, 1410, 1593}));
  EXPECT_EQ(d.power.value, (Power{61000, 400000}));
  EXPECT_EQ(d.utilization.value, (Utilization{0, 0}));
  EXPECT_EQ(d.performance_state.value, 0u);
  expect_issue(d.fan_percent, 3, "passively cooled");
  EXPECT_EQ(d.fan_percent.issue->name, "NVML_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(d.total_energy_mj.value, 81234567u);
  EXPECT_EQ(d.pcie_throughput.value, (PcieThroughput{1024, 2048}));
  EXPECT_EQ(d.encoder_percent.value, 0u);
  EXPECT_EQ(d.decoder_percent.value, 0u);
  EXPECT_EQ(d.memory_temperature_c.value, 33u);
  ASSERT_TRUE(d.nvlink_traffic.has_value());
  EXPECT_EQ(d.nvlink_traffic.value->tx_kib, 5000000u);
  EXPECT_EQ(d.nvlink_traffic.value->rx_kib, 6000000u);
  EXPECT_GT(d.nvlink_traffic.value->timestamp_us, 0);
  EXPECT_EQ(d.processes.value, std::vector<GpuProcess>{});
  // Only an NvmlSession fills these.
  expect_untouched(d.xid, "xid");
  expect_untouched(d.gpm, "gpm");
  expect_untouched(d.nvlink_bandwidth, "nvlink_bandwidth");

  const char* buses[] = {"07", "0F", "47", "4E", "87", "90", "B7", "BD"};
  for (unsigned i = 0; i < 8; ++i) {
    const GpuDevice& g = s.devices[i];
    EXPECT_EQ(g.index, i);
    EXPECT_EQ(g.pci_bus_id, std::string("00000000:") + buses[i] + ":00.0");
    EXPECT_EQ(g.temperature.value->current_c, 31 + i);
    EXPECT_EQ(g.power.value->usage_mw, 61000 + 517 * i);
    EXPECT_EQ(g.serial, "13233210" + std::to_string(12345 + i));
  }
  EXPECT_EQ(s.devices[7].uuid, "GPU-b596bfe9-8aed-1297-0ac9-f6ccb62183c1");
}

// The fake's timeline (tests/fake_nvml/README.md): the device's values follow the fake clock, a
// file the test rewrites; a later stage keeps what it does not change.
TEST(Collector, FakeNvmlTimelineFollowsTheFakeClock) {
  const auto clock = std::filesystem::temp_directory_path() / "gpuhost-fake-nvml-clock";
  platform::ScopedEnv clock_env("GPUHOST_FAKE_NVML_CLOCK", clock.string());
  const auto at = [&](const char* seconds) {
    std::ofstream(clock) << seconds;
    return snapshot_of("a100_input_fixed_at_100s");
  };
  const GpuSnapshot before = at("99.5");
  ASSERT_EQ(before.devices.size(), 1u);
  EXPECT_EQ(before.devices[0].utilization.value, (Utilization{12, 6}));
  const GpuSnapshot after = at("100");
  EXPECT_EQ(after.devices[0].utilization.value, (Utilization{98, 49}));
  EXPECT_EQ(after.devices[0].memory.value->used_bytes, before.devices[0].memory.value->used_bytes * 2);
  EXPECT_EQ(after.devices[0].temperature.value, before.devices[0].temperature.value);  // not in the stage
  EXPECT_EQ(at("not a number").devices[0].utilization.value, (Utilization{12, 6}));    // counts as 0
  std::filesystem::remove(clock);
}

// MIG mode current: each MIG device through its own handle (uuid, name, profile, instance ids,
// memory); the GPU's utilisation is NOT_SUPPORTED, as NVML answers in MIG mode.
TEST(Collector, MigDevicesAreListedWithProfileInstanceAndMemory) {
  const GpuSnapshot s = snapshot_of("a100_80gb_mig_all_balanced");
  ASSERT_EQ(s.devices.size(), 1u);
  const GpuDevice& d = s.devices[0];
  EXPECT_EQ(d.mig.value, (MigState{true, true}));
  expect_issue(d.utilization, 3, "utilization");
  ASSERT_TRUE(d.mig_devices.value) << (d.mig_devices.issue ? d.mig_devices.issue->message : "unattempted");
  const auto& list = *d.mig_devices.value;
  ASSERT_EQ(list.size(), 4u);
  EXPECT_EQ(list[0].uuid, "MIG-6e2fa3b1-5c0d-5b7e-9f41-0a8d2e61c3a7");
  EXPECT_EQ(list[0].name, "NVIDIA A100-SXM4-80GB MIG 3g.40gb");
  EXPECT_EQ(list[0].profile, "3g.40gb");
  EXPECT_EQ(list[0].gpu_instance_id, 2u);
  EXPECT_EQ(list[0].compute_instance_id, 0u);
  ASSERT_TRUE(list[0].memory);
  EXPECT_EQ(list[0].memory->total_bytes, 40192 * k_mib);
  EXPECT_EQ(list[0].memory->used_bytes, 31000 * k_mib);
  std::vector<std::string> profiles;
  for (const auto& m : list) profiles.push_back(m.profile);
  EXPECT_EQ(profiles, (std::vector<std::string>{"3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"}));
  EXPECT_EQ(list[3].slot, 3u);
  EXPECT_EQ(list[3].gpu_instance_id, 10u);
  // Not in MIG mode: not attempted.
  const GpuSnapshot whole = snapshot_of("a100_sxm4_80gb_x8");
  const auto& off = whole.devices[0].mig_devices;
  EXPECT_FALSE(off.value || off.issue);
}

TEST(Collector, NoDriverKeepsNvmlStatus) {
  GpuSnapshot s = snapshot_of("no_driver");
  EXPECT_FALSE(s.available);
  EXPECT_EQ(s.library_path, k_fake_nvml);
  ASSERT_TRUE(s.error);
  EXPECT_EQ(s.error->status, 9);
  EXPECT_EQ(s.error->name, "NVML_ERROR_DRIVER_NOT_LOADED");
  EXPECT_NE(s.error->message.find("kernel driver is not loaded"), std::string::npos);
  EXPECT_TRUE(s.devices.empty());
  EXPECT_TRUE(s.driver_version.empty());
}

TEST(Collector, DriverLibraryMismatchKeepsNvmlStatus) {
  GpuSnapshot s = snapshot_of("driver_mismatch");
  EXPECT_FALSE(s.available);
  ASSERT_TRUE(s.error);
  EXPECT_EQ(s.error->status, 18);
  EXPECT_EQ(s.error->name, "NVML_ERROR_LIB_RM_VERSION_MISMATCH");
  EXPECT_NE(s.error->message.find("reboot"), std::string::npos);
  EXPECT_TRUE(s.devices.empty());
}

TEST(Collector, TeslaT4UnderWddm) {
  GpuSnapshot s = snapshot_of("t4_windows_wddm");
  ASSERT_TRUE(s.available);
  EXPECT_EQ(s.driver_version, "537.13");
  EXPECT_EQ(s.cuda_driver_version, 12020);
  ASSERT_EQ(s.devices.size(), 1u);
  const GpuDevice& d = s.devices[0];
  EXPECT_EQ(d.name, "Tesla T4");
  EXPECT_EQ(d.pci_bus_id, "00000000:00:1E.0");
  EXPECT_EQ(d.pci_device_id, 0x1EB810DEu);
  EXPECT_EQ(d.architecture.value, 6);
  EXPECT_EQ(d.cc_major.value, 7);
  EXPECT_EQ(d.cc_minor.value, 5);
  EXPECT_EQ(d.driver_model.value, (DriverModelState{DriverModel::wddm, DriverModel::wddm}));
  expect_issue(d.persistence_mode, 3, "no persistence mode on Windows");
  EXPECT_EQ(d.virtualization.value, VirtualizationMode::passthrough);
  EXPECT_EQ(d.retired_pages.value, (RetiredPages{0, 0, false}));
  expect_issue(d.remapped_rows, 3, "Turing has no row remapping");
  EXPECT_EQ(d.ecc.value, (EccState{true, true, 0, 0, 3, 0}));
  EXPECT_EQ(d.pcie.value, (PcieLink{1, 3, 3, 16, 16}));
  EXPECT_EQ(d.memory.value, (MemoryState{15360 * k_mib, 422 * k_mib, 15360 * k_mib - 422 * k_mib, 0}));
  EXPECT_EQ(d.temperature.value, (Temperatures{29, 96, 93, 85, std::nullopt}));
  EXPECT_EQ(d.clocks.value, (Clocks{300, 405, 1590, 5001}));
  EXPECT_EQ(d.power.value, (Power{9434, 70000}));
  EXPECT_EQ(d.performance_state.value, 8u);
  expect_issue(d.mig, 3, "no MIG on T4");
  // WDDM: processes are listed without their memory; pid 4412 is in both lists and kept once,
  // as compute.
  EXPECT_EQ(d.processes.value, (std::vector<GpuProcess>{GpuProcess{4412, false, std::nullopt},
                                                        GpuProcess{1208, true, std::nullopt}}));
  EXPECT_EQ(d.decoder_percent.value, 3u);
  expect_issue(d.memory_temperature_c, 3, "GDDR6: no memory temperature field");
  expect_issue(d.nvlink_traffic, 3, "no NVLink on a T4");
}

TEST(Collector, EightBusyH100sReadEveryNewReading) {
  GpuSnapshot s = snapshot_of("eight_h100");
  ASSERT_TRUE(s.available);
  ASSERT_EQ(s.devices.size(), 8u);
  for (unsigned i = 0; i < 8; ++i) {
    SCOPED_TRACE(i);
    const GpuDevice& d = s.devices[i];
    EXPECT_EQ(d.index, i);
    EXPECT_FALSE(d.lost);
    EXPECT_EQ(d.total_energy_mj.value, 912345678901ULL + i * 1000000ULL);
    EXPECT_EQ(d.pcie_throughput.value, (PcieThroughput{1894912 + i, 2150656 + i}));
    EXPECT_EQ(d.memory_temperature_c.value, 62 + i);
    EXPECT_EQ(d.utilization.value, (Utilization{98, 61}));
    EXPECT_EQ(d.processes.value, (std::vector<GpuProcess>{GpuProcess{52001 + i, false, 75 * k_gib}}));
    ASSERT_TRUE(d.nvlink_traffic.has_value());
    EXPECT_EQ(d.nvlink_traffic.value->tx_kib, 9000000000ULL + i);
  }
  // Read in parallel, yet each GPU got its own answers.
  EXPECT_EQ(s.devices[5].pci_bus_id, "00000000:AB:00.0");
  EXPECT_EQ(s.devices[7].uuid, "GPU-c183e579-a6b2-44f5-01d8-7293a4b516d7");
}

TEST(Collector, CallsFailingForOneGpuLeaveTheOthersWhole) {
  GpuSnapshot s = snapshot_of("mid_scrape_error");
  ASSERT_TRUE(s.available);
  ASSERT_EQ(s.devices.size(), 8u);
  const GpuDevice& failing = s.devices[2];
  EXPECT_FALSE(failing.lost);
  expect_issue(failing.power, 999, "power");
  expect_issue(failing.total_energy_mj, 999, "energy");
  expect_issue(failing.memory_temperature_c, 999, "field values");
  expect_issue(failing.nvlink_traffic, 999, "field values");
  expect_issue(failing.processes, 999, "processes");
  expect_issue(failing.pcie_throughput, 4, "PCIe throughput");
  // The rest of that GPU is read.
  EXPECT_EQ(failing.temperature.value->current_c, 57u);
  EXPECT_EQ(failing.utilization.value, (Utilization{98, 61}));

  const GpuDevice& unopened = s.devices[5];
  ASSERT_TRUE(unopened.handle_error);
  EXPECT_EQ(unopened.handle_error->status, 999);
  EXPECT_FALSE(unopened.lost);
  expect_untouched(unopened.power, "power");

  for (unsigned i : {0u, 1u, 3u, 4u, 6u, 7u}) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(s.devices[i].power.has_value());
    EXPECT_TRUE(s.devices[i].processes.has_value());
    EXPECT_TRUE(s.devices[i].memory_temperature_c.has_value());
  }
}

TEST(Collector, LegacyLibraryReadsProcessesThroughTheV1Layout) {
  GpuSnapshot s = snapshot_of("eight_h100", testing::k_fake_nvml_legacy);
  ASSERT_TRUE(s.available);
  EXPECT_EQ(s.devices.at(3).processes.value, (std::vector<GpuProcess>{GpuProcess{52004, false, 75 * k_gib}}));
}

TEST(Collector, H100WithPendingRowRemap) {
  GpuSnapshot s = snapshot_of("h100_pending_row_remap");
  ASSERT_TRUE(s.available);
  EXPECT_EQ(s.driver_version, "550.54.15");
  EXPECT_EQ(s.cuda_driver_version, 12040);
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(s.devices[0].pci_device_id, 0x233010DEu);
  EXPECT_EQ(s.devices[0].remapped_rows.value, (RemappedRows{0, 0, false, false}));
  EXPECT_EQ(s.devices[0].ecc.value, (EccState{true, true, 0, 0, 0, 0}));
  EXPECT_EQ(s.devices[1].pci_bus_id, "00000000:2A:00.0");
  EXPECT_EQ(s.devices[1].remapped_rows.value, (RemappedRows{0, 2, true, false}));
  EXPECT_EQ(s.devices[1].ecc.value, (EccState{true, true, 0, 2, 0, 2}));
  EXPECT_EQ(s.devices[1].architecture.value, 9);
  EXPECT_EQ(s.devices[1].cc_major.value, 9);
  EXPECT_EQ(s.devices[1].pcie.value, (PcieLink{5, 5, 5, 16, 16}));
  EXPECT_EQ(s.devices[1].memory.value,
            (MemoryState{81559 * k_mib, 0, 81559 * k_mib - 579 * k_mib, 579 * k_mib}));
}

TEST(Collector, PcieLinkDegradedUnderLoad) {
  GpuSnapshot s = snapshot_of("pcie_x8_gen3");
  ASSERT_TRUE(s.available);
  ASSERT_EQ(s.devices.size(), 1u);
  const GpuDevice& d = s.devices[0];
  EXPECT_EQ(d.name, "NVIDIA A100-PCIE-40GB");
  EXPECT_EQ(d.pci_device_id, 0x20F110DEu);
  EXPECT_EQ(d.pci_bus_id, "00000000:3B:00.0");
  EXPECT_EQ(d.pcie.value, (PcieLink{3, 4, 4, 8, 16}));
  EXPECT_EQ(d.pcie_replay_counter.value, 37u);
  EXPECT_EQ(d.utilization.value, (Utilization{97, 61}));
  EXPECT_EQ(d.performance_state.value, 0u);
  EXPECT_EQ(d.clocks_event_reasons.value, 0u);
  EXPECT_EQ(d.power.value, (Power{221000, 250000}));
}

TEST(Collector, UnlicensedVgpu) {
  GpuSnapshot s = snapshot_of("vgpu_unlicensed");
  ASSERT_TRUE(s.available);
  ASSERT_EQ(s.devices.size(), 1u);
  const GpuDevice& d = s.devices[0];
  EXPECT_EQ(d.name, "NVIDIA A10-24Q");
  EXPECT_EQ(d.virtualization.value, VirtualizationMode::vgpu);
  ASSERT_TRUE(d.vgpu_license.has_value());
  EXPECT_EQ(*d.vgpu_license, (VgpuLicense{true, false, "NVIDIA RTX Virtual Workstation", "unlicensed", 0}));
  EXPECT_EQ(d.cc_major.value, 8);
  EXPECT_EQ(d.cc_minor.value, 6);
  EXPECT_EQ(d.ecc.value, (EccState{false, false, 0, 0, 0, 0}));
  expect_issue(d.pcie, 3, "no PCIe link inside a vGPU guest");
  expect_issue(d.temperature, 3, "no temperature inside a vGPU guest");
  expect_issue(d.power, 3, "no power inside a vGPU guest");
  expect_issue(d.inforom_valid, 3, "no infoROM inside a vGPU guest");
  EXPECT_EQ(d.memory.value, (MemoryState{24 * k_gib, 1470 * k_mib, 24 * k_gib - 1470 * k_mib, 0}));
}

TEST(Collector, LicensedVgpuWithExpiry) {
  GpuSnapshot s = snapshot_of("vgpu_licensed");
  ASSERT_TRUE(s.available);
  ASSERT_EQ(s.devices.size(), 1u);
  // 2026-01-31 12:00:00 UTC.
  EXPECT_EQ(s.devices[0].vgpu_license.value,
            (VgpuLicense{true, true, "NVIDIA RTX Virtual Workstation", "licensed", 1769860800}));

  // The legacy library reads the _v3 layout, which has no expiry.
  GpuSnapshot legacy = snapshot_of("vgpu_licensed", testing::k_fake_nvml_legacy);
  EXPECT_EQ(legacy.devices.at(0).vgpu_license.value,
            (VgpuLicense{true, true, "NVIDIA RTX Virtual Workstation", "licensed", 0}));
}

TEST(Collector, MigEnabledPendingReset) {
  GpuSnapshot s = snapshot_of("mig_pending_reset");
  ASSERT_TRUE(s.available);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].name, "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(s.devices[0].pci_device_id, 0x20B010DEu);
  EXPECT_EQ(s.devices[0].mig.value, (MigState{false, true}));
}

TEST(Collector, LostGpuStopsBeingQueried) {
  GpuSnapshot s = snapshot_of("gpu_lost");
  ASSERT_TRUE(s.available);
  ASSERT_EQ(s.devices.size(), 3u);

  const GpuDevice& healthy = s.devices[0];
  EXPECT_FALSE(healthy.lost);
  EXPECT_EQ(healthy.temperature.value->current_c, 33u);

  // No handle: nothing else is read.
  const GpuDevice& no_handle = s.devices[1];
  EXPECT_EQ(no_handle.index, 1u);
  EXPECT_TRUE(no_handle.lost);
  ASSERT_TRUE(no_handle.handle_error);
  EXPECT_EQ(no_handle.handle_error->status, 15);
  EXPECT_EQ(no_handle.handle_error->name, "NVML_ERROR_GPU_IS_LOST");
  EXPECT_NE(no_handle.handle_error->message.find("Xid 79"), std::string::npos);
  EXPECT_TRUE(no_handle.name.empty());
  EXPECT_TRUE(no_handle.uuid.empty());
  expect_untouched(no_handle.memory, "memory");
  expect_untouched(no_handle.temperature, "temperature");

  // Lost at the memory query: identity read before it stays, nothing after it is read.
  const GpuDevice& lost = s.devices[2];
  EXPECT_TRUE(lost.lost);
  EXPECT_FALSE(lost.handle_error);
  EXPECT_EQ(lost.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(lost.uuid, "GPU-a6a7081c-b2fb-3be3-566a-4affc52694ec");
  EXPECT_EQ(lost.pci_bus_id, "00000000:47:00.0");
  EXPECT_EQ(lost.cc_major.value, 8);
  EXPECT_EQ(lost.inforom_valid.value, true);
  expect_issue(lost.memory, 15, "memory");
  expect_issue(lost.ecc, 15, "ecc");
  expect_issue(lost.remapped_rows, 15, "remapped rows");
  expect_issue(lost.pcie, 15, "pcie");
  expect_issue(lost.persistence_mode, 15, "persistence");
  expect_issue(lost.vgpu_license, 15, "licence");
  expect_issue(lost.temperature, 15, "temperature (the scenario holds 44 C)");
  expect_issue(lost.power, 15, "power");
  expect_issue(lost.fan_percent, 15, "fan");
  expect_issue(lost.processes, 15, "processes");
  expect_issue(lost.total_energy_mj, 15, "energy");
  expect_issue(lost.memory_temperature_c, 15, "field values");
}

TEST(Collector, ThermalSlowdown) {
  GpuSnapshot s = snapshot_of("thermal_slowdown");
  ASSERT_TRUE(s.available);
  ASSERT_EQ(s.devices.size(), 1u);
  const GpuDevice& d = s.devices[0];
  EXPECT_EQ(d.name, "NVIDIA L4");
  EXPECT_EQ(d.architecture.value, 8);
  EXPECT_EQ(d.cc_minor.value, 9);
  EXPECT_EQ(d.clocks_event_reasons.value,
            clocks_event::sw_thermal_slowdown | clocks_event::hw_thermal_slowdown);
  EXPECT_EQ(clocks_event_reason_names(*d.clocks_event_reasons),
            (std::vector<std::string>{"sw_thermal_slowdown", "hw_thermal_slowdown"}));
  EXPECT_EQ(d.temperature.value, (Temperatures{90, 92, 87, 85, 90}));
  EXPECT_GE(d.temperature.value->current_c, *d.temperature.value->slowdown_c);
  EXPECT_EQ(d.clocks.value, (Clocks{1005, 6251, 2040, 6251}));
  EXPECT_EQ(d.utilization.value, (Utilization{100, 42}));
}

TEST(Collector, MalformedScenarioFailsInitCleanly) {
  GpuSnapshot s = snapshot_of("malformed");
  EXPECT_FALSE(s.available);
  ASSERT_TRUE(s.error);
  EXPECT_EQ(s.error->status, 999);
  EXPECT_EQ(s.error->name, "NVML_ERROR_UNKNOWN");
  // The library's own text is appended for NVML_ERROR_UNKNOWN; the fake puts its reason there.
  EXPECT_NE(s.error->message.find("fake NVML: scenario"), std::string::npos) << s.error->message;
}

TEST(Collector, FakeNvmlTimelineOutOfOrderFailsInitWithTheReason) {
  const auto path = std::filesystem::temp_directory_path() / "gpuhost-fake-nvml-bad-timeline.json";
  std::ofstream(path) << R"({"devices": [{"name": "x", "timeline": [{"at_s": 5}, {"at_s": 1}]}]})";
  platform::ScopedEnv scenario(testing::k_scenario_env, path.string());
  platform::ScopedEnv library(k_nvml_library_env, k_fake_nvml);
  const GpuSnapshot s = take_snapshot();
  EXPECT_FALSE(s.available);
  ASSERT_TRUE(s.error);
  EXPECT_NE(s.error->message.find("device 0: each \"timeline\" entry needs \"at_s\""), std::string::npos)
      << s.error->message;
  std::filesystem::remove(path);
}

TEST(Collector, MissingScenarioFileFailsInitCleanly) {
  GpuSnapshot s = snapshot_of("does_not_exist");
  EXPECT_FALSE(s.available);
  ASSERT_TRUE(s.error);
  EXPECT_EQ(s.error->status, 999);
  EXPECT_NE(s.error->message.find("cannot open scenario"), std::string::npos) << s.error->message;
}

}  // namespace
}  // namespace gpuhost::gpu
