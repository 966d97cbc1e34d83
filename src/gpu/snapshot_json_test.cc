#include <gtest/gtest.h>

#include "base/json.h"
#include "gpu/fake_nvml_test_support.h"
#include "gpu/nvml_session.h"
#include "gpu/snapshot.h"

namespace gpuhost::gpu {
namespace {

using testing::ScopedEnv;
using testing::snapshot_of;

GpuSnapshot round_trip(const GpuSnapshot& snapshot) {
  std::string text = json::dump(to_json(snapshot), 2);
  auto parsed = json::parse(text);
  EXPECT_TRUE(parsed) << text;
  if (!parsed) return {};
  auto back = snapshot_from_json(*parsed);
  EXPECT_TRUE(back) << back.error().message;
  return back ? *back : GpuSnapshot{};
}

TEST(SnapshotJson, EveryScenarioRoundTrips) {
  for (const char* scenario : testing::k_scenarios) {
    SCOPED_TRACE(scenario);
    GpuSnapshot s = snapshot_of(scenario);
    EXPECT_TRUE(round_trip(s) == s) << json::dump(to_json(s), 2);
  }
  for (const char* library : {testing::k_fake_nvml_minimal, testing::k_fake_nvml_legacy}) {
    SCOPED_TRACE(library);
    GpuSnapshot s = snapshot_of("vgpu_unlicensed", library);
    EXPECT_TRUE(round_trip(s) == s) << json::dump(to_json(s), 2);
  }
}

TEST(SnapshotJson, EveryFieldRoundTrips) {
  // Values unlike any scenario's, so a field that is written but not read (or the reverse) shows.
  GpuSnapshot s;
  s.available = true;
  s.library_path = "C:\\Windows\\System32\\nvml.dll";
  s.missing_symbols = {"nvmlDeviceGetRemappedRows"};
  s.driver_version = "581.15";
  s.nvml_version = "13.581.15";
  s.cuda_driver_version = 13000;
  s.count_error = NvmlIssue{999, "NVML_ERROR_UNKNOWN", "x"};
  GpuDevice d;
  d.index = 5;
  d.lost = true;
  d.name = "NVIDIA RTX PRO 6000";
  d.uuid = "GPU-00000000-1111-2222-3333-444444444444";
  d.serial = "123";
  d.pci_bus_id = "00000001:C1:00.0";
  d.pci_device_id = 0xFFFF10DE;
  d.architecture.value = 10;
  d.cc_major.value = 12;
  d.cc_minor.issue = NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "m"};
  d.vbios_version = "98.02";
  d.inforom_valid.value = false;
  d.memory.value = MemoryState{1, 2, 3, 4};
  d.ecc.value = EccState{true, false, 5, 6, 7, 8};
  d.retired_pages.value = RetiredPages{9, 10, true};
  d.remapped_rows.value = RemappedRows{11, 12, true, true};
  d.pcie.value = PcieLink{1, 2, 3, 4, 5};
  d.pcie_replay_counter.value = 13;
  d.persistence_mode.value = false;
  d.compute_mode.value = 3;
  d.driver_model.value = DriverModelState{DriverModel::mcdm, DriverModel::tcc};
  d.mig.value = MigState{true, false};
  d.virtualization.value = VirtualizationMode::host_vsga;
  d.vgpu_license.value = VgpuLicense{true, true, "NVIDIA Virtual Compute Server", "licensed", 1767225600};
  d.clocks_event_reasons.value = 0x10000000000ULL | clocks_event::sw_power_cap;
  d.temperature.value = Temperatures{70, std::nullopt, 88, std::nullopt, 95};
  d.clocks.value = Clocks{1, 2, 3, 4};
  d.power.value = Power{5, 6};
  d.utilization.value = Utilization{7, 8};
  d.performance_state.value = 32;
  d.fan_percent.issue = NvmlIssue{15, "NVML_ERROR_GPU_IS_LOST", "lost"};
  d.processes.value = {GpuProcess{4242, false, 123456789}, GpuProcess{77, true, std::nullopt}};
  d.total_energy_mj.value = 9007199254740993ULL;  // above 2^53: must stay an exact integer
  d.pcie_throughput.value = PcieThroughput{14, 15};
  d.encoder_percent.value = 16;
  d.decoder_percent.issue = NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "m"};
  d.memory_temperature_c.value = 17;
  d.nvlink_traffic.value = NvlinkTraffic{18, 19, 1750000000123456};
  d.xid.value = XidState{79, 3, 1767225601};
  GpmActivity gpm;
  gpm.interval_s = 15.25;
  gpm.graphics_util_percent.value = 20.5;
  gpm.tensor_util_percent.value = 0.125;
  gpm.dram_bw_util_percent.issue = NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "m"};
  gpm.pcie_tx_mib_per_s.value = 1e9;
  gpm.pcie_rx_mib_per_s.value = 0;
  d.gpm.value = gpm;
  d.nvlink_bandwidth.value = 400000.5;
  s.devices.push_back(d);
  GpuDevice no_handle;
  no_handle.index = 6;
  no_handle.handle_error = NvmlIssue{15, "NVML_ERROR_GPU_IS_LOST", "lost"};
  s.devices.push_back(no_handle);
  EXPECT_TRUE(round_trip(s) == s) << json::dump(to_json(s), 2);
}

TEST(SnapshotJson, SessionReadingsRoundTrip) {
  for (const char* scenario : {"eight_h100", "h100_mig_instances_busy"}) {
    SCOPED_TRACE(scenario);
    ScopedEnv scenario_env(testing::k_scenario_env, testing::scenario_path(scenario));
    ScopedEnv library(k_nvml_library_env, testing::k_fake_nvml);
    NvmlSession session;
    GpuSnapshot first = session.collect();   // GPM and NVLink rate: NO_DATA issues
    GpuSnapshot second = session.collect();  // values
    ASSERT_TRUE(second.devices.at(0).gpm.has_value());
    EXPECT_TRUE(round_trip(first) == first) << json::dump(to_json(first), 2);
    EXPECT_TRUE(round_trip(second) == second) << json::dump(to_json(second), 2);
  }
  // A MIG instance's GPM is written under its MIG device.
  ScopedEnv scenario_env(testing::k_scenario_env, testing::scenario_path("h100_mig_instances_busy"));
  ScopedEnv library(k_nvml_library_env, testing::k_fake_nvml);
  NvmlSession session;
  (void)session.collect();
  const json::Value v = to_json(session.collect());
  const json::Value& mig = v.find("devices")->items().at(0).find("mig_devices")->items().at(0);
  EXPECT_EQ(mig.find("gpm")->get_number("tensor_util_percent"), 55.5);
  EXPECT_EQ(mig.find("gpm")->find("pcie_tx_mib_per_s")->find("unavailable")->get_int("status"), 3);
}

TEST(SnapshotJson, DocumentedShape) {
  GpuSnapshot s = snapshot_of("t4_windows_wddm");
  json::Value v = to_json(s);
  EXPECT_EQ(v.get_int("schema"), 1);
  const json::Value& d = v.find("devices")->items()[0];
  EXPECT_EQ(d.get_string("pci_device_id"), "0x1EB810DE");
  EXPECT_EQ(d.find("driver_model")->get_string("current"), "WDDM");
  EXPECT_EQ(d.get_string("virtualization"), "passthrough");
  const json::Value* persistence = d.find("persistence_mode");
  ASSERT_TRUE(persistence && persistence->is_object());
  ASSERT_EQ(persistence->size(), 1u);
  const json::Value* unavailable = persistence->find("unavailable");
  ASSERT_TRUE(unavailable);
  EXPECT_EQ(unavailable->get_int("status"), 3);
  EXPECT_EQ(unavailable->get_string("name"), "NVML_ERROR_NOT_SUPPORTED");
  EXPECT_FALSE(unavailable->get_string("message").empty());
  EXPECT_EQ(d.find("clocks_event_reasons")->get_int("mask"), 1);
  EXPECT_EQ(d.find("clocks_event_reasons")->find("names")->items()[0].as_string(), "gpu_idle");
  EXPECT_TRUE(d.find("temperature")->find("memory_max_c")->is_null());
  EXPECT_EQ(d.find("memory")->get_int("total_bytes"), 16106127360);
  // WDDM: processes are listed, their memory is null (NVML_VALUE_NOT_AVAILABLE).
  const json::Value* processes = d.find("processes");
  ASSERT_TRUE(processes && processes->is_array());
  ASSERT_EQ(processes->items().size(), 2u);
  EXPECT_EQ(processes->items()[0].get_int("pid"), 4412);
  EXPECT_TRUE(processes->items()[0].find("used_memory_bytes")->is_null());
  EXPECT_TRUE(processes->items()[1].get_bool("graphics"));
  // One-off snapshots never attempt the session readings.
  EXPECT_TRUE(d.find("xid")->is_null());
  EXPECT_TRUE(d.find("gpm")->is_null());
}

TEST(SnapshotJson, MissingFieldsAreDefaults) {
  auto s = snapshot_from_json(*json::parse(R"({"available": false, "devices": [{"name": "Tesla T4"}]})"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_FALSE(s->available);
  ASSERT_EQ(s->devices.size(), 1u);
  EXPECT_EQ(s->devices[0].name, "Tesla T4");
  EXPECT_FALSE(s->devices[0].memory.has_value());
  EXPECT_FALSE(s->devices[0].memory.issue);
}

TEST(SnapshotJson, WrongTypesNameTheField) {
  auto bad_memory =
      snapshot_from_json(*json::parse(R"({"devices": [{}, {"memory": {"total_bytes": "80GB"}}]})"));
  ASSERT_FALSE(bad_memory);
  EXPECT_EQ(bad_memory.error().code, ErrorCode::parse_error);
  EXPECT_NE(bad_memory.error().message.find("gpu.devices[1].memory.total_bytes"), std::string::npos)
      << bad_memory.error().message;

  auto bad_reading = snapshot_from_json(*json::parse(R"({"devices": [{"persistence_mode": "on"}]})"));
  ASSERT_FALSE(bad_reading);
  EXPECT_NE(bad_reading.error().message.find("gpu.devices[0].persistence_mode"), std::string::npos);

  auto bad_issue =
      snapshot_from_json(*json::parse(R"({"devices": [{"fan_percent": {"unavailable": {"status": "3"}}}]})"));
  ASSERT_FALSE(bad_issue);
  EXPECT_NE(bad_issue.error().message.find("gpu.devices[0].fan_percent.unavailable.status"),
            std::string::npos)
      << bad_issue.error().message;

  EXPECT_FALSE(snapshot_from_json(*json::parse(R"([1, 2])")));
  EXPECT_FALSE(snapshot_from_json(*json::parse(R"({"devices": {}})")));
  EXPECT_FALSE(snapshot_from_json(*json::parse(R"({"devices": [{"driver_model": {"current": "XDDM"}}]})")));
  EXPECT_FALSE(snapshot_from_json(*json::parse(R"({"devices": [{"pci_device_id": "0xZZ"}]})")));
}

TEST(SnapshotNames, ClocksEventReasons) {
  EXPECT_TRUE(clocks_event_reason_names(0).empty());
  EXPECT_EQ(
      clocks_event_reason_names(0x1FF),
      (std::vector<std::string>{"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                                "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
                                "hw_power_brake_slowdown", "display_clock_setting"}));
  EXPECT_EQ(clocks_event_reason_names(0x204), (std::vector<std::string>{"sw_power_cap", "0x200"}));
}

TEST(SnapshotNames, DriverAndVirtualizationModes) {
  EXPECT_STREQ(driver_model_name(DriverModel::wddm), "WDDM");
  EXPECT_STREQ(driver_model_name(DriverModel::tcc), "TCC");
  EXPECT_STREQ(driver_model_name(DriverModel::mcdm), "MCDM");
  EXPECT_STREQ(virtualization_mode_name(VirtualizationMode::none), "none");
  EXPECT_STREQ(virtualization_mode_name(VirtualizationMode::vgpu), "vgpu");
  EXPECT_STREQ(virtualization_mode_name(static_cast<VirtualizationMode>(9)), "unknown");
}

}  // namespace
}  // namespace gpuhost::gpu
