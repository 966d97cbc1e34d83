#pragma once
// Entry points and help texts of the subcommands, one <name>_command.cc each.

#include "cli/command.h"

namespace gpuhost::cli {

extern const char k_bench_help[];
int run_bench(CommandContext& context);

extern const char k_doctor_help[];
int run_doctor(CommandContext& context);

extern const char k_plan_help[];
int run_plan(CommandContext& context);

extern const char k_run_help[];
int run_run(CommandContext& context);

extern const char k_jobs_help[];
int run_jobs(CommandContext& context);

extern const char k_status_help[];
int run_status(CommandContext& context);
extern const char k_advise_help[];
int run_advise(CommandContext& context);

extern const char k_mig_help[];
int run_mig(CommandContext& context);

extern const char k_verify_help[];
int run_verify(CommandContext& context);

extern const char k_setup_help[];
int run_setup(CommandContext& context);

extern const char k_serve_help[];
int run_serve(CommandContext& context);

extern const char k_service_help[];
int run_service(CommandContext& context);

extern const char k_help_help[];
int run_help(CommandContext& context);

extern const char k_version_help[];
int run_version(CommandContext& context);

}  // namespace gpuhost::cli
