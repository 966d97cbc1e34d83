#pragma once
// `gpuhost ckpt`: list, verify, pull, push and prune checkpoints in a remote store
// (ckpt_command.cc; the format is supervise/remote_checkpoint.h).

#include "cli/command.h"

namespace gpuhost::cli {

extern const char k_ckpt_help[];
int run_ckpt(CommandContext& context);

}  // namespace gpuhost::cli
