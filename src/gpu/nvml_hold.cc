#include "gpu/nvml_hold.h"

#include <thread>

#include "platform/environment.h"
#include "platform/files.h"
#include "platform/process.h"
#include "platform/state_root.h"

namespace gpuhost::gpu {

namespace {

using namespace std::chrono_literals;

// Shared by every user of the host: anyone may add a file, only its owner may remove it (/tmp's
// mode). Best effort: a directory someone else made keeps its mode.
void make_shared_directory(const std::filesystem::path& dir, std::error_code& ec) {
  const bool made = std::filesystem::create_directories(dir, ec);
  if (ec || !made) return;
#ifndef _WIN32
  std::error_code ignored;
  std::filesystem::permissions(dir, std::filesystem::perms::all | std::filesystem::perms::sticky_bit,
                               ignored);
#endif
}

void share_file(const std::filesystem::path& file) {
#ifndef _WIN32
  std::error_code ignored;
  std::filesystem::permissions(file,
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                   std::filesystem::perms::group_read | std::filesystem::perms::group_write |
                                   std::filesystem::perms::others_read | std::filesystem::perms::others_write,
                               ignored);
#else
  (void)file;
#endif
}

std::string first_line(const std::filesystem::path& file, std::string fallback) {
  auto text = platform::read_file(file);
  if (!text || text->empty()) return fallback;
  return text->substr(0, text->find('\n'));
}

}  // namespace

std::filesystem::path nvml_hold_directory() {
  if (auto dir = platform::get_env("GPUHOST_RUN_DIR"); dir && !dir->empty()) return *dir;
#ifdef _WIN32
  return platform::state_root() / "run";
#else
  return "/run/gpuhost";
#endif
}

Result<NvmlHold> NvmlHold::take(const std::filesystem::path& dir, const std::string& who) {
  std::error_code ec;
  make_shared_directory(dir, ec);
  if (ec) return make_error(ErrorCode::io_error, "creating " + dir.string() + ": " + ec.message());
  const auto lock_path = dir / "nvml-hold.lock";
  // A reader checking the hold holds the lock for a moment: retry through that.
  for (auto deadline = std::chrono::steady_clock::now() + 2s;;) {
    auto lock = platform::FileLock::try_lock(lock_path);
    if (lock) {
      share_file(lock_path);
      (void)platform::write_file_atomic(dir / "nvml-hold.who", who + "\n");
      share_file(dir / "nvml-hold.who");
      return NvmlHold(dir, std::move(*lock));
    }
    if (lock.error().code != ErrorCode::unavailable) return std::unexpected(lock.error());
    if (std::chrono::steady_clock::now() > deadline)
      return make_error(ErrorCode::unavailable, first_line(dir / "nvml-hold.who", "another process") +
                                                    " is changing a GPU's MIG mode (it holds " +
                                                    lock_path.string() + "); run this again when it is done");
    std::this_thread::sleep_for(20ms);
  }
}

NvmlHold::NvmlHold(NvmlHold&& other) noexcept
    : m_dir(std::move(other.m_dir)), m_lock(std::exchange(other.m_lock, std::nullopt)) {}

NvmlHold::~NvmlHold() {
  if (!m_lock) return;
  std::error_code ec;
  std::filesystem::remove(m_dir / "nvml-hold.who", ec);
  m_lock.reset();
}

std::vector<std::string> NvmlHold::wait_for_readers(std::chrono::milliseconds limit) const {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  const std::string self = std::to_string(platform::current_process_id()) + ".lock";
  for (;;) {
    std::vector<std::string> open;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(m_dir / "nvml-readers", ec)) {
      if (entry.path().extension() != ".lock" || entry.path().filename() == self) continue;
      auto probe = platform::FileLock::try_lock(entry.path());
      if (!probe && probe.error().code == ErrorCode::unavailable) {
        auto who = entry.path();
        open.push_back(first_line(who.replace_extension(".who"),
                                  "a gpuhost process, pid " + entry.path().stem().string()));
      }
    }
    if (open.empty() || std::chrono::steady_clock::now() > deadline) return open;
    std::this_thread::sleep_for(50ms);
  }
}

std::optional<std::string> nvml_hold_holder(const std::filesystem::path& dir) {
  const auto lock_path = dir / "nvml-hold.lock";
  std::error_code ec;
  if (!std::filesystem::exists(lock_path, ec)) return std::nullopt;
  auto probe = platform::FileLock::try_lock(lock_path);
  if (probe || probe.error().code != ErrorCode::unavailable) return std::nullopt;
  return first_line(dir / "nvml-hold.who", "another process");
}

std::optional<NvmlReaderRegistration> NvmlReaderRegistration::take(const std::filesystem::path& dir,
                                                                   const std::string& who) {
  std::error_code ec;
  make_shared_directory(dir / "nvml-readers", ec);
  if (ec) return std::nullopt;
  const auto base = dir / "nvml-readers" / std::to_string(platform::current_process_id());
  std::filesystem::path lock_path = base;
  lock_path += ".lock";
  auto lock = platform::FileLock::try_lock(lock_path);
  if (!lock) return std::nullopt;
  std::filesystem::path who_path = base;
  who_path += ".who";
  (void)platform::write_file_atomic(who_path, who + "\n");
  return NvmlReaderRegistration(base, std::move(*lock));
}

NvmlReaderRegistration::NvmlReaderRegistration(NvmlReaderRegistration&& other) noexcept
    : m_base(std::move(other.m_base)), m_lock(std::exchange(other.m_lock, std::nullopt)) {}

NvmlReaderRegistration::~NvmlReaderRegistration() {
  if (!m_lock) return;
  m_lock.reset();  // before the file goes: Windows cannot remove a file that is open
  std::error_code ec;
  for (const char* extension : {".who", ".lock"}) {
    std::filesystem::path file = m_base;
    file += extension;
    std::filesystem::remove(file, ec);
  }
}

}  // namespace gpuhost::gpu
