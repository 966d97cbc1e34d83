#pragma once
// `gpuhost top`: the live GPU and job view (top_command.cc; rendering in top_view.h, the job in
// top_job.h).

#include "cli/command.h"

namespace gpuhost::cli {

extern const char k_top_help[];
int run_top(CommandContext& context);

}  // namespace gpuhost::cli
