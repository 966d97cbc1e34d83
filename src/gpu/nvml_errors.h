#pragma once

#include <span>
#include <string>
#include <string_view>

#include "gpu/snapshot.h"

namespace gpuhost::gpu {

// One nvmlReturn_t code: its name in nvml.h and gpuhost's own explanation (what it means and,
// where we know it, what to do about it).
struct NvmlErrorInfo {
  int status;
  const char* name;     // "NVML_ERROR_NOT_SUPPORTED"
  const char* message;  // a sentence or two, no trailing newline
};

// Every code of nvml.h's nvmlReturn_t (0..29 and 999), in ascending order. Static storage.
[[nodiscard]] std::span<const NvmlErrorInfo> nvml_error_table();

// The table entry for `status`, or nullptr for a code gpuhost does not know (a newer driver).
[[nodiscard]] const NvmlErrorInfo* find_nvml_error(int status);

// "NVML_ERROR_GPU_IS_LOST"; for an unknown code "NVML_RETURN_<n>".
[[nodiscard]] std::string nvml_error_name(int status);

// Builds the issue for a failed call. `library_text` is what the library's nvmlErrorString said;
// it is appended only where it can add something: for codes gpuhost does not know and for
// NVML_ERROR_UNKNOWN (999), whose meaning is entirely in the library's text.
[[nodiscard]] NvmlIssue make_nvml_issue(int status, std::string_view library_text = {});

}  // namespace gpuhost::gpu
