// The driver and CUDA toolkit steps. Rules: shared/research/07-setup-anchors.md §3 (cloud
// installers), §4 (branches), §7.3-7.5, §7.9. A working driver is never replaced, downgraded or
// removed without --upgrade-driver, and a cloud's licensed GRID/vGPU driver not even then.

#include <algorithm>

#include "base/strings.h"
#include "setup/plan_internal.h"

namespace gpuhost::setup {

namespace {

// NVIDIA's CUDA repository directory for this distribution ("debian12"), empty when not one
// NVIDIA publishes for (developer.download.nvidia.com/compute/cuda/repos/).
std::string cuda_repo(const doctor::HostFacts& f) {
  const std::string name = to_lower(f.system.os.name);
  const std::string& v = f.system.os.version;
  if (name.find("debian") != std::string::npos && (v == "12" || v == "13")) return "debian" + v;
  if (name.find("ubuntu") != std::string::npos && (v == "22.04" || v == "24.04"))
    return "ubuntu" + replace_all(v, ".", "");
  return {};
}

std::string keyring_url(const std::string& repo) {
  return "https://developer.download.nvidia.com/compute/cuda/repos/" + repo +
         "/x86_64/cuda-keyring_1.1-1_all.deb";
}

// NVIDIA's CUDA repository through its keyring package (what GCP's installer does on Debian and
// Ubuntu). `what`: the packages that need it.
void add_repository_step(PlanContext& c, std::string id, const std::string& repo, const std::string& what) {
  const std::string keyring = keyring_url(repo);
  auto& s = add_step(c, std::move(id), "Add NVIDIA's CUDA repository (" + repo + ")");
  s.reason = what + " come from NVIDIA's repository for " + repo;
  s.admin = true;
  s.probe = "dpkg -s cuda-keyring >/dev/null 2>&1";
  s.actions = {"curl -fsSL -o /tmp/cuda-keyring.deb " + keyring, "dpkg -i /tmp/cuda-keyring.deb",
               "rm -f /tmp/cuda-keyring.deb", "apt-get update"};
  s.expect = "apt-get sees NVIDIA's packages, signed by the keyring's key";
  s.source = keyring;
}

bool cloud_licensed_driver(const doctor::HostFacts& f) {
  for (const auto& d : f.gpu.devices) {
    if (d.virtualization.value_or(gpu::VirtualizationMode::none) == gpu::VirtualizationMode::vgpu)
      return true;
    if (d.vgpu_license.value &&
        (d.vgpu_license.value->licensing_supported || !d.vgpu_license.value->feature.empty()))
      return true;
  }
  return false;
}

// The newest branch of `kind` in the data; with `at_most`, the newest not above it.
const knowledge::DriverBranch* branch(const knowledge::Knowledge& k, std::string_view kind, int at_most = 0) {
  const knowledge::DriverBranch* best = nullptr;
  for (const auto& b : k.cuda_drivers.driver_branches) {
    if (!kind.empty() && b.kind != kind) continue;
    if (at_most && b.branch > at_most) continue;
    if (!best || b.branch > best->branch) best = &b;
  }
  return best;
}

// Where a cloud's own driver comes from (research/07 §3).
std::string cloud_driver_source(const doctor::HostFacts& f, bool windows) {
  switch (f.system.cloud.cloud) {
    case platform::CloudVendor::aws:
      return windows ? "AWS's driver bucket (Get-S3Object -BucketName ec2-windows-nvidia-drivers -KeyPrefix "
                       "latest "
                       "-Region us-east-1; GRID/Gaming drivers carry AWS's licence)"
                     : "the NVIDIA driver AWS documents for the instance type";
    case platform::CloudVendor::azure:
      return windows ? "the Azure VM extension NvidiaGpuDriverWindows (CUDA or GRID by VM family)"
                     : "the Azure VM extension NvidiaGpuDriverLinux (no Secure Boot support)";
    case platform::CloudVendor::gcp:
      return windows ? "Google's install_gpu_driver.ps1 (GoogleCloudPlatform/compute-gpu-installation)"
                     : "Google's cuda_installer.pyz install_driver "
                       "(GoogleCloudPlatform/compute-gpu-installation)";
    case platform::CloudVendor::alibaba:
      return "Alibaba's auto-install GPU driver option (instance user data)";
    case platform::CloudVendor::tencent:
      return "Tencent Cloud's automatic GPU driver installation (instance creation option)";
    default: return {};
  }
}

void plan_windows_driver(PlanContext& c) {
  const auto& f = c.facts;
  std::string source = cloud_driver_source(f, true);
  if (c.driver_working) return;
  if (!c.gpu_present && !c.request.for_image) return;
  auto& s = add_step(c, "driver.install", "Install the NVIDIA driver");
  s.finding = c.finding("gpu.driver.missing") ? "gpu.driver.missing" : "";
  s.admin = true;
  s.reboot = true;
  s.reason = "no working NVIDIA driver (NVML did not load)";
  s.probe = "$null -ne (Get-Command nvidia-smi.exe -ErrorAction SilentlyContinue)";
  s.expect = "nvidia-smi.exe -L lists every GPU";
  s.source = "research/07 §3.1 (GCP Windows), §3.2 (AWS), §3.3 (Azure)";
  if (!source.empty()) {
    // A cloud's driver carries its licence; the plan names the source, it does not fetch it.
    s.actions.push_back("throw 'Install the driver from " + replace_all(source, "'", "''") +
                        ", then run this again. A driver from nvidia.com or choco install cuda would lack "
                        "the cloud licence.'");
    s.attended = true;
    c.plan.blockers.push_back("the driver on " +
                              std::string(platform::cloud_vendor_name(f.system.cloud.cloud)) +
                              " Windows comes from " + source + "; install it, then run gpuhost setup again");
  } else {
    s.actions.push_back(
        "throw 'Install the data-center (or Studio) driver for this GPU from "
        "https://www.nvidia.com/Download/index.aspx, then run this again.'");
    s.attended = true;
    c.plan.blockers.push_back(
        "no NVIDIA driver: install the driver for this GPU from nvidia.com (the installer needs a "
        "person to pick the model), then run gpuhost setup again");
  }
}

// `why`: set when a working driver is replaced (--upgrade-driver).
void plan_linux_driver(PlanContext& c, const std::string& why = {}) {
  const auto& f = c.facts;
  const bool install =
      !why.empty() || (c.gpu_present && !c.driver_working) || (c.request.for_image && !c.driver_working);
  if (!install) return;
  const std::string repo = cuda_repo(f);
  if (repo.empty()) {
    c.plan.blockers.push_back(
        "no NVIDIA driver, and " +
        (f.system.os.name.empty() ? std::string("this distribution") : f.system.os.name) +
        " is not one gpuhost installs drivers on (Debian 12/13, Ubuntu 22.04/24.04): install "
        "the driver from NVIDIA's repository for it, then run gpuhost setup again");
    return;
  }
  if (f.linux.in_container && c.request.for_image) {
    c.plan.warnings.push_back(
        "this is a container: the driver packages install into the image, but DKMS builds the module for "
        "the kernel it finds here; check the module on the image's first boot");
  } else if (f.linux.in_container) {
    c.plan.blockers.push_back(
        "this is a container: the driver belongs to the host; start the container with --gpus all "
        "(NVIDIA Container Toolkit) instead of installing one inside");
    return;
  }
  if (std::string source = cloud_driver_source(f, false); !source.empty())
    c.plan.decisions.push_back(
        "on " + std::string(platform::cloud_vendor_name(f.system.cloud.cloud)) +
        " the cloud's own route is " + source +
        "; this plan uses NVIDIA's CUDA repository, which is what that route installs on " + repo);

  // Flavour: open kernel modules for Turing and newer (Blackwell needs them), the proprietary
  // ones before; pre-Turing GPUs end at the branch whose note says so (R580).
  std::string flavour = c.request.driver_flavour;
  const knowledge::DriverBranch* chosen = branch(c.k, "PB");
  if (flavour.empty()) {
    if (c.compute_capability && !(*c.compute_capability >= knowledge::ComputeCapability{7, 5})) {
      flavour = "proprietary";
      chosen = branch(c.k, "", 580);
      c.plan.decisions.push_back("compute capability " + c.compute_capability->str() +
                                 " predates Turing: proprietary kernel modules, branch R" +
                                 std::to_string(chosen ? chosen->branch : 580) +
                                 " (the last for Maxwell, Pascal and Volta)");
    } else {
      flavour = "open";
      c.plan.decisions.push_back(
          c.compute_capability
              ? "compute capability " + c.compute_capability->str() +
                    ": NVIDIA's open kernel modules (Turing and newer)"
              : "GPU generation unknown without a driver: open kernel modules, which need "
                "Turing or newer; pass --driver-flavour proprietary for Maxwell, Pascal or Volta");
    }
  } else if (flavour == "proprietary") {
    chosen = branch(c.k, "", 580);
  }
  if (chosen) {
    c.driver = Version({chosen->branch, 0});
    c.driver_planned = true;
    c.plan.decisions.push_back("driver branch R" + std::to_string(chosen->branch) + " (" + chosen->kind +
                               ", end of life " + chosen->end_of_life + ")");
  }

  bool nouveau = false;
  for (const auto& d : f.linux.pci_display_devices) nouveau = nouveau || d.driver == "nouveau";
  if (nouveau) {
    auto& s = add_step(c, "driver.nouveau", "Stop the nouveau driver from claiming the GPU");
    s.finding = "gpu.nouveau";
    s.reason = "the open-source nouveau driver holds the GPU; NVIDIA's module cannot load beside it";
    s.admin = true;
    s.reboot = true;
    s.probe = "test -f /etc/modprobe.d/blacklist-nouveau.conf && ! grep -q '^nouveau ' /proc/modules";
    s.actions = {
        "printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' > /etc/modprobe.d/blacklist-nouveau.conf",
        "update-initramfs -u"};
    s.expect = "after a reboot nouveau is not loaded";
    s.source = "NVIDIA/ansible-role-nvidia-driver (unload nouveau); research/07 §7.9";
  }
  {
    auto& s =
        add_step(c, "driver.prerequisites", "Install kernel headers and DKMS for the driver's module build");
    s.reason = "the driver's kernel module is built by DKMS against the running kernel";
    s.admin = true;
    s.probe = "dpkg -s \"linux-headers-$(uname -r)\" dkms >/dev/null 2>&1";
    s.actions = {"apt-get update", "apt-get install -y \"linux-headers-$(uname -r)\" dkms"};
    s.expect = "headers for $(uname -r) and dkms are installed";
    s.source = "GoogleCloudPlatform/compute-gpu-installation linux/cuda_installer/os_installers/debian.py";
  }
  if (f.security.secure_boot == "on") {
    auto& s = add_step(c, "driver.secure_boot", "Enrol a module-signing key for Secure Boot");
    s.reason = "Secure Boot is on (" + f.security.secure_boot_evidence +
               "): a DKMS-built module loads only when signed with a key the firmware trusts";
    s.admin = true;
    s.reboot = true;
    s.attended = true;
    s.probe =
        "test -f /var/lib/dkms/mok.pub && mokutil --test-key /var/lib/dkms/mok.pub 2>&1 | grep -q 'already "
        "enrolled'";
    s.actions = {"test -f /var/lib/dkms/mok.pub || dkms generate_mok",
                 "mokutil --import /var/lib/dkms/mok.pub"};
    s.expect =
        "after a reboot, with the key confirmed in the MOK manager at the console, mokutil --test-key says "
        "it is enrolled";
    s.source = "GoogleCloudPlatform/compute-gpu-installation (MOK keys for DKMS); research/07 §7.9";
    c.plan.warnings.push_back(
        "Secure Boot is on: enrolling the signing key needs a person at the console (the MOK manager asks "
        "for the password mokutil --import set). On a cloud VM without a console, use the cloud's "
        "signed driver image or turn Secure Boot off, then run gpuhost setup again");
  }
  add_repository_step(c, "driver.repository", repo, "the driver packages");
  {
    const std::string package =
        flavour == "open" ? "nvidia-open" : "cuda-drivers-" + std::to_string(chosen ? chosen->branch : 580);
    auto& s = add_step(c, "driver.install", "Install the NVIDIA driver (" + package + ")");
    s.finding = c.finding("gpu.driver.missing") ? "gpu.driver.missing" : "";
    s.reason = !why.empty()    ? why + " (--upgrade-driver)"
               : c.gpu_present ? "an NVIDIA GPU is present and no driver works"
                               : "--for-image: the image gets the driver";
    s.admin = true;
    s.reboot = true;
    s.probe = "dpkg -s " + package + " >/dev/null 2>&1";
    s.actions = {"apt-get install -y " + package,
                 // GCP holds the kernel so an unattended upgrade cannot leave the module unbuilt.
                 "apt-mark hold \"linux-image-$(uname -r)\" \"linux-headers-$(uname -r)\""};
    s.expect = "after a reboot, nvidia-smi -L lists every GPU";
    s.source =
        "GoogleCloudPlatform/compute-gpu-installation debian.py (nvidia-open; kernel hold); "
        "NVIDIA/ansible-role-nvidia-driver (cuda-drivers-<branch>)";
    c.plan.decisions.push_back(
        "the kernel packages are held (apt-mark hold) so an upgrade cannot leave the driver's module "
        "unbuilt; "
        "apt-mark unhold them to upgrade the kernel, then reinstall the driver");
  }
}

}  // namespace

// NVML loaded but did not initialise: the driver is there, so it is mended, not installed.
// Returns false when that is not the case.
bool plan_installed_but_broken(PlanContext& c) {
  const auto& f = c.facts;
  if (c.driver_working || !f.gpu.error || f.gpu.error->status == 12 || f.gpu.library_path.empty())
    return false;
  const std::string smi = c.windows ? "nvidia-smi.exe -L" : "nvidia-smi -L";
  const std::string probe =
      c.windows ? "& { nvidia-smi.exe -L *> $null; $LASTEXITCODE -eq 0 }" : "nvidia-smi -L >/dev/null 2>&1";
  if (auto v = Version::parse(f.gpu.driver_version)) c.driver = *v;
  if (f.gpu.error->status == 18) {  // NVML_ERROR_LIB_RM_VERSION_MISMATCH
    auto& s = add_step(c, "driver.restart", "Restart so the upgraded driver's kernel module loads");
    s.finding = "gpu.driver.version_mismatch";
    s.reason = "the driver's libraries were upgraded" +
               (f.gpu.driver_version.empty() ? std::string() : " (to " + f.gpu.driver_version + ")") +
               " while the old kernel module is still loaded (NVML: " + f.gpu.error->name + ")";
    s.probe = probe;
    s.reboot = true;
    s.expect = smi + " lists every GPU";
    return true;
  }
  if (f.gpu.error->status == 9 && !c.windows) {  // NVML_ERROR_DRIVER_NOT_LOADED
    auto& s = add_step(c, "driver.load", "Load the installed driver's kernel module");
    s.finding = "gpu.driver.not_loaded";
    s.reason = "the driver is installed but its kernel module is not loaded";
    s.admin = true;
    s.probe = probe;
    s.actions = {"modprobe nvidia"};
    s.expect = smi +
               " lists every GPU; if modprobe fails, read dmesg (Secure Boot refuses unsigned modules: "
               "mokutil --sb-state)";
    return true;
  }
  c.plan.blockers.push_back("the NVIDIA driver is installed but NVML fails (" + f.gpu.error->name + ": " +
                            f.gpu.error->message +
                            "): run gpuhost doctor for the fix, then gpuhost setup again");
  return true;
}

void plan_driver(PlanContext& c) {
  const auto& f = c.facts;
  const bool licensed = cloud_licensed_driver(f);
  if (plan_installed_but_broken(c)) return;
  if (c.driver_working) {
    std::string line = "driver " + f.gpu.driver_version + " works";
    if (licensed) line += " and is a licensed vGPU/GRID driver from the cloud: it is never replaced";
    c.plan.decisions.push_back(line + "; it is left as it is unless a framework needs a newer one");
  } else if (!c.gpu_present && !c.request.for_image) {
    c.plan.decisions.push_back("no NVIDIA GPU on this host: no driver, CPU builds of the frameworks");
  }
  if (c.windows)
    plan_windows_driver(c);
  else
    plan_linux_driver(c);
}

void plan_driver_upgrade(PlanContext& c, const std::string& why) {
  const auto& f = c.facts;
  if (cloud_licensed_driver(f)) {
    std::string source = cloud_driver_source(f, c.windows);
    c.plan.blockers.push_back(
        why +
        ", and it is the cloud's licensed vGPU/GRID driver, which gpuhost never replaces: get a newer "
        "one from " +
        (source.empty() ? std::string("the cloud's driver source") : source));
    return;
  }
  if (c.windows) {
    c.plan.blockers.push_back(why + ": install a newer driver (" + [&] {
      std::string source = cloud_driver_source(f, true);
      return source.empty() ? std::string("nvidia.com") : source;
    }() + "), then run gpuhost setup again");
    return;
  }
  plan_linux_driver(c, why);
}

// A toolkit only when asked (--toolkit): the wheels bundle their CUDA libraries.
void plan_toolkit(PlanContext& c) {
  if (!c.request.toolkit) {
    if (!c.facts.cuda.toolkits.empty())
      c.plan.decisions.push_back(
          "a CUDA toolkit is installed (" + c.facts.cuda.toolkits.front().version +
          "); the framework wheels do not use it, they bundle their own CUDA libraries");
    return;
  }
  // nvcc of the newest CUDA the driver fully supports.
  const knowledge::CudaToolkitRelease* release = nullptr;
  if (c.driver) release = c.k.cuda_drivers.newest_fully_supported(*c.driver, c.plan.os);
  if (!release && !c.k.cuda_drivers.releases.empty()) release = &c.k.cuda_drivers.releases.front();
  if (!release) return;
  const std::string mm = std::to_string(release->cuda.major()) + "." + std::to_string(release->cuda.minor());
  for (const auto& t : c.facts.cuda.toolkits) {
    auto v = Version::parse(t.version);
    if (v && v->major() == release->cuda.major() && v->minor() == release->cuda.minor()) {
      c.plan.decisions.push_back("CUDA toolkit " + t.version + " is installed at " + t.path +
                                 ": --toolkit is satisfied");
      return;
    }
  }
  c.plan.decisions.push_back("CUDA toolkit " + mm +
                             " for nvcc (--toolkit), the newest the driver fully supports");
  const std::string title = "Install the CUDA " + mm + " toolkit (nvcc), without a driver";
  const std::string reason =
      "--toolkit: nvcc for building CUDA extensions; the framework wheels do not need it";
  const std::string source =
      "pytorch/pytorch#96595 (a local toolkit matters only for extension builds); research/07 §7.5";
  if (c.windows) {
    auto& s = add_step(c, "toolkit.install", title);
    s.reason = reason;
    s.admin = true;
    s.source = source;
    s.probe = "Test-Path (Join-Path $env:ProgramFiles 'NVIDIA GPU Computing Toolkit\\CUDA\\v" + mm +
              "\\bin\\nvcc.exe')";
    // Subpackages only: the full installer (and choco install cuda) also installs its display
    // driver, which would replace a cloud's licensed one.
    s.actions = {"winget install --id Nvidia.CUDA --version " + mm +
                 " --exact --silent --accept-package-agreements "
                 "--accept-source-agreements --override '-s nvcc_" +
                 mm + " cudart_" + mm + " -n'"};
    s.expect = "nvcc " + mm + " under %ProgramFiles%\\NVIDIA GPU Computing Toolkit\\CUDA\\v" + mm +
               ", the driver untouched";
    return;
  }
  const std::string repo = cuda_repo(c.facts);
  const bool have_repo_step = std::any_of(c.plan.steps.begin(), c.plan.steps.end(),
                                          [](const Step& x) { return x.id == "driver.repository"; });
  if (!have_repo_step && repo.empty()) {
    c.plan.blockers.push_back(
        "--toolkit: NVIDIA's repository has no packages for this distribution; install the toolkit "
        "with NVIDIA's runfile (--toolkit --silent, without the driver)");
    return;
  }
  if (!have_repo_step) add_repository_step(c, "toolkit.repository", repo, "the toolkit packages");
  const std::string pkg = "cuda-toolkit-" + replace_all(mm, ".", "-");
  auto& s = add_step(c, "toolkit.install", title);
  s.reason = reason;
  s.admin = true;
  s.source = source;
  s.probe = "test -x /usr/local/cuda-" + mm + "/bin/nvcc";
  s.actions = {"apt-get install -y " + pkg};
  s.expect = "/usr/local/cuda-" + mm + "/bin/nvcc; " + pkg + " does not pull a driver";
}

}  // namespace gpuhost::setup
