#include "cli/gpu_share.h"

#include <chrono>
#include <thread>

#include "base/strings.h"
#include "platform/files.h"
#include "platform/process.h"

namespace gpuhost::cli {

namespace {

using namespace std::chrono_literals;

constexpr std::string_view k_control = "nvidia-cuda-mps-control";
// Where the MPS control daemon keeps its pipes when nobody says otherwise (NVIDIA MPS docs).
constexpr std::string_view k_system_pipe_directory = "/tmp/nvidia-mps";

Error share_usage(std::string_view text, const std::string& why) {
  return Error{ErrorCode::invalid_argument,
               "--gpu-share " + std::string(text) + ": " + why +
                   " (use time, mps, or mps:threads=PCT,mem=SIZE such as mps:threads=50,mem=20G)"};
}

// "20G", "512M", "1.5G" -> the same text, which MPS reads as it is.
bool valid_memory_limit(std::string_view text) {
  if (text.size() < 2) return false;
  const char unit = text.back();
  if (unit != 'G' && unit != 'M') return false;
  auto number = parse_double(text.substr(0, text.size() - 1));
  return number && *number > 0;
}

struct Control {
  std::string program;
  std::filesystem::path pipe_dir;
  std::filesystem::path log_dir;

  [[nodiscard]] Result<platform::ProcessResult> send(const std::string& command) const {
    platform::ProcessOptions options;
    options.argv = {program};
    options.environment = {{"CUDA_MPS_PIPE_DIRECTORY", pipe_dir.string()}};
    if (!log_dir.empty()) options.environment.emplace_back("CUDA_MPS_LOG_DIRECTORY", log_dir.string());
    options.stdin_text = command + "\n";
    options.timeout = 10s;
    return platform::run_process(options);
  }

  // Whether a control daemon answers on these pipes.
  [[nodiscard]] bool answers() const {
    auto result = send("get_server_list");
    return result && result->succeeded();
  }

  [[nodiscard]] Result<void> start() const {
    platform::ProcessOptions options;
    options.argv = {program, "-d"};
    options.environment = {{"CUDA_MPS_PIPE_DIRECTORY", pipe_dir.string()},
                           {"CUDA_MPS_LOG_DIRECTORY", log_dir.string()}};
    options.timeout = 15s;
    auto result = platform::run_process(options);
    if (!result) return std::unexpected(result.error());
    if (!result->succeeded()) {
      std::string said(trim(result->stderr_text.empty() ? result->stdout_text : result->stderr_text));
      return make_error(ErrorCode::unavailable,
                        program + " -d failed (" +
                            (result->timed_out ? std::string("no answer in 15 s")
                                               : "exit " + std::to_string(result->exit_code)) +
                            (said.empty() ? "" : ": " + said) + "); its log is in " + log_dir.string());
    }
    // -d returns once the daemon has forked; it answers a moment later.
    for (auto deadline = std::chrono::steady_clock::now() + 10s;
         std::chrono::steady_clock::now() < deadline;) {
      if (answers()) return {};
      std::this_thread::sleep_for(100ms);
    }
    return make_error(ErrorCode::unavailable, "the MPS control daemon started but does not answer on " +
                                                  pipe_dir.string() + "; its log is in " + log_dir.string());
  }
};

// The lock that orders starting, joining and stopping the private daemon between gpuhost runs.
Result<platform::FileLock> lock_daemon(const std::filesystem::path& state_dir) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    auto lock = platform::FileLock::try_lock(state_dir / "daemon.lock");
    if (lock || lock.error().code != ErrorCode::unavailable) return lock;
    if (std::chrono::steady_clock::now() > deadline)
      return make_error(ErrorCode::unavailable, "another gpuhost run has held " +
                                                    (state_dir / "daemon.lock").string() +
                                                    " for 30 s while starting or stopping the MPS daemon");
    std::this_thread::sleep_for(50ms);
  }
}

// Whether a gpuhost run other than this one still uses the private daemon. A lock file nobody
// holds is left by a run that died: removed.
bool other_users(const std::filesystem::path& users_dir) {
  std::error_code ec;
  bool any = false;
  for (const auto& entry : std::filesystem::directory_iterator(users_dir, ec)) {
    if (entry.path().extension() != ".lock") continue;
    bool stale = false;
    {
      auto probe = platform::FileLock::try_lock(entry.path());
      if (!probe && probe.error().code == ErrorCode::unavailable) any = true;
      stale = probe.has_value();
    }  // released before it is removed
    if (stale) std::filesystem::remove(entry.path(), ec);
  }
  return any;
}

}  // namespace

Result<GpuShare> parse_gpu_share(std::string_view text, bool windows) {
  GpuShare share;
  const std::string_view value = trim(text);
  if (value == "time") return share;
  if (value != "mps" && !value.starts_with("mps:")) return std::unexpected(share_usage(text, "unknown mode"));
  if (windows)
    return make_error(
        ErrorCode::invalid_argument,
        "--gpu-share mps: MPS runs on Linux only (NVIDIA: the MPS server fails to start on other "
        "operating systems); on Windows use --gpu-share time with --gpu-memory-fraction (no fault "
        "isolation), or give each job its own GPU partition with Hyper-V GPU-P "
        "(Set-VMHostPartitionableGpu) or a whole GPU with DDA");
  share.mode = GpuShare::Mode::mps;
  if (value == "mps") return share;
  for (std::string_view item : split(value.substr(4), ',')) {
    item = trim(item);
    const auto eq = item.find('=');
    const std::string_view key = eq == std::string_view::npos ? item : item.substr(0, eq);
    const std::string_view setting = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    if (key == "threads") {
      auto percent = parse_int(setting);
      if (!percent || *percent < 1 || *percent > 100)
        return std::unexpected(share_usage(text, "threads= is a percentage of the GPU's SMs, 1 to 100"));
      share.thread_percent = static_cast<int>(*percent);
    } else if (key == "mem") {
      if (!valid_memory_limit(setting))
        return std::unexpected(share_usage(text, "mem= is a size in G or M per device, such as 20G or 512M"));
      share.memory_limit = std::string(setting);
    } else {
      return std::unexpected(share_usage(text, "unknown setting '" + std::string(key) + "'"));
    }
  }
  return share;
}

std::vector<std::string> gpu_share_warnings(const GpuShare& share) {
  if (share.mode == GpuShare::Mode::time)
    return {
        "--gpu-share time: the jobs on this GPU take turns with no memory or fault isolation between them "
        "(NVIDIA); "
        "one job can take all the memory and the others fail with out-of-memory: give each "
        "--gpu-memory-fraction, or use MIG slices (gpuhost mig apply, --gpu mig:<profile>)"};
  return {
      "--gpu-share mps: the jobs on this GPU share one MPS server and one fault domain: a fault in one (an "
      "illegal memory access, a DDP worker killed mid-step) can stop or hang every job on the GPU "
      "(pytorch/pytorch#32575); MIG slices isolate them (gpuhost mig apply, --gpu mig:<profile>)"};
}

Result<MpsSession> MpsSession::join(const std::filesystem::path& jobs_root, const GpuShare& share,
                                    int device_count,
                                    const std::optional<std::string>& given_pipe_directory) {
  MpsSession session;
  auto program = platform::find_executable(k_control);
  if (!program)
    return make_error(
        ErrorCode::not_found,
        "--gpu-share mps needs " + std::string(k_control) +
            " on PATH: it ships with the NVIDIA driver (Debian: nvidia-cuda-mps; other hosts: the "
            "driver's .run installer or cuda-drivers package)");
  Control control{*program, {}, {}};
  if (given_pipe_directory && !given_pipe_directory->empty()) {
    control.pipe_dir = *given_pipe_directory;
    if (!control.answers())
      return make_error(ErrorCode::unavailable,
                        "no MPS control daemon answers on CUDA_MPS_PIPE_DIRECTORY=" + *given_pipe_directory +
                            ": start it there (nvidia-cuda-mps-control -d with that variable set), or unset "
                            "CUDA_MPS_PIPE_DIRECTORY and gpuhost starts one of its own");
    session.m_notes.push_back("MPS: using the control daemon at " + *given_pipe_directory +
                              " (CUDA_MPS_PIPE_DIRECTORY); gpuhost leaves it running");
  } else if (control.pipe_dir = std::string(k_system_pipe_directory);
             std::filesystem::exists(control.pipe_dir / "control") && control.answers()) {
    session.m_notes.push_back("MPS: using the host's control daemon at " + control.pipe_dir.string() +
                              "; gpuhost leaves it running");
  } else {
    session.m_state_dir = jobs_root / ".mps";
    control.pipe_dir = session.m_state_dir / "pipe";
    control.log_dir = session.m_state_dir / "log";
    std::error_code ec;
    for (const auto& dir : {control.pipe_dir, control.log_dir, session.m_state_dir / "users"}) {
      std::filesystem::create_directories(dir, ec);
      if (ec) return make_error(ErrorCode::io_error, "creating " + dir.string() + ": " + ec.message());
    }
    auto lock = GPUHOST_TRY(lock_daemon(session.m_state_dir));
    if (control.answers()) {
      session.m_notes.push_back("MPS: joined the control daemon gpuhost started for another run (" +
                                control.pipe_dir.string() + ")");
    } else {
      if (auto started = control.start(); !started) return std::unexpected(started.error());
      session.m_notes.push_back("MPS: started a control daemon for the jobs of this host (pipes in " +
                                control.pipe_dir.string() + ", log in " + control.log_dir.string() +
                                "); it stops when the last gpuhost run using it ends");
    }
    session.m_user_lock_path =
        session.m_state_dir / "users" / (std::to_string(platform::current_process_id()) + ".lock");
    auto user = platform::FileLock::try_lock(session.m_user_lock_path);
    if (!user) return std::unexpected(with_context(user.error(), "registering with the MPS daemon"));
    session.m_user_lock.emplace(std::move(*user));
    session.m_environment.emplace_back("CUDA_MPS_LOG_DIRECTORY", control.log_dir.string());
  }
  session.m_pipe_dir = control.pipe_dir;
  session.m_environment.emplace_back("CUDA_MPS_PIPE_DIRECTORY", control.pipe_dir.string());
  if (share.thread_percent) {
    session.m_environment.emplace_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                                       std::to_string(*share.thread_percent));
    session.m_notes.push_back(
        "MPS: each process of this job may use " + std::to_string(*share.thread_percent) +
        " % of the GPU's SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; nvidia-smi's utilisation "
        "still reads up to 100 %: it measures time, not SMs)");
  }
  if (!share.memory_limit.empty()) {
    std::string limits;
    for (int i = 0; i < std::max(device_count, 1); ++i)
      limits += (limits.empty() ? "" : ",") + std::to_string(i) + "=" + share.memory_limit;
    session.m_environment.emplace_back("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", limits);
    session.m_notes.push_back("MPS: each process of this job may allocate " + share.memory_limit +
                              " per device (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=" + limits + ")");
  }
  return session;
}

std::string MpsSession::leave() {
  if (!m_user_lock) return "";
  auto lock = lock_daemon(m_state_dir);
  m_user_lock.reset();
  std::error_code ec;
  std::filesystem::remove(m_user_lock_path, ec);
  if (!lock)
    return "MPS: could not take " + (m_state_dir / "daemon.lock").string() + " (" + lock.error().message +
           "); the control daemon is left running";
  if (other_users(m_state_dir / "users")) return "";
  auto program = platform::find_executable(k_control);
  if (!program)
    return "MPS: " + std::string(k_control) + " is gone from PATH; the control daemon is left running";
  Control control{*program, m_pipe_dir, m_state_dir / "log"};
  auto result = control.send("quit");
  if (!result || !result->succeeded())
    return "MPS: the control daemon did not take quit (" +
           (result ? std::string(trim(result->stderr_text)) : result.error().message) +
           "); stop it with echo quit | " + "CUDA_MPS_PIPE_DIRECTORY=" + m_pipe_dir.string() + " " +
           std::string(k_control);
  return "MPS: no other gpuhost run uses the control daemon: stopped it";
}

MpsSession::MpsSession(MpsSession&& other) noexcept
    : m_state_dir(std::move(other.m_state_dir)),
      m_pipe_dir(std::move(other.m_pipe_dir)),
      m_user_lock(std::exchange(other.m_user_lock, std::nullopt)),
      m_user_lock_path(std::move(other.m_user_lock_path)),
      m_environment(std::move(other.m_environment)),
      m_notes(std::move(other.m_notes)) {}

MpsSession::~MpsSession() {
  (void)leave();
}

}  // namespace gpuhost::cli
