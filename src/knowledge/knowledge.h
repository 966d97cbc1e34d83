#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/version.h"
#include "knowledge/arch_support.h"
#include "knowledge/common.h"
#include "knowledge/compute_capability.h"
#include "knowledge/cuda_drivers.h"
#include "knowledge/cudnn.h"
#include "knowledge/gpus.h"
#include "knowledge/pytorch.h"
#include "knowledge/tensorflow.h"

namespace gpuhost::knowledge {

// The environment variable naming an override directory; the CLI reads it (and --knowledge DIR)
// and passes the paths in LoadOptions. The library itself reads no environment.
inline constexpr std::string_view k_knowledge_dir_env = "GPUHOST_KNOWLEDGE_DIR";

enum class FileOrigin { embedded, override_file };

// What a report cites for one data file.
struct FileMetadata {
  std::string name;  // "cuda_drivers.json"
  FileOrigin origin = FileOrigin::embedded;
  std::string path;                  // the override file; empty when embedded
  std::size_t rows = 0;              // objects carrying a "source", facts included
  std::string as_of;                 // the newest "as_of" in the file
  std::vector<std::string> sources;  // distinct "source" texts, in file order
};

struct LoadOptions {
  // Files, or directories of *.json files, that replace the embedded file of the same name
  // (whole-file replacement, validated like the embedded ones). Later entries win. A .json file
  // whose name is not a knowledge file is an error, so a misspelt name cannot be silently ignored.
  std::vector<std::filesystem::path> overrides;
};

// Every table, loaded and validated. Immutable after loading; safe to share between threads.
struct Knowledge {
  CudaDriverTable cuda_drivers;     // cuda_drivers.json
  GpuTable gpus;                    // gpus.json
  ArchSupportTable arch_support;    // cuda_arch_support.json
  PytorchTable pytorch;             // pytorch.json
  TensorflowTable tensorflow;       // tensorflow.json
  CudnnTable cudnn;                 // cudnn.json
  std::vector<FileMetadata> files;  // in knowledge_file_names() order

  [[nodiscard]] const FileMetadata* file(std::string_view name) const;
};

// The data files, in load order: "cuda_drivers.json", "gpus.json", ...
[[nodiscard]] std::span<const std::string_view> knowledge_file_names();

// Loads the embedded data, replaced file by file by `options.overrides`. Errors (parse_error,
// not_found, io_error, invalid_argument) name the file and, for bad content, the row (index and
// key) and the field.
[[nodiscard]] Result<Knowledge> load_knowledge(const LoadOptions& options = {});

// The driver a GPU of compute capability `cc` needs at least: the minimum of the first CUDA
// release that supports its architecture (Hopper: CUDA 11.8 -> 520.61.05 on Linux). nullopt when
// the architecture or that release's minimum on `os` is unknown.
[[nodiscard]] std::optional<Version> min_driver_for_compute_capability(const Knowledge& knowledge,
                                                                       ComputeCapability cc, Os os);

}  // namespace gpuhost::knowledge
