#pragma once

#include <cstddef>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "base/json.h"
#include "cli/terminal_style.h"
#include "job/job_state.h"
#include "job/journal.h"

namespace gpuhost::cli {

// Human and JSON renderings of supervised jobs (gpuhost run, jobs, status). JSON schema:
// doc/run-json.md.

struct JobSummary {
  std::string name;
  job::JobState state;
};

// The console line for a journal record as it is appended, coloured by what it means (notices
// yellow, commits green, bad checkpoints red); empty for records not worth a line.
[[nodiscard]] std::string render_record_line(const job::JournalRecord& record, const TerminalStyle& style);

// The job's phase as `jobs` and `status` show it: the journal's, except "interrupted" for a job
// whose last supervisor left no supervisor_stopped record and no longer runs (SIGKILL, a host
// that went down): the journal alone would say "running" forever.
[[nodiscard]] std::string shown_phase(const job::JobState& state);

[[nodiscard]] json::Value job_status_json(const job::JobState& state);

void render_job_list(std::ostream& out, const std::vector<JobSummary>& jobs, const TerminalStyle& style,
                     const std::filesystem::path& root);

void render_job_status(std::ostream& out, const std::string& name, const std::filesystem::path& dir,
                       const job::JobState& state, const job::JournalDamage& damage, std::size_t max_events,
                       const TerminalStyle& style);

}  // namespace gpuhost::cli
