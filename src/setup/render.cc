#include "setup/render.h"

#include "base/strings.h"
#include "setup/plan_internal.h"

namespace gpuhost::setup {

namespace {

bool multi_line(const std::string& text) {
  return text.find('\n') != std::string::npos;
}

// "# " before every line of `text` (a comment block in both shells).
void comment(std::string& out, std::string_view prefix, const std::string& text) {
  for (const auto& line : split_lines(text)) out += "# " + std::string(prefix) + line + "\n";
}

void header(std::string& out, const Plan& plan) {
  comment(out, "", "gpuhost setup plan. Review it before running it.");
  comment(out, "host: ", plan.host);
  if (!plan.environment.empty()) comment(out, "environment: ", plan.environment);
  for (const auto& d : plan.decisions) comment(out, "decided: ", d);
  for (const auto& w : plan.warnings) comment(out, "warning: ", w);
  for (const auto& b : plan.blockers) comment(out, "BLOCKED: ", b);
  comment(
      out, "",
      std::string("Each step checks first, so running this again does only what is left. A step that needs a "
                  "restart stops the script (exit ") +
          std::to_string(k_script_exit_reboot) + "): restart, then run it again.");
  if (!plan.first_boot.empty())
    comment(out, "",
            "--for-image: run the verification at the end of this file on the first boot with a GPU.");
}

// "# [2/6] python.env: ..." and the step's why / after / source as comments (both shells).
void step_header(std::string& out, std::size_t n, std::size_t total, const Step& s) {
  out += "\n# [" + std::to_string(n) + "/" + std::to_string(total) + "] " + s.id + ": " + s.title + "\n";
  if (!s.reason.empty()) comment(out, "why: ", s.reason);
  if (!s.expect.empty()) comment(out, "after: ", s.expect);
  if (!s.source.empty()) comment(out, "source: ", s.source);
}

std::string sh_script(const Plan& plan) {
  std::string out = "#!/bin/sh\n";
  header(out, plan);
  out += "set -eu\n";
  if (!plan.blockers.empty())
    out +=
        "# Blocked (see the BLOCKED lines): set blocked=0 only once that is resolved by hand.\nblocked=1\n"
        "if [ \"$blocked\" = 1 ]; then\n  echo 'gpuhost setup: this plan is blocked; read the BLOCKED lines "
        "at the top' >&2\n  exit " +
        std::to_string(k_script_exit_blocked) + "\nfi\n";
  std::size_t n = 0;
  for (const auto& s : plan.steps) {
    step_header(out, ++n, plan.steps.size(), s);
    std::string indent;
    if (!s.probe.empty()) {
      out += "if ! { " + s.probe + "; } >/dev/null 2>&1; then\n";
      indent = "  ";
    }
    out += indent + "echo " + sh_quote("gpuhost setup: " + s.id + ": " + s.title) + "\n";
    for (const auto& a : s.actions) out += (multi_line(a) ? std::string() : indent) + a + "\n";
    if (s.reboot)
      out += indent + "echo " +
             sh_quote("gpuhost setup: " + s.id + " needs a restart: restart, then run this again") +
             " >&2\n" + indent + "exit " + std::to_string(k_script_exit_reboot) + "\n";
    if (!s.probe.empty()) out += "fi\n";
  }
  if (!plan.first_boot.empty()) {
    out += "\n# First boot with a GPU (--for-image): run these, and keep the image only if they pass.\n";
    for (const auto& line : plan.first_boot) comment(out, "  ", line);
  }
  out += "echo 'gpuhost setup: done'\n";
  return out;
}

std::string ps_script(const Plan& plan) {
  std::string out;
  header(out, plan);
  out += "[CmdletBinding(SupportsShouldProcess)]\nparam()\n$ErrorActionPreference = 'Stop'\n";
  out += "function Test-Step([scriptblock]$Probe) {\n  try { [bool](& $Probe) } catch { $false }\n}\n";
  if (!plan.blockers.empty())
    out +=
        "# Blocked (see the BLOCKED lines): set $blocked = $false only once that is resolved by "
        "hand.\n$blocked = $true\n"
        "if ($blocked) {\n  Write-Error 'gpuhost setup: this plan is blocked; read the BLOCKED lines at the "
        "top' -ErrorAction Continue\n  exit " +
        std::to_string(k_script_exit_blocked) + "\n}\n";
  std::size_t n = 0;
  for (const auto& s : plan.steps) {
    step_header(out, ++n, plan.steps.size(), s);
    std::string indent = "  ";
    if (!s.probe.empty()) {
      out += "if (-not (Test-Step { " + s.probe + " })) {\n";
      indent = "    ";
    }
    out += std::string(s.probe.empty() ? "" : "  ") + "if ($PSCmdlet.ShouldProcess(" + ps_quote(s.id) + ", " +
           ps_quote(s.title) + ")) {\n";
    for (const auto& a : s.actions) {
      out += indent + "$global:LASTEXITCODE = 0\n";
      out += (multi_line(a) ? std::string() : indent) + a + "\n";
      out += indent + "if ($LASTEXITCODE) { throw (" + ps_quote(s.id + " failed with exit code ") +
             " + $LASTEXITCODE) }\n";
    }
    if (s.reboot)
      out += indent + "Write-Warning " +
             ps_quote("gpuhost setup: " + s.id + " needs a restart: restart, then run this again") + "\n" +
             indent + "exit " + std::to_string(k_script_exit_reboot) + "\n";
    out += std::string(s.probe.empty() ? "" : "  ") + "}\n";
    if (!s.probe.empty()) out += "}\n";
  }
  if (!plan.first_boot.empty()) {
    out += "\n# First boot with a GPU (--for-image): run these, and keep the image only if they pass.\n";
    for (const auto& line : plan.first_boot) comment(out, "  ", line);
  }
  out += "Write-Output 'gpuhost setup: done'\n";
  return out;
}

}  // namespace

std::string render_script(const Plan& plan) {
  return plan.shell == Shell::powershell ? ps_script(plan) : sh_script(plan);
}

std::string probe_program(const Plan& plan, const Step& step) {
  if (plan.shell == Shell::powershell)
    return "$ErrorActionPreference = 'Stop'\ntry { if (" + step.probe + ") { exit 0 } } catch { }\nexit 1\n";
  return step.probe + "\n";
}

std::string action_program(const Plan& plan, const Step& step) {
  std::string out;
  if (plan.shell == Shell::powershell) {
    out = "$ErrorActionPreference = 'Stop'\n";
    for (const auto& a : step.actions)
      out += "$global:LASTEXITCODE = 0\n" + a + "\nif ($LASTEXITCODE) { exit $LASTEXITCODE }\n";
    return out;
  }
  out = "set -eu\n";
  for (const auto& a : step.actions) out += a + "\n";
  return out;
}

}  // namespace gpuhost::setup
