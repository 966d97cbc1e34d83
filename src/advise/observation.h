#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuhost::advise {

// What the advisor saw of one GPU over the observed window, from NVML samples taken during it.
// Every value is empty where NVML could not give it (an older GPU, a vGPU guest, no GPM before
// Hopper).
struct GpuWindow {
  unsigned index = 0;
  std::string name;
  std::optional<int> cc_major;
  unsigned samples = 0;
  std::optional<double> busy_percent;       // mean nvmlDeviceGetUtilizationRates().gpu
  std::optional<double> memory_used_share;  // highest used / total
  // Shares of the samples whose clock-event reasons had a thermal (0x20, 0x40) or power (0x4,
  // 0x80) bit set; samples with GpuIdle (0x1) do not count (an idle GPU drops its clocks).
  std::optional<double> thermal_share;
  std::optional<double> power_share;
  std::optional<double> tensor_percent;     // mean GPM ANY_TENSOR_UTIL (Hopper and later)
  std::optional<double> graphics_percent;   // mean GPM GRAPHICS_UTIL
  std::optional<double> pcie_rx_mib_per_s;  // mean GPM PCIE_RX_PER_SEC
};

// What the trainer's process group did over the window (Linux /proc).
struct HostWindow {
  double seconds = 0;
  // The busiest thread that is not a DataLoader worker (the Python main thread, as a rule): the
  // CPU it used, in cores (1.0 = one core all the time), and the share of the window it was
  // running or runnable (waiting for a CPU). A thread that always has work is busy ~1.0 even
  // when other load on the host leaves it half a core.
  double main_thread_cores = 0;
  double main_thread_busy = 0;
  std::string main_thread_name;
  unsigned loader_workers = 0;                 // DataLoader worker processes
  double loader_cores_mean = 0;                // their mean CPU, in cores each
  double loader_busy_mean = 0;                 // their mean running-or-runnable share
  bool pin_thread = false;                     // a pt_data_pin thread: pin_memory=True
  unsigned cpus = 1;                           // the host's logical CPUs
  std::optional<double> read_mib_per_s;        // storage reads of the group
  std::optional<double> major_faults_per_s;    // page faults that read the disk (memmap)
  std::optional<double> io_pressure_percent;   // PSI io "some" avg10, host-wide
  std::optional<double> cpu_pressure_percent;  // PSI cpu "some" avg10
  std::optional<double> swap_in_pages_per_s;   // host-wide
};

struct Observation {
  std::vector<GpuWindow> gpus;
  std::optional<HostWindow> host;  // empty where the trainer's threads cannot be read (Windows)
  std::string host_unseen;         // why, when host is empty
  unsigned local_processes = 1;    // trainer processes on this host (torchrun's nproc_per_node)
};

}  // namespace gpuhost::advise
