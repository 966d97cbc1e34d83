#pragma once

namespace gpuhost::cli {

// The whole program: picks the subcommand from argv, runs it, returns the process exit code
// (doc/exit-codes.md). The only place that catches exceptions; library code returns Results.
int run(int argc, char** argv);

}  // namespace gpuhost::cli
