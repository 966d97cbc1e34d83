#include "supervise/trainer_launch.h"

#include <algorithm>
#include <utility>

#include "supervise/resume.h"

namespace gpuhost::supervise {

Result<platform::ChildOptions> trainer_launch(const JobSpec& spec, const job::JobPaths& paths,
                                              const TrainerLaunchInputs& inputs) {
  platform::ChildOptions child;
  child.argv = GPUHOST_TRY(resume_command(spec.command, spec.preset, inputs.resume.path));
  child.working_directory = spec.working_directory;
  child.environment = spec.environment;
  auto set = [&](std::string name, std::string value) { child.environment.emplace_back(std::move(name), std::move(value)); };
  set("GPUHOST_JOB", spec.name);
  set("GPUHOST_JOB_DIR", paths.dir.string());
  set(k_run_token_variable, inputs.run_token);
  set("GPUHOST_ATTEMPT", std::to_string(inputs.attempt));
  if (inputs.nnodes > 1) {
    set("GPUHOST_NNODES", std::to_string(inputs.nnodes));
    if (inputs.node_rank) set("GPUHOST_NODE_RANK", std::to_string(*inputs.node_rank));
  }
  if (inputs.resume.path) set("GPUHOST_RESUME_FROM", *inputs.resume.path);
  if (spec.save_request == JobSpec::SaveRequest::file || spec.save_request == JobSpec::SaveRequest::both)
    set("GPUHOST_SAVE_REQUEST", paths.save_request().string());
  if (!inputs.inherited_pythonunbuffered) set("PYTHONUNBUFFERED", "1");
  const bool job_names_one = std::any_of(spec.environment.begin(), spec.environment.end(),
                                         [](const auto& entry) { return entry.first == "GPUHOST_METRICS_FILE"; });
  if (!inputs.metrics_channel.empty() && !inputs.inherited_metrics_file && !job_names_one)
    set("GPUHOST_METRICS_FILE", inputs.metrics_channel.string());
  return child;
}

}  // namespace gpuhost::supervise
