#include "cli/gpu_claims.h"

#include "platform/files.h"

namespace gpuhost::cli {

Result<GpuClaim> claim_mig_slice(const std::filesystem::path& jobs_root,
                                 const std::vector<gpu::GpuAssignment::Device>& candidates,
                                 const std::string& request, const std::string& owner) {
  const std::filesystem::path dir = jobs_root / ".gpu-claims";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::io_error, "creating " + dir.string() + ": " + ec.message());
  std::string held;
  for (const auto& device : candidates) {
    auto lock = platform::FileLock::try_lock(dir / (device.uuid + ".lock"));
    if (lock) {
      (void)platform::write_file_atomic(dir / (device.uuid + ".owner"), owner + "\n");
      return GpuClaim{device, std::move(*lock)};
    }
    if (lock.error().code != ErrorCode::unavailable) return std::unexpected(lock.error());
    std::string by = "another gpuhost run";
    if (auto text = platform::read_file(dir / (device.uuid + ".owner")); text && !text->empty())
      by = text->substr(0, text->find('\n'));
    held += (held.empty() ? "" : "; ") + device.uuid + " (" + device.label + ") by " + by;
  }
  return make_error(ErrorCode::invalid_argument,
                    "--gpu " + request + ": every free slice is taken by another gpuhost run: " + held +
                        "; start this job when one ends, or make more slices with gpuhost mig apply");
}

}  // namespace gpuhost::cli
