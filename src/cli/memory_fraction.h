#pragma once
// gpuhost run --gpu-memory-fraction F: each Python process of the job may take at most F of each
// GPU's memory, so that jobs sharing a GPU do not take each other's, with no change to the
// trainer. Where a framework reads such a cap from the environment it gets it there (JAX:
// XLA_PYTHON_CLIENT_MEM_FRACTION); PyTorch reads none, so a sitecustomize hook that gpuhost puts
// first on PYTHONPATH calls torch.cuda.set_per_process_memory_fraction when torch is imported
// (memory_fraction_sitecustomize.py); TensorFlow has no cap it reads from the environment, and the
// notes say so.

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gpuhost::cli {

struct MemoryFractionSetup {
  std::vector<std::pair<std::string, std::string>> environment;  // for the trainer
  std::vector<std::string> notes;                                // for the console
};

// "0.3" or "30%" -> 0.3; invalid_argument unless 0 < F <= 1.
[[nodiscard]] Result<double> parse_memory_fraction(std::string_view text);

// Writes the hook under <jobs_root>/.python/memory-fraction/ and returns the environment:
// GPUHOST_TORCH_MEMORY_FRACTION, PYTHONPATH (the hook's folder, then `python_path`),
// XLA_PYTHON_CLIENT_MEM_FRACTION and TF_FORCE_GPU_ALLOW_GROWTH=true. io_error when the hook cannot
// be written.
[[nodiscard]] Result<MemoryFractionSetup> memory_fraction_setup(double fraction,
                                                                const std::filesystem::path& jobs_root,
                                                                const std::optional<std::string>& python_path,
                                                                bool windows);

}  // namespace gpuhost::cli
