#pragma once
// A plan as a script to review, keep for a custom image, or run by hand: POSIX sh for Linux,
// PowerShell for Windows. Running it again does only what is left (every step probes first).

#include <string>

#include "setup/plan.h"

namespace gpuhost::setup {

// Exit codes the scripts use, the same as `gpuhost setup --apply` (doc/exit-codes.md).
inline constexpr int k_script_exit_reboot = 6;
inline constexpr int k_script_exit_blocked = 7;

[[nodiscard]] std::string render_script(const Plan& plan);

// The file a step's probe or action is written to before --apply runs it: the whole program for
// the plan's shell, exiting 0 on success.
[[nodiscard]] std::string probe_program(const Plan& plan, const Step& step);
[[nodiscard]] std::string action_program(const Plan& plan, const Step& step);

}  // namespace gpuhost::setup
