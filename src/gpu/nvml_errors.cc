#include "gpu/nvml_errors.h"

#include <array>

namespace gpuhost::gpu {
namespace {

// Codes and names: nvml.h nvmlReturn_enum (repo NVIDIA/DCGM sdk/nvidia/nvml/dcgm_nvml.h). The
// messages are ours; the advice for 9, 15 and 18 follows shared/research/01 §7 (NVIDIA's Xid
// catalog for Xid 79, the driver/library mismatch after an upgrade without reboot).
constexpr std::array<NvmlErrorInfo, 31> k_errors{{
    {0, "NVML_SUCCESS", "Success."},
    {1, "NVML_ERROR_UNINITIALIZED",
     "NVML was called before it was initialised; this is a bug in gpuhost, please report it."},
    {2, "NVML_ERROR_INVALID_ARGUMENT",
     "NVML rejected an argument: a device handle that is no longer valid, or a bug in gpuhost."},
    {3, "NVML_ERROR_NOT_SUPPORTED",
     "Not supported by this GPU, driver or configuration (for example under WDDM, with MIG enabled, "
     "inside a vGPU VM, or on a consumer GPU)."},
    {4, "NVML_ERROR_NO_PERMISSION",
     "Permission denied: this query needs root or Administrator rights, or access to the GPU device "
     "nodes (/dev/nvidia*) is restricted. Run as an administrator or check the device permissions "
     "and the container's GPU mounts."},
    {5, "NVML_ERROR_ALREADY_INITIALIZED", "NVML was already initialised (a deprecated code; harmless)."},
    {6, "NVML_ERROR_NOT_FOUND", "NVML could not find the requested object."},
    {7, "NVML_ERROR_INSUFFICIENT_SIZE",
     "The buffer given to NVML was too small; gpuhost asks again with the size NVML reports, so "
     "seeing this means the value kept growing between calls."},
    {8, "NVML_ERROR_INSUFFICIENT_POWER",
     "The GPU's external power cables are not properly attached: power the host off, reseat the "
     "GPU's power connectors and check the power supply."},
    {9, "NVML_ERROR_DRIVER_NOT_LOADED",
     "The NVIDIA kernel driver is not loaded. On Linux check `lsmod | grep nvidia`, the kernel log "
     "for NVRM errors, Secure Boot module signing and whether nouveau holds the GPU, then reinstall "
     "the driver or reboot. On Windows check the GPU's status in Device Manager."},
    {10, "NVML_ERROR_TIMEOUT", "An NVML call timed out."},
    {11, "NVML_ERROR_IRQ_ISSUE",
     "The NVIDIA kernel driver detected an interrupt problem with a GPU. Check the kernel log; in a "
     "VM check the hypervisor's interrupt (MSI) passthrough; reboot if it persists."},
    {12, "NVML_ERROR_LIBRARY_NOT_FOUND",
     "The NVML library (libnvidia-ml.so.1 / nvml.dll) could not be found or loaded: no NVIDIA "
     "driver is installed, or its user-space libraries are not where the loader looks."},
    {13, "NVML_ERROR_FUNCTION_NOT_FOUND",
     "The installed NVIDIA driver's NVML does not provide this function (the driver predates the "
     "feature); a newer driver reports it."},
    {14, "NVML_ERROR_CORRUPTED_INFOROM",
     "The GPU's infoROM is corrupted, so ECC and other stored counters cannot be trusted. Contact "
     "the hardware or cloud provider: this GPU is a replacement candidate."},
    {15, "NVML_ERROR_GPU_IS_LOST",
     "The GPU has fallen off the bus or is otherwise inaccessible (Xid 79). Drain the host, then "
     "reset the GPU or reboot; if it happens again, have power, cooling and PCIe seating checked."},
    {16, "NVML_ERROR_RESET_REQUIRED",
     "The GPU needs a reset before it can be used again: stop the processes using it and run "
     "`nvidia-smi -r -i <index>`, or reboot."},
    {17, "NVML_ERROR_OPERATING_SYSTEM",
     "The operating system or a cgroup blocked access to the GPU's control device (in a container, "
     "check that the GPU was passed in with --gpus or the device cgroup rules)."},
    {18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
     "The NVML library and the loaded kernel driver are different versions, typically after a "
     "driver upgrade without a reboot. Reboot, or unload and reload the nvidia kernel modules while "
     "the GPUs are idle."},
    {19, "NVML_ERROR_IN_USE", "The GPU is in use, so the operation cannot be performed now."},
    {20, "NVML_ERROR_MEMORY", "NVML ran out of memory."},
    {21, "NVML_ERROR_NO_DATA", "NVML has no data for this yet."},
    {22, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", "The vGPU operation is not available because ECC is enabled."},
    {23, "NVML_ERROR_INSUFFICIENT_RESOURCES", "The driver ran out of a critical resource other than memory."},
    {24, "NVML_ERROR_FREQ_NOT_SUPPORTED", "The requested clock frequency is not supported."},
    {25, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
     "The driver does not accept the structure version gpuhost passed (the driver is older or newer "
     "than this call expects)."},
    {26, "NVML_ERROR_DEPRECATED", "The driver no longer provides this function (deprecated)."},
    {27, "NVML_ERROR_NOT_READY", "The system is not ready for this request yet; try again shortly."},
    {28, "NVML_ERROR_GPU_NOT_FOUND", "NVML found no GPUs."},
    {29, "NVML_ERROR_INVALID_STATE", "The GPU or resource is not in the right state for this request."},
    {999, "NVML_ERROR_UNKNOWN",
     "The NVIDIA driver reported an internal error; check the kernel log (or Windows event log) "
     "for Xid errors."},
}};

}  // namespace

std::span<const NvmlErrorInfo> nvml_error_table() {
  return k_errors;
}

const NvmlErrorInfo* find_nvml_error(int status) {
  for (const auto& e : k_errors)
    if (e.status == status) return &e;
  return nullptr;
}

std::string nvml_error_name(int status) {
  if (const auto* e = find_nvml_error(status)) return e->name;
  return "NVML_RETURN_" + std::to_string(status);
}

NvmlIssue make_nvml_issue(int status, std::string_view library_text) {
  NvmlIssue issue;
  issue.status = status;
  const auto* known = find_nvml_error(status);
  issue.name = known ? known->name : nvml_error_name(status);
  issue.message = known ? known->message
                        : "The NVIDIA driver returned status " + std::to_string(status) +
                              ", which this gpuhost does not know (the driver is newer).";
  bool append = !known || status == 999;
  if (append && !library_text.empty()) issue.message += " NVML says: \"" + std::string(library_text) + "\".";
  return issue;
}

}  // namespace gpuhost::gpu
