#include "cli/memory_fraction.h"

#include <cstdio>

#include "base/strings.h"
#include "cli/cli_assets.h"
#include "platform/files.h"

namespace gpuhost::cli {

Result<double> parse_memory_fraction(std::string_view text) {
  std::string value(trim(text));
  double scale = 1;
  if (!value.empty() && value.back() == '%') {
    value.pop_back();
    scale = 100;
  }
  auto number = parse_double(value);
  if (!number || !(*number / scale > 0) || *number / scale > 1)
    return make_error(ErrorCode::invalid_argument,
                      "--gpu-memory-fraction expects a share of each GPU's memory in "
                      "(0, 1], such as 0.3 or 30%, got '" +
                          std::string(text) + "'");
  return *number / scale;
}

Result<MemoryFractionSetup> memory_fraction_setup(double fraction, const std::filesystem::path& jobs_root,
                                                  const std::optional<std::string>& python_path,
                                                  bool windows) {
  const EmbeddedFile* hook = assets::find_embedded("memory_fraction_sitecustomize.py");
  if (!hook) return make_error(ErrorCode::internal, "the memory-fraction hook is not in this build");
  const std::filesystem::path dir = jobs_root / ".python" / "memory-fraction";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::io_error, "creating " + dir.string() + ": " + ec.message());
  const std::filesystem::path file = dir / "sitecustomize.py";
  auto current = platform::read_file(file);
  if (!current || *current != hook->bytes) {
    if (auto written = platform::write_file_atomic(file, hook->bytes); !written)
      return std::unexpected(with_context(written.error(), "writing the memory-fraction hook"));
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", fraction);
  MemoryFractionSetup setup;
  const char separator = windows ? ';' : ':';
  std::string path = dir.string();
  if (python_path && !python_path->empty()) path += separator + *python_path;
  setup.environment = {{"GPUHOST_TORCH_MEMORY_FRACTION", text},
                       {"PYTHONPATH", path},
                       {"XLA_PYTHON_CLIENT_MEM_FRACTION", text},
                       {"TF_FORCE_GPU_ALLOW_GROWTH", "true"}};
  std::snprintf(text, sizeof text, "%.3g %%", fraction * 100);
  setup.notes.push_back(std::string("each Python process of this job may take ") + text +
                        " of a GPU's memory: PyTorch through a sitecustomize hook on PYTHONPATH (" +
                        file.string() +
                        "; it says on stderr what it set), JAX through XLA_PYTHON_CLIENT_MEM_FRACTION");
  setup.notes.push_back(
      "TensorFlow reads no memory cap from the environment: TF_FORCE_GPU_ALLOW_GROWTH=true makes it take "
      "memory as it "
      "needs it instead of all at start; a hard cap needs tf.config.set_logical_device_configuration(..., "
      "memory_limit=...) in the code. A non-Python trainer gets no cap");
  return setup;
}

}  // namespace gpuhost::cli
