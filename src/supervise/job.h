#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "job/job_paths.h"
#include "platform/child_process.h"
#include "supervise/restart_policy.h"
#include "supervise/resume.h"

namespace gpuhost::supervise {

// Everything that defines a supervised job: from `gpuhost run` flags, a gpuhost.toml job file,
// or both (flags win). Format of the file: doc/job-file.md.
struct JobSpec {
  std::string name;                  // [A-Za-z0-9._-]{1,64}; default: from the checkpoint dir or command
  std::vector<std::string> command;  // argv, may contain {resume}
  std::optional<std::string> working_directory;
  std::vector<std::pair<std::string, std::string>> environment;  // extra variables for the child
  std::filesystem::path checkpoint_location;  // directory (or single file) the trainer writes
  ResumePreset preset = ResumePreset::none;
  std::chrono::milliseconds settle{std::chrono::seconds(2)};
  std::optional<std::string> marker;
  std::vector<std::string> ignore;
  int keep = 0;  // retention: newest K committed checkpoints kept; 0 = keep all (never delete)

  // Save request on a notice: a signal (SIGUSR1 / CTRL_BREAK by default) or a request file
  // (path given to the trainer as GPUHOST_SAVE_REQUEST) or both.
  enum class SaveRequest { signal, file, both, none } save_request = SaveRequest::signal;
  platform::ChildSignal save_signal = platform::default_save_signal();
  // The user named the save signal (--save-signal, save.signal): a promise that the trainer
  // handles it. Only consulted where the OS cannot see signal handlers (Windows), where a
  // console event kills a process without one (doc/run-signals.md).
  bool save_signal_declared = false;
  platform::ChildSignal stop_signal = platform::default_stop_signal();
  std::chrono::milliseconds stop_grace{std::chrono::seconds(10)};  // after stop_signal, before kill
  std::chrono::milliseconds safety_margin{std::chrono::seconds(5)};  // before the notice deadline

  RestartPolicy restart;

  // Preemption watchers: "auto" (the cloud detected from DMI), "none", or a cloud id.
  std::string cloud = "auto";
  std::optional<std::string> metadata_endpoint;  // overrides the cloud's http://169.254.169.254
  std::chrono::milliseconds poll_interval{std::chrono::seconds(5)};

  // Object-storage mirror (doc/remote-store.md): a store URL (s3://..., file://...) or empty;
  // `encrypt` a suite for crypt::choose_suite or empty; the key comes from this file, else
  // GPUHOST_ENCRYPTION_KEY_FILE / GPUHOST_ENCRYPTION_KEY, never from the command line.
  std::string remote;
  std::string encrypt;
  std::optional<std::filesystem::path> encryption_key_file;
};

// The value the spec gives the child's variable `name` (the last --env of that name), if any.
[[nodiscard]] std::optional<std::string> spec_environment_value(const JobSpec& spec, std::string_view name);

[[nodiscard]] const char* save_request_name(JobSpec::SaveRequest request);  // "signal", "file", ...
[[nodiscard]] std::optional<JobSpec::SaveRequest> parse_save_request(std::string_view name);

// Parses a gpuhost.toml job file (doc/job-file.md) into `spec`, leaving fields the file does not
// set as they are. Errors: parse_error with file:line:column, invalid_argument for unknown keys
// (with "did you mean") and out-of-range values.
[[nodiscard]] Result<void> load_job_file(const std::filesystem::path& path, JobSpec& spec);

// "500ms", "10s", "2.5s", "5m" (or "5min"), "1h", "1m30s", or a bare number of seconds ("30").
// Shared by the job file and `gpuhost run` flags. invalid_argument for anything else or a
// negative value.
[[nodiscard]] Result<std::chrono::milliseconds> parse_duration(std::string_view text);

// Checks a complete spec: non-empty command, valid name, checkpoint location set, and every
// number in range (keep, durations, restart policy, cloud id, endpoint scheme). invalid_argument.
[[nodiscard]] Result<void> validate_job_spec(const JobSpec& spec);

// A name from the checkpoint directory or the command ("train" for python train.py), made valid.
// The checkpoint location's last folder names the job unless it is generic ("checkpoints",
// "output", "weights" ...), then its parent does; failing both, the script (the first argument
// ending in .py/.sh/...) or `-m module`, else the program. Never empty.
[[nodiscard]] std::string default_job_name(const JobSpec& spec);

// A store URL fit to write down (job.json, the journal): userinfo ("user:password@") is
// removed, an endpoint= holding one is replaced by REDACTED, as is the value of every s3://
// parameter other than endpoint, region, style and provider; a #fragment is dropped. URLs
// gpuhost accepts carry no secret, so for them this changes nothing.
[[nodiscard]] std::string redact_store_url(std::string_view url);

// The spec as JSON (job.json in the job directory) and back, so `gpuhost status` and a person
// reading the job directory see what was run. The remote URL goes through redact_store_url;
// of the encryption only the suite flag and the key file's path are written, never a key.
[[nodiscard]] std::string job_spec_to_json(const JobSpec& spec);
[[nodiscard]] Result<JobSpec> job_spec_from_json(std::string_view text);

}  // namespace gpuhost::supervise
