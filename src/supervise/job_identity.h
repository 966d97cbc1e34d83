#pragma once

#include <filesystem>
#include <string>

#include "base/error.h"
#include "supervise/job.h"

namespace gpuhost::supervise {

// The job a run belongs to. A job is its checkpoint location: with no --name, the name from
// default_job_name() unless a job of that name supervises another location, then the first of
// NAME-2, NAME-3 ... that is free or supervises this one (`renamed_from` says which was taken).
// A --name whose job supervises another location is refused (invalid_argument, saying both), so
// one experiment never resumes from another's checkpoints. `spec.checkpoint_location` must be
// absolute. The command is not part of the identity: rerunning the same folder with changed
// hyperparameters (or a fixed typo) is the common way to go on, and must resume; a new job for
// a changed command would adopt the same files anyway.
struct JobIdentity {
  std::string name;
  std::string renamed_from;  // the default name that belonged to another location, or empty
};
[[nodiscard]] Result<JobIdentity> resolve_job_identity(const std::filesystem::path& jobs_root, const JobSpec& spec,
                                                       bool name_given);

}  // namespace gpuhost::supervise
