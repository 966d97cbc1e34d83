#pragma once
// Where jobs live and what a job's folder holds (doc/journal.md describes the layout): shared by
// the supervisor that writes a job and the readers (status, serve, top) that only look at it.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpuhost::job {

// A character a job name may hold: [A-Za-z0-9._-].
[[nodiscard]] bool is_job_name_char(char c);

// True for [A-Za-z0-9._-]{1,64} except "." and "..", and except the names Windows reserves for
// devices (CON, NUL, COM1 ...; any case), so a job directory can be created on both OSes.
[[nodiscard]] bool is_valid_job_name(std::string_view name);

// Where jobs live: $GPUHOST_HOME/jobs if set, else $XDG_STATE_HOME/gpuhost/jobs
// (~/.local/state/gpuhost/jobs) on Linux, %LOCALAPPDATA%\gpuhost\jobs on Windows. Without
// HOME / LOCALAPPDATA (and USERPROFILE): .gpuhost/jobs in the current directory.
[[nodiscard]] std::filesystem::path jobs_root();

// A job's directory and the files in it (doc/journal.md describes the layout).
struct JobPaths {
  std::filesystem::path dir;
  [[nodiscard]] std::filesystem::path journal() const { return dir / "journal.jsonl"; }
  [[nodiscard]] std::filesystem::path spec() const { return dir / "job.json"; }
  [[nodiscard]] std::filesystem::path lock() const { return dir / "lock"; }
  [[nodiscard]] std::filesystem::path logs() const { return dir / "logs"; }
  [[nodiscard]] std::filesystem::path snapshots() const { return dir / "snapshots"; }
  [[nodiscard]] std::filesystem::path save_request() const { return dir / "save-request"; }
  // Training scalars (metrics/history.h) and what the file tailer has consumed.
  [[nodiscard]] std::filesystem::path metrics() const { return dir / "metrics"; }
};

[[nodiscard]] JobPaths job_paths(const std::filesystem::path& root, const std::string& name);

// Job names under `root`, sorted: folders with a valid name holding a journal or a job.json.
// A missing root is no jobs, not an error.
[[nodiscard]] Result<std::vector<std::string>> list_jobs(const std::filesystem::path& root);

}  // namespace gpuhost::job
