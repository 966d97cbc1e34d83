// Windows host settings a training environment needs, each answering one of doctor's findings
// (doctor/rules_os.cc; research/07 §2.4 and §7.7): long paths and the VC++ runtime before any
// pip install, the TDR delay and Fast Startup for the GPU.

#include "setup/plan_internal.h"

namespace gpuhost::setup {

namespace {

// A DWORD under HKLM: the probe that it equals `value`, and the action that sets it.
void registry_step(Step& s, std::string_view key, std::string_view name, int value) {
  const std::string path = "HKLM:\\" + std::string(key);
  s.probe = "(Get-ItemProperty -Path " + ps_quote(path) + " -Name " + ps_quote(name) +
            " -ErrorAction SilentlyContinue)." + std::string(name) + " -eq " + std::to_string(value);
  s.actions = {"New-Item -Path " + ps_quote(path) + " -Force | Out-Null",
               "Set-ItemProperty -Path " + ps_quote(path) + " -Name " + ps_quote(name) +
                   " -Type DWord -Value " + std::to_string(value)};
  s.admin = true;
}

}  // namespace

void plan_windows_settings(PlanContext& c) {
  if (c.finding("os.windows.long_paths.off")) {
    auto& s = add_step(c, "windows.long_paths", "Turn on long paths");
    s.finding = "os.windows.long_paths.off";
    s.reason =
        "long paths are off: pip installs of torch and TensorFlow fail past 260 characters (pytorch#23823)";
    registry_step(s, "SYSTEM\\CurrentControlSet\\Control\\FileSystem", "LongPathsEnabled", 1);
    s.expect = "LongPathsEnabled = 1";
    s.source = "tensorflow/docs site/en/install/pip.md (Windows native, step 2); pytorch/test-infra#6648";
  }
  {
    auto& s = add_step(c, "windows.vc_runtime", "Install the Microsoft Visual C++ runtime");
    s.reason =
        "torch and TensorFlow load msvcp140_1.dll and vcruntime140_1.dll; without them import fails with "
        "WinError 126 (pytorch#131662, #129568)";
    s.admin = true;
    s.probe = "Test-Path (Join-Path $env:windir 'System32\\msvcp140_1.dll')";
    s.actions = {
        "winget install --id Microsoft.VCRedist.2015+.x64 --exact --silent --accept-package-agreements "
        "--accept-source-agreements"};
    s.expect = "msvcp140_1.dll in System32";
    s.source = "tensorflow/docs site/en/install/pip.md (MSVC 2015-2019 redistributable)";
  }
  if (c.finding("os.windows.tdr.short") || c.finding("os.windows.tdr.disabled")) {
    const bool disabled = c.finding("os.windows.tdr.disabled") != nullptr;
    auto& s = add_step(
        c, "windows.tdr",
        disabled ? "Turn GPU timeout recovery (TDR) back on" : "Raise the GPU timeout (TDR) to 60 s");
    s.finding = disabled ? "os.windows.tdr.disabled" : "os.windows.tdr.short";
    s.reason = disabled ? "TDR is off: a hung kernel freezes the display instead of being reset"
                        : "on a WDDM GPU, kernels longer than 2 s are killed (cudaErrorLaunchTimeout)";
    registry_step(s, "SYSTEM\\CurrentControlSet\\Control\\GraphicsDrivers",
                  disabled ? "TdrLevel" : "TdrDelay", disabled ? 3 : 60);
    s.reboot = true;
    s.expect = disabled ? "TdrLevel = 3 (recover) after a restart" : "TdrDelay = 60 after a restart";
    s.source = "https://learn.microsoft.com/windows-hardware/drivers/display/tdr-registry-keys";
  }
  if (c.finding("os.windows.fast_startup.on")) {
    auto& s = add_step(c, "windows.fast_startup", "Turn Fast Startup off");
    s.finding = "os.windows.fast_startup.on";
    s.reason = "with Fast Startup, 'Shut down' hibernates the kernel and the GPU driver is not restarted";
    registry_step(s, "SYSTEM\\CurrentControlSet\\Control\\Session Manager\\Power", "HiberbootEnabled", 0);
    s.expect = "HiberbootEnabled = 0";
    s.source = "doctor rule os.windows.fast_startup (research/01 §6)";
  }
}

}  // namespace gpuhost::setup
