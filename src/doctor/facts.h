#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "gpu/snapshot.h"
#include "platform/system_info.h"

namespace gpuhost::doctor {

// Everything `doctor` observed on a host, before any judgement. Rules read only this (never the
// OS), so a report saved on another host can be judged again here (`doctor --from`).
// Optional fields are empty when the value could not be read; `*_error` fields then say why.

struct DiskFacts {
  std::string role;  // "working directory", "temp directory"
  std::string path;
  std::uint64_t capacity_bytes = 0;
  std::uint64_t available_bytes = 0;
  std::string error;
};

struct CudaToolkit {
  std::string path;     // root: /usr/local/cuda-12.2, C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v12.2
  std::string version;  // "12.2.140" from version.json / version.txt / nvcc
  std::string found_by; // "CUDA_PATH", "CUDA_PATH_V12_2", "/usr/local/cuda-12.2", "nvcc on PATH"
};

struct CudnnInstall {
  std::string path;     // the header or library that gave the version
  std::string version;  // "8.9.7"
};

struct CudaFacts {
  std::vector<CudaToolkit> toolkits;
  std::string nvcc_on_path;  // resolved path of the first nvcc on PATH, if any
  std::vector<CudnnInstall> cudnn;
  // Environment variables that are set and known to change or break CUDA (name, value).
  std::vector<std::pair<std::string, std::string>> risky_environment;
};

struct TorchFacts {
  bool installed = false;
  bool imported = false;               // the probe imported torch (else: read from version.py only)
  std::string version;                 // "2.1.0+cu121"
  std::string cuda_build;              // torch.version.cuda, empty for a CPU-only build
  std::string hip_build;               // torch.version.hip (ROCm builds)
  bool cuda_available = false;
  std::string cuda_unavailable_reason; // warning text torch gave, if any
  std::vector<std::string> arch_list;  // compiled arch flags: sm_80, compute_90, ...
  std::string cudnn_version;           // "8907"
  int device_count = 0;
  std::vector<std::string> devices;    // "NVIDIA A100-SXM4-80GB (8.0)"
  std::string error;                   // import failed: the exception text
};

struct TensorflowFacts {
  bool installed = false;
  bool imported = false;
  std::string version;
  bool built_with_cuda = false;
  std::string cuda_build;
  std::string cudnn_build;
  std::vector<std::string> gpus;
  std::string error;
};

struct PythonFacts {
  std::string interpreter;  // as found (PATH entry or --python)
  std::string executable;   // sys.executable reported by the interpreter
  std::string version;      // "3.11.2"
  std::string platform;     // sys.platform
  std::string found_by;     // "PATH", "--python"
  bool probed = false;
  bool timed_out = false;
  std::string probe_error;  // crash, non-JSON output, ...
  TorchFacts torch;
  TensorflowFacts tensorflow;
  std::string tensorflow_gpu_version;  // the obsolete tensorflow-gpu distribution, if installed
  // PEP 668: the interpreter's stdlib holds EXTERNALLY-MANAGED and it is not a venv, so pip
  // refuses to install into it (Debian 12's /usr/bin/python3).
  bool externally_managed = false;
  bool in_venv = false;  // sys.prefix != sys.base_prefix
};

// A DWORD read from the registry, or why not ("absent" when the value does not exist).
struct RegistryValue {
  std::optional<std::uint32_t> value;
  std::string error;  // "absent", "access denied", ...
};

struct WindowsSettings {
  RegistryValue tdr_level;
  RegistryValue tdr_delay;
  RegistryValue tdr_ddi_delay;
  RegistryValue hiberboot_enabled;       // Fast Startup
  RegistryValue rdp_hardware_gpu;        // bEnumerateHWBeforeSW policy
  RegistryValue long_paths_enabled;
  std::uint64_t page_file_bytes = 0;     // commit limit above physical RAM
  bool page_file_known = false;
};

struct LinuxSettings {
  std::optional<std::uint64_t> shm_bytes;  // /dev/shm size
  std::optional<std::uint64_t> open_files_soft;
  std::optional<std::uint64_t> open_files_hard;
  bool persistenced_running = false;
  bool persistenced_known = false;
  bool in_container = false;
  std::vector<platform::PciDevice> pci_display_devices;
  std::string pci_error;
  std::vector<std::string> xid_lines;  // kernel log lines with "NVRM: Xid"
  std::string kernel_log_error;        // why the log could not be read
  bool kernel_log_read = false;
};

struct WindowsDevices {
  std::vector<platform::PciDevice> display_devices;  // with CM problem codes
  std::string error;
};

struct SecurityFacts {
  std::string firewall_state;       // "on", "off", "unknown"
  std::vector<std::string> firewall_evidence;
  std::string encryption_state;     // "encrypted", "not encrypted", "unknown"
  std::vector<std::string> encryption_evidence;
  std::vector<platform::ListeningSocket> listening;
  std::string listening_error;
  // UEFI Secure Boot: "on", "off" (also a BIOS boot), "unknown". Unsigned kernel modules (a DKMS
  // driver build) do not load while it is on.
  std::string secure_boot = "unknown";
  std::string secure_boot_evidence;
};

struct HostFacts {
  std::string collected_at;  // RFC 3339 UTC
  std::string gpuhost_version;
  platform::SystemInfo system;
  std::vector<DiskFacts> disks;
  gpu::GpuSnapshot gpu;
  CudaFacts cuda;
  std::vector<PythonFacts> pythons;
  bool python_skipped = false;  // --no-python
  bool python_full_probe = false;  // --full-probe: frameworks imported even where it cannot matter
  WindowsSettings windows;
  WindowsDevices windows_devices;
  LinuxSettings linux;
  SecurityFacts security;
  std::vector<std::pair<std::string, std::string>> environment;  // CUDA/NVIDIA/torch variables only

  [[nodiscard]] bool is_windows() const { return system.os.family == platform::OsFamily::windows; }
};

[[nodiscard]] json::Value to_json(const HostFacts& facts);
// Reads one interpreter's facts (the `pythons[i]` object, which is also what the probe script
// prints); fields absent from `value` are left as they are. `where` names it in errors.
[[nodiscard]] Result<void> python_facts_from_json(const json::Value& value, std::string where, PythonFacts& out);
// Lenient about missing fields, strict about wrong types (parse_error naming the field).
[[nodiscard]] Result<HostFacts> facts_from_json(const json::Value& value);

}  // namespace gpuhost::doctor
