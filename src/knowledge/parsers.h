#pragma once

// Internal to knowledge/: one parser per data file. Each validates the whole document and names
// the file (`location`), the row and the field in its error.

#include <string>

#include "base/error.h"
#include "base/json.h"
#include "knowledge/arch_support.h"
#include "knowledge/cuda_drivers.h"
#include "knowledge/cudnn.h"
#include "knowledge/gpus.h"
#include "knowledge/pytorch.h"
#include "knowledge/tensorflow.h"

namespace gpuhost::knowledge::detail {

[[nodiscard]] Result<CudaDriverTable> parse_cuda_drivers(const json::Value& document,
                                                         const std::string& location);
[[nodiscard]] Result<GpuTable> parse_gpus(const json::Value& document, const std::string& location);
[[nodiscard]] Result<ArchSupportTable> parse_arch_support(const json::Value& document,
                                                          const std::string& location);
[[nodiscard]] Result<PytorchTable> parse_pytorch(const json::Value& document, const std::string& location);
[[nodiscard]] Result<TensorflowTable> parse_tensorflow(const json::Value& document,
                                                       const std::string& location);
[[nodiscard]] Result<CudnnTable> parse_cudnn(const json::Value& document, const std::string& location);

}  // namespace gpuhost::knowledge::detail
