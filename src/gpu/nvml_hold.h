#pragma once
// A MIG mode change resets the GPU, and a reset fails while any process holds the GPU open
// (NVML_ERROR_IN_USE): gpuhost's own long-running NVML readers (serve, a run's dashboard and
// advisor, advise) would block every `gpuhost mig apply` on the host. So they step aside: the
// changer takes an exclusive lock on <dir>/nvml-hold.lock (who it is in nvml-hold.who) for the
// change; a reader checks the lock before each use of NVML and from a thread of its own, shuts
// NVML down while the lock is held, and opens it again after. Each reader that has NVML open
// holds <dir>/nvml-readers/<pid>.lock, so the changer can wait until none is left and name the
// ones that are. The OS drops every lock when its process dies (flock / LockFileEx), so a crashed
// changer never leaves the readers paused and a crashed reader never blocks a change.
//
// <dir>: $GPUHOST_RUN_DIR, else /run/gpuhost on Linux (host-wide, so a serve running as its own
// user and mig apply run as root meet there; made world-writable and sticky like /tmp), else
// <state root>/run on Windows (where MIG cannot be turned on at all).

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "platform/file_lock.h"

namespace gpuhost::gpu {

[[nodiscard]] std::filesystem::path nvml_hold_directory();

// The changer's side: held by `gpuhost mig apply` around a mode change.
class NvmlHold {
 public:
  // Takes the hold (retrying for up to 2 s while a reader is checking it). unavailable when
  // another changer holds it (named); io_error when <dir> cannot be made.
  [[nodiscard]] static Result<NvmlHold> take(const std::filesystem::path& dir, const std::string& who);

  NvmlHold(NvmlHold&& other) noexcept;
  NvmlHold& operator=(NvmlHold&&) = delete;
  NvmlHold(const NvmlHold&) = delete;
  NvmlHold& operator=(const NvmlHold&) = delete;
  ~NvmlHold();

  // Waits until no registered reader has NVML open, or `limit` passes; returns those that still
  // do ("gpuhost serve, pid 4711"), empty when all stepped aside.
  [[nodiscard]] std::vector<std::string> wait_for_readers(std::chrono::milliseconds limit) const;

 private:
  NvmlHold(std::filesystem::path dir, platform::FileLock lock)
      : m_dir(std::move(dir)), m_lock(std::move(lock)) {}
  std::filesystem::path m_dir;
  std::optional<platform::FileLock> m_lock;
};

// Who holds the hold now ("gpuhost mig apply, pid 4711"), or nullopt when nobody does. Cheap
// when there is no hold file: one stat.
[[nodiscard]] std::optional<std::string> nvml_hold_holder(const std::filesystem::path& dir);

// A reader's registration, held while it has NVML open. nullopt when <dir> cannot be written
// (a reader without rights there is not waited for; the changer's IN_USE names the GPU's holders).
class NvmlReaderRegistration {
 public:
  [[nodiscard]] static std::optional<NvmlReaderRegistration> take(const std::filesystem::path& dir,
                                                                  const std::string& who);
  NvmlReaderRegistration(NvmlReaderRegistration&& other) noexcept;
  NvmlReaderRegistration& operator=(NvmlReaderRegistration&&) = delete;
  NvmlReaderRegistration(const NvmlReaderRegistration&) = delete;
  NvmlReaderRegistration& operator=(const NvmlReaderRegistration&) = delete;
  ~NvmlReaderRegistration();

 private:
  NvmlReaderRegistration(std::filesystem::path base, platform::FileLock lock)
      : m_base(std::move(base)), m_lock(std::move(lock)) {}
  std::filesystem::path m_base;  // <dir>/nvml-readers/<pid>
  std::optional<platform::FileLock> m_lock;
};

}  // namespace gpuhost::gpu
