#include "base/strings.h"
#include "doctor/rules.h"
#include "doctor/rules_support.h"

namespace gpuhost::doctor {

namespace {


}  // namespace

void judge_host(const HostFacts& facts, Findings& out) {
  const auto& sys = facts.system;
  {
    auto& f = out.add(Layer::host, Severity::info, "host.os", "Operating system");
    f.subject = sys.os.name.empty() ? platform::os_family_name(sys.os.family) : sys.os.name;
    if (!sys.hostname.empty()) f.evidence.push_back("host name " + sys.hostname);
    if (!sys.os.kernel.empty()) f.evidence.push_back("kernel/build " + sys.os.kernel);
    if (!sys.os.machine.empty()) f.evidence.push_back("architecture " + sys.os.machine);
    if (sys.os.under_wine) f.evidence.push_back("running under Wine " + sys.os.wine_version);
  }
  {
    auto& f = out.add(Layer::host, Severity::info, "host.cpu", "CPU");
    f.evidence.push_back(sys.cpu.model.empty() ? "model unknown" : sys.cpu.model);
    f.evidence.push_back(std::to_string(sys.cpu.logical_cores) + " logical cores");
  }
  {
    std::uint64_t gpu_memory = 0;
    for (const auto& d : facts.gpu.devices)
      if (d.memory.has_value()) gpu_memory += d.memory.value->total_bytes;
    bool short_of_gpu = gpu_memory > 0 && sys.memory.total_bytes < gpu_memory;
    auto& f = out.add(Layer::host, short_of_gpu ? Severity::warn : Severity::info, "host.memory",
                      short_of_gpu ? "Less system RAM than GPU memory" : "Memory");
    f.evidence.push_back("RAM " + format_bytes(static_cast<double>(sys.memory.total_bytes)) + ", " +
                         format_bytes(static_cast<double>(sys.memory.available_bytes)) + " available");
    if (gpu_memory) f.evidence.push_back("GPU memory in all " + format_bytes(static_cast<double>(gpu_memory)));
    if (short_of_gpu) {
      // torch.load and from_pretrained materialise weights in host memory before moving them.
      f.fix = "choose an instance with at least as much RAM as GPU memory, or load checkpoints with "
              "torch.load(..., mmap=True) / safetensors so weights are not copied through RAM whole";
    }
  }
  for (const auto& d : facts.disks) {
    std::string id = d.role == "temp directory" ? "host.disk.temp" : "host.disk.work";
    if (!d.error.empty()) {
      auto& f = out.add(Layer::host, Severity::warn, id, "Free space on the " + d.role + " unknown");
      f.subject = d.path;
      f.evidence.push_back(d.error);
      continue;
    }
    Severity s = d.available_bytes < k_gib ? Severity::fail : d.available_bytes < 10 * k_gib ? Severity::warn : Severity::ok;
    auto& f = out.add(Layer::host, s, id,
                      s == Severity::ok ? "Free space on the " + d.role : "Little free space on the " + d.role);
    f.subject = d.path;
    f.evidence.push_back(format_bytes(static_cast<double>(d.available_bytes)) + " free of " +
                         format_bytes(static_cast<double>(d.capacity_bytes)));
    if (s != Severity::ok) {
      // A checkpoint with optimizer state is several times the model size; a save that runs out
      // of space leaves a truncated file behind.
      f.fix = facts.is_windows()
                  ? "free space (cleanmgr /sagerun:1, or move datasets and checkpoints to a larger volume)"
                  : "free space (e.g. pip cache purge; docker system prune) or point checkpoints and TMPDIR at a larger volume";
    }
  }
  {
    auto& f = out.add(Layer::host, Severity::info, "host.hypervisor", sys.hypervisor.present ? "Virtual machine" : "No hypervisor seen");
    if (sys.hypervisor.present)
      f.evidence.push_back(sys.hypervisor.name.empty() ? sys.hypervisor.signature
                                                       : sys.hypervisor.name + " (" + sys.hypervisor.signature + ")");
    else
      f.evidence.push_back("CPUID reports no hypervisor (bare metal, or a hypervisor that hides itself)");
  }
  {
    bool cloud = sys.cloud.cloud != platform::CloudVendor::none;
    auto& f = out.add(Layer::host, Severity::info, "host.cloud",
                      cloud ? std::string("Cloud: ") + platform::cloud_vendor_name(sys.cloud.cloud) : "No cloud vendor recognised");
    if (cloud) f.evidence.push_back(sys.cloud.evidence);
    if (!sys.dmi.sys_vendor.empty()) f.evidence.push_back("sys_vendor=" + sys.dmi.sys_vendor);
    if (!sys.dmi.product_name.empty()) f.evidence.push_back("product_name=" + sys.dmi.product_name);
  }
}

}  // namespace gpuhost::doctor
