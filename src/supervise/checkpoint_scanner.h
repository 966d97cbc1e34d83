#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "supervise/checkpoint.h"

namespace gpuhost::supervise {

struct ScannerOptions {
  // The directory the trainer writes checkpoints into (entries directly inside it are the
  // candidates), or one file that is rewritten in place (YOLO's weights/last.pt).
  std::filesystem::path location;
  // A candidate must keep the same size and newest mtime for this long before it is validated
  // (for generic files, before it counts as complete).
  std::chrono::milliseconds settle{std::chrono::seconds(2)};
  // When set, a candidate is ready only once this marker exists: for a directory, a file of this
  // name inside it; for a file "x.pt", a sibling "x.pt<marker>" (e.g. ".done").
  std::optional<std::string> marker;
  // Names to ignore besides temp files (*.tmp, *.partial, .*, ~*, HF's tmp-checkpoint-*): glob
  // patterns ('*', '?'). Without a marker, an entry of no known layout (generic_file/_dir) is a
  // candidate only when its name carries a step ("global_step500", see step_from_name) or, for a
  // folder, is a number ("1200"): logs, configs and exports beside the checkpoints are not
  // checkpoints (and must never be retired as such). With a marker every entry is a candidate.
  std::vector<std::string> ignore;
};

// A validated candidate the scanner saw become ready: new, or changed since it was last reported.
struct ScanResult {
  std::vector<CheckpointVerdict> ready;     // valid, full depth (hashed), oldest first
  std::vector<CheckpointVerdict> rejected;  // settled but invalid (each reported once per change)
};

// Finds checkpoints as they appear and decides when each is complete. Polling (a scan costs a
// directory listing plus stat calls), so it works the same on every OS and filesystem
// (network and FUSE mounts included, where change notifications are unreliable). Not
// thread-safe: the supervisor calls scan() from its loop.
class CheckpointScanner {
 public:
  explicit CheckpointScanner(ScannerOptions options);

  // Looks once. `now` is passed in so tests can step time. A missing location is not an error
  // (the trainer has not created it yet).
  [[nodiscard]] Result<ScanResult> scan(std::chrono::steady_clock::time_point now);

  // Forget a path (it was deleted by retention): a later file of the same name is new.
  void forget(const std::filesystem::path& path);

  // Treat what is on disk now as already seen (on supervisor start, after the journal said
  // which checkpoints are committed): they are reported only if they change later.
  void mark_seen(const std::filesystem::path& path, const CheckpointVerdict& verdict);

  // `gpuhost run --fresh`: what is on disk now is treated as seen without being validated, and
  // is reported only once it is written again (a byte-identical rewrite included: it is then
  // the new run's checkpoint).
  void ignore_present();

 private:
  struct Candidate {
    std::filesystem::path path;
    bool is_directory = false;
  };
  [[nodiscard]] Result<std::vector<Candidate>> list_candidates(const std::filesystem::file_status& status) const;
  struct Observation {
    std::uint64_t size = 0;
    std::chrono::system_clock::time_point modified;
    std::chrono::steady_clock::time_point stable_since;
    bool reported = false;
    std::string content_hash;  // of the last report: a touched, byte-identical file is not new
  };
  [[nodiscard]] bool is_candidate(const std::filesystem::path& path, bool is_directory) const;
  [[nodiscard]] bool marker_present(const std::filesystem::path& path, bool is_directory) const;

  ScannerOptions m_options;
  std::map<std::filesystem::path, Observation> m_seen;
};

}  // namespace gpuhost::supervise
