#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/facts.h"

namespace gpuhost::doctor {

struct CollectOptions {
  bool probe_python = true;
  // Interpreters or environments (venv / conda prefix) named with --python, probed in addition
  // to those on PATH.
  std::vector<std::string> extra_pythons;
  // Per interpreter; a hung interpreter is killed with its children at this deadline.
  std::chrono::milliseconds python_timeout{std::chrono::seconds(60)};
  // Import torch/tensorflow in every interpreter. Off: they are imported only on hosts with an
  // NVIDIA GPU and a GPU build, where cuda.is_available() and the device list can change a
  // verdict; elsewhere versions and build facts are read from the installed files (fast).
  bool full_python_probe = false;
  std::string working_directory;  // default: the current directory
  // Told what is being looked at, for a progress line. May be empty. Called from worker threads,
  // one at a time.
  std::function<void(std::string_view)> progress;
};

// Observes this host: every layer `doctor` judges. Never fails: what cannot be read is recorded
// as such in the facts. Takes about as long as the slowest Python interpreter's import of torch
// and tensorflow when they must be imported (see full_python_probe); milliseconds otherwise.
[[nodiscard]] HostFacts collect_facts(const CollectOptions& options);

// The parts, for tests and for other commands that need one layer.
void collect_cuda(HostFacts& facts);
// `gpu_host`: an NVIDIA GPU is present, so GPU builds are imported and asked about CUDA.
void collect_pythons(HostFacts& facts, const CollectOptions& options, bool gpu_host);
void collect_os_settings(HostFacts& facts);
void collect_security(HostFacts& facts);

// The Python program run in each interpreter; prints one line "GPUHOST_PROBE <json>".
[[nodiscard]] std::string_view python_probe_script();
// Parses an interpreter's output into `facts` (stdout may hold other lines before ours).
[[nodiscard]] Result<void> parse_python_probe(std::string_view output, PythonFacts& facts);

// The DCGM list of CUDA-affecting variables (research/01 §1.2) plus CUDA_VISIBLE_DEVICES.
[[nodiscard]] const std::vector<std::string>& risky_cuda_variables();

// Reads "CUDA Version 11.8.89" (version.txt) or {"cuda": {"version": "12.2.140"}} (version.json)
// or nvcc's "release 12.2, V12.2.140"; empty when none of these.
[[nodiscard]] std::string parse_cuda_version_text(std::string_view text);
// Reads CUDNN_MAJOR/MINOR/PATCHLEVEL out of cudnn_version.h (or cudnn.h before 8.0).
[[nodiscard]] std::string parse_cudnn_header(std::string_view text);
// Kernel-log lines that report an NVIDIA Xid ("NVRM: Xid (PCI:0000:3b:00): 79, ...").
[[nodiscard]] std::vector<std::string> xid_lines(std::string_view kernel_log);

}  // namespace gpuhost::doctor
