// The rendered scripts against golden files in testdata/. GPUHOST_UPDATE_GOLDEN=1 rewrites them
// (review the diff). tests/integration/test_setup.py runs sh -n and shellcheck on the sh goldens
// and a PowerShell parser on the ps1 ones.

#include "setup/render.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "setup/test_hosts.h"

namespace gpuhost::setup {
namespace {

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void expect_golden(const std::string& name, const std::string& text) {
  const std::filesystem::path path = std::filesystem::path(GPUHOST_SETUP_GOLDEN_DIR) / name;
  if (const char* update = std::getenv("GPUHOST_UPDATE_GOLDEN"); update && *update == '1') {
    std::ofstream(path, std::ios::binary) << text;
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing: run with GPUHOST_UPDATE_GOLDEN=1";
  const std::string want = read(path);
  if (want == text) return;
  std::size_t line = 1, at = 0;
  while (at < want.size() && at < text.size() && want[at] == text[at]) line += want[at++] == '\n';
  ADD_FAILURE() << name << " differs from line " << line
                << ": if the change is meant, run with GPUHOST_UPDATE_GOLDEN=1 "
                << "and review the diff\n  golden: " << want.substr(want.rfind('\n', at) + 1, 160)
                << "\n  now:    " << text.substr(text.rfind('\n', at) + 1, 160);
}

using test::plan_for;

TEST(SetupRender, DebianNoDriverSh) {
  auto facts = test::debian_no_driver(0x2330);
  facts.security.secure_boot = "on";
  facts.security.secure_boot_evidence = "SecureBoot = 1";
  expect_golden("debian-no-driver.sh", render_script(plan_for(facts, test::request())));
}

TEST(SetupRender, V100WithDriverSh) {
  auto request = test::request("/opt/my venv");  // a path with a space is quoted
  request.frameworks = {{Framework::torch, std::nullopt}, {Framework::tensorflow, std::nullopt}};
  expect_golden("v100-driver.sh",
                render_script(plan_for(
                    test::linux_with_driver("Tesla V100-SXM2-16GB", 7, 0, "595.58.03", 13020), request)));
}

TEST(SetupRender, BlockedPlanScriptStopsBeforeAnyStep) {
  auto text = render_script(
      plan_for(test::linux_with_driver("NVIDIA A100-SXM4-80GB", 8, 0, "450.51.06", 11000), test::request()));
  auto blocked = text.find("  exit 7");
  ASSERT_NE(blocked, std::string::npos);
  EXPECT_LT(blocked, text.find("# [1/"));
  expect_golden("driver-too-old.sh", text);
}

TEST(SetupRender, ForImageSh) {
  auto request = test::request();
  request.for_image = true;
  expect_golden("for-image.sh", render_script(plan_for(test::debian_cpu_only(), request)));
}

TEST(SetupRender, WindowsGridPowerShell) {
  auto text = render_script(plan_for(test::windows_grid_t4(), test::request("C:\\venvs\\train")));
  EXPECT_NE(text.find("[CmdletBinding(SupportsShouldProcess)]"), std::string::npos);
  EXPECT_NE(text.find("$PSCmdlet.ShouldProcess('windows.long_paths'"), std::string::npos);
  expect_golden("windows-grid.ps1", text);
}

TEST(SetupRender, WindowsTensorflowCondaPowerShell) {
  auto request = test::request();
  request.env_dir.clear();
  request.conda_name = "tf";
  request.python = Version({3, 10});
  request.frameworks = {{Framework::tensorflow, Version({2, 10})}};
  request.toolkit = true;
  expect_golden("windows-tf-conda.ps1", render_script(plan_for(test::windows_grid_t4(), request)));
}

TEST(SetupRender, ProgramsForApplyExitZeroOnSuccessInEitherShell) {
  auto plan = plan_for(test::debian_cpu_only(), test::request());
  const Step& env = plan.steps.at(1);
  EXPECT_EQ(probe_program(plan, env), env.probe + "\n");
  EXPECT_EQ(action_program(plan, env).rfind("set -eu\n", 0), 0u);
  auto win = plan_for(test::windows_grid_t4(), test::request("C:\\v"));
  const Step& lp = win.steps.front();
  EXPECT_NE(probe_program(win, lp).find("if (" + lp.probe + ") { exit 0 }"), std::string::npos);
  EXPECT_NE(action_program(win, lp).find("if ($LASTEXITCODE) { exit $LASTEXITCODE }"), std::string::npos);
}

}  // namespace
}  // namespace gpuhost::setup
