#pragma once
// gpuhost run --gpu-share time|mps[:threads=PCT,mem=SIZE]: several jobs on one GPU without MIG.
//
// time: CUDA's default time slicing, said plainly: no memory or fault isolation between the jobs
// (NVIDIA's GPU Operator docs); --gpu-memory-fraction is the memory cap a PyTorch job can get.
//
// mps (Linux only; NVIDIA: "The MPS server will fail to start when launched on an operating system
// other than Linux"): the jobs' kernels run side by side through one MPS control daemon. A daemon
// that already answers (CUDA_MPS_PIPE_DIRECTORY given, or the system one in /tmp/nvidia-mps) is
// used and left running; otherwise gpuhost starts a private one with
// `nvidia-cuda-mps-control -d` and its own pipe and log folders under <jobs root>/.mps, shared by
// every gpuhost run on the host, and tells it `quit` when the last run using it ends. Each
// trainer gets CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY, and with threads= / mem=
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT for each device it sees
// (docs.nvidia.com/deploy/mps, "Appendix: Environment Variables";
// shared/research/08-advisor-sharing-anchors.md B5). gpuhost never opens the daemon's pipes: it
// speaks to it only through nvidia-cuda-mps-control's commands on standard input.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "platform/file_lock.h"

namespace gpuhost::cli {

struct GpuShare {
  enum class Mode { time, mps };
  Mode mode = Mode::time;
  std::optional<int> thread_percent;  // mps: threads=1..100
  std::string memory_limit;           // mps: mem=, as MPS writes it ("20G", "512M")
};

// "time", "mps", "mps:threads=50", "mps:threads=50,mem=20G". invalid_argument with the accepted
// forms for anything else, and for mps on Windows (with what Windows offers instead).
[[nodiscard]] Result<GpuShare> parse_gpu_share(std::string_view text, bool windows);

// The warnings every job sharing a GPU this way gets: what is and is not isolated.
[[nodiscard]] std::vector<std::string> gpu_share_warnings(const GpuShare& share);

// This run's use of an MPS control daemon, from join() to leave() (or destruction).
class MpsSession {
 public:
  // Finds or starts the daemon and registers this run as one of its users. `device_count` is how
  // many devices the trainer sees (one CUDA_MPS_PINNED_DEVICE_MEM_LIMIT entry each).
  // `given_pipe_directory` is CUDA_MPS_PIPE_DIRECTORY from --env or gpuhost's environment.
  // Errors: not_found when nvidia-cuda-mps-control is not installed, unavailable when a daemon
  // cannot be started or a given one does not answer; each message says the fix.
  [[nodiscard]] static Result<MpsSession> join(const std::filesystem::path& jobs_root, const GpuShare& share,
                                               int device_count,
                                               const std::optional<std::string>& given_pipe_directory);

  // A moved-from session has left nothing: only the new owner leaves the daemon.
  MpsSession(MpsSession&& other) noexcept;
  MpsSession& operator=(MpsSession&&) = delete;
  MpsSession(const MpsSession&) = delete;
  MpsSession& operator=(const MpsSession&) = delete;
  ~MpsSession();

  // For the trainer.
  [[nodiscard]] const std::vector<std::pair<std::string, std::string>>& environment() const {
    return m_environment;
  }
  // For the console: which daemon, started or found.
  [[nodiscard]] const std::vector<std::string>& notes() const { return m_notes; }

  // This run stops using the daemon; a private daemon no other run uses is told to quit. Returns
  // what happened, for the console (empty when nothing did). Idempotent.
  std::string leave();

 private:
  MpsSession() = default;

  std::filesystem::path m_state_dir;  // <jobs root>/.mps; empty: a daemon gpuhost did not start
  std::filesystem::path m_pipe_dir;
  std::optional<platform::FileLock> m_user_lock;  // <jobs root>/.mps/users/<pid>.lock
  std::filesystem::path m_user_lock_path;
  std::vector<std::pair<std::string, std::string>> m_environment;
  std::vector<std::string> m_notes;
};

}  // namespace gpuhost::cli
