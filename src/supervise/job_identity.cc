#include "supervise/job_identity.h"

#include <optional>
#include <system_error>

#include "job/journal.h"
#include "platform/files.h"

namespace gpuhost::supervise {

namespace fs = std::filesystem;

namespace {

// The checkpoint location a job directory was made for: job.json, else the journal's
// job_created record. nullopt for a job that does not exist (or says nothing).
std::optional<fs::path> journalled_location(const job::JobPaths& paths) {
  std::error_code ec;
  if (auto text = platform::read_file(paths.spec())) {
    if (auto spec = job_spec_from_json(*text); spec && !spec->checkpoint_location.empty()) return spec->checkpoint_location;
  }
  if (!fs::exists(paths.journal(), ec)) return std::nullopt;
  auto journal = job::read_journal(paths.journal());
  if (!journal) return std::nullopt;
  for (const job::JournalRecord& record : journal->records)
    if (record.type == "job_created") return fs::path(record.fields.get_string("checkpoint_location"));
  return std::nullopt;
}

bool same_location(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  fs::path ca = fs::weakly_canonical(a, ec);
  if (ec) ca = a.lexically_normal();
  fs::path cb = fs::weakly_canonical(b, ec);
  if (ec) cb = b.lexically_normal();
  return ca == cb;
}

}  // namespace

Result<JobIdentity> resolve_job_identity(const fs::path& jobs_root, const JobSpec& spec, bool name_given) {
  JobIdentity identity;
  identity.name = spec.name;
  auto owner = journalled_location(job::job_paths(jobs_root, spec.name));
  if (!owner || same_location(*owner, spec.checkpoint_location)) return identity;
  if (name_given)
    return make_error(ErrorCode::invalid_argument,
                      "job '" + spec.name + "' supervises the checkpoints in " + owner->string() + ", not " +
                          spec.checkpoint_location.string() + ": give this run another --name, or --checkpoints " +
                          owner->string() + " to continue that job");
  for (int n = 2; n < 1000; ++n) {
    std::string suffix = "-" + std::to_string(n);
    std::string candidate = spec.name.substr(0, 64 - suffix.size()) + suffix;
    auto taken = journalled_location(job::job_paths(jobs_root, candidate));
    if (!taken || same_location(*taken, spec.checkpoint_location)) {
      identity.renamed_from = spec.name;
      identity.name = candidate;
      return identity;
    }
  }
  return make_error(ErrorCode::invalid_argument, "no free job name like '" + spec.name + "-N': give this run a --name");
}

}  // namespace gpuhost::supervise
