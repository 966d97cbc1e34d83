#include "platform/job_cgroup.h"

namespace gpuhost::platform {

// Windows keeps a job's tree in a Job Object (child_process_win32.cc); there are no cgroups.
Result<std::unique_ptr<JobCgroup>> JobCgroup::open(std::string_view) {
  return make_error(ErrorCode::unsupported, "cgroups are Linux's; the Job Object holds the trainer's tree");
}

JobCgroup::~JobCgroup() = default;
std::vector<long> JobCgroup::processes() const { return {}; }
bool JobCgroup::contains(long) const { return false; }
Result<int> JobCgroup::kill_all(std::chrono::milliseconds) { return 0; }
void JobCgroup::kill_now() {}
bool JobCgroup::populated() const { return false; }

}  // namespace gpuhost::platform
