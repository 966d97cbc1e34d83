#include "base/json_fields.h"
#include "doctor/facts.h"

namespace gpuhost::doctor {

namespace {

using json::FieldReader;
using json::Value;

Value strings(const std::vector<std::string>& list) {
  Value a = Value::array();
  for (const auto& s : list) a.push_back(s);
  return a;
}

Value pairs(const std::vector<std::pair<std::string, std::string>>& list) {
  Value o = Value::object();
  for (const auto& [k, v] : list) o[k] = v;
  return o;
}

void read_pairs(FieldReader& r, std::string_view key, std::vector<std::pair<std::string, std::string>>& out) {
  const Value* o = r.object(key);
  if (!o) return;
  out.clear();
  for (const auto& [k, v] : o->members()) {
    if (!v.is_string()) {
      r.fail(Error{ErrorCode::parse_error, r.path(key) + "." + k + ": expected a string"});
      return;
    }
    out.emplace_back(k, v.as_string());
  }
}

// Reads each element of an array member with `read_one(reader, element)`.
template <typename T, typename F>
void read_list(FieldReader& r, std::string_view key, std::vector<T>& out, F read_one) {
  const Value* a = r.array(key);
  if (!a) return;
  out.clear();
  for (std::size_t i = 0; i < a->items().size(); ++i) {
    FieldReader child(a->items()[i], r.path(key) + "[" + std::to_string(i) + "]");
    T item;
    read_one(child, item);
    if (!child.ok()) {
      r.fail(child.error());
      return;
    }
    out.push_back(std::move(item));
  }
}

// Reads an object member with `read_one(reader)`.
template <typename F>
void read_object(FieldReader& r, std::string_view key, F read_one) {
  const Value* o = r.object(key);
  if (!o) return;
  FieldReader child(*o, r.path(key));
  read_one(child);
  if (!child.ok()) r.fail(child.error());
}

Value pci_to_json(const platform::PciDevice& d) {
  Value v;
  v["address"] = d.address;
  v["vendor_id"] = d.vendor_id;
  v["device_id"] = d.device_id;
  v["class_code"] = d.class_code;
  v["driver"] = d.driver;
  v["description"] = d.description;
  v["problem_code"] = d.problem_code;
  return v;
}

void pci_from(FieldReader& r, platform::PciDevice& d) {
  r.read("address", d.address);
  r.read("vendor_id", d.vendor_id);
  r.read("device_id", d.device_id);
  r.read("class_code", d.class_code);
  r.read("driver", d.driver);
  r.read("description", d.description);
  r.read("problem_code", d.problem_code);
}

Value registry_to_json(const RegistryValue& rv) {
  Value v;
  if (rv.value) v["value"] = *rv.value;
  if (!rv.error.empty()) v["error"] = rv.error;
  return v;
}

void registry_from(FieldReader& r, std::string_view key, RegistryValue& rv) {
  read_object(r, key, [&](FieldReader& c) {
    c.read("value", rv.value);
    c.read("error", rv.error);
  });
}

Value system_to_json(const platform::SystemInfo& s) {
  Value v;
  v["hostname"] = s.hostname;
  v["elevated"] = s.elevated;
  Value& os = v["os"];
  os["family"] = platform::os_family_name(s.os.family);
  os["name"] = s.os.name;
  os["version"] = s.os.version;
  os["kernel"] = s.os.kernel;
  os["machine"] = s.os.machine;
  os["under_wine"] = s.os.under_wine;
  os["wine_version"] = s.os.wine_version;
  Value& cpu = v["cpu"];
  cpu["vendor"] = s.cpu.vendor;
  cpu["model"] = s.cpu.model;
  cpu["logical_cores"] = s.cpu.logical_cores;
  Value& mem = v["memory"];
  mem["total_bytes"] = s.memory.total_bytes;
  mem["available_bytes"] = s.memory.available_bytes;
  mem["swap_total_bytes"] = s.memory.swap_total_bytes;
  Value& hv = v["hypervisor"];
  hv["present"] = s.hypervisor.present;
  hv["signature"] = s.hypervisor.signature;
  hv["name"] = s.hypervisor.name;
  Value& dmi = v["dmi"];
  dmi["sys_vendor"] = s.dmi.sys_vendor;
  dmi["product_name"] = s.dmi.product_name;
  dmi["product_version"] = s.dmi.product_version;
  dmi["bios_vendor"] = s.dmi.bios_vendor;
  dmi["bios_version"] = s.dmi.bios_version;
  dmi["board_vendor"] = s.dmi.board_vendor;
  dmi["chassis_vendor"] = s.dmi.chassis_vendor;
  dmi["chassis_asset_tag"] = s.dmi.chassis_asset_tag;
  Value& cloud = v["cloud"];
  cloud["vendor"] = platform::cloud_vendor_id(s.cloud.cloud);
  cloud["evidence"] = s.cloud.evidence;
  return v;
}

void system_from(FieldReader& r, platform::SystemInfo& s) {
  r.read("hostname", s.hostname);
  r.read("elevated", s.elevated);
  read_object(r, "os", [&](FieldReader& c) {
    std::string family;
    c.read("family", family);
    if (family == "windows")
      s.os.family = platform::OsFamily::windows;
    else if (family == "linux" || family.empty())
      s.os.family = platform::OsFamily::linux;
    else
      c.fail(Error{ErrorCode::parse_error, c.path("family") + ": expected \"linux\" or \"windows\", found \"" + family + "\""});
    c.read("name", s.os.name);
    c.read("version", s.os.version);
    c.read("kernel", s.os.kernel);
    c.read("machine", s.os.machine);
    c.read("under_wine", s.os.under_wine);
    c.read("wine_version", s.os.wine_version);
  });
  read_object(r, "cpu", [&](FieldReader& c) {
    c.read("vendor", s.cpu.vendor);
    c.read("model", s.cpu.model);
    c.read("logical_cores", s.cpu.logical_cores);
  });
  read_object(r, "memory", [&](FieldReader& c) {
    c.read("total_bytes", s.memory.total_bytes);
    c.read("available_bytes", s.memory.available_bytes);
    c.read("swap_total_bytes", s.memory.swap_total_bytes);
  });
  read_object(r, "hypervisor", [&](FieldReader& c) {
    c.read("present", s.hypervisor.present);
    c.read("signature", s.hypervisor.signature);
    c.read("name", s.hypervisor.name);
  });
  read_object(r, "dmi", [&](FieldReader& c) {
    c.read("sys_vendor", s.dmi.sys_vendor);
    c.read("product_name", s.dmi.product_name);
    c.read("product_version", s.dmi.product_version);
    c.read("bios_vendor", s.dmi.bios_vendor);
    c.read("bios_version", s.dmi.bios_version);
    c.read("board_vendor", s.dmi.board_vendor);
    c.read("chassis_vendor", s.dmi.chassis_vendor);
    c.read("chassis_asset_tag", s.dmi.chassis_asset_tag);
  });
  read_object(r, "cloud", [&](FieldReader& c) {
    std::string vendor;
    c.read("vendor", vendor);
    if (!vendor.empty()) {
      auto parsed = platform::parse_cloud_vendor(vendor);
      if (!parsed)
        c.fail(Error{ErrorCode::parse_error, c.path("vendor") + ": unknown cloud \"" + vendor + "\""});
      else
        s.cloud.cloud = *parsed;
    }
    c.read("evidence", s.cloud.evidence);
  });
}

Value python_to_json(const PythonFacts& p) {
  Value v;
  v["interpreter"] = p.interpreter;
  v["executable"] = p.executable;
  v["version"] = p.version;
  v["platform"] = p.platform;
  v["found_by"] = p.found_by;
  v["probed"] = p.probed;
  v["timed_out"] = p.timed_out;
  v["probe_error"] = p.probe_error;
  Value& t = v["torch"];
  t["installed"] = p.torch.installed;
  t["imported"] = p.torch.imported;
  t["version"] = p.torch.version;
  t["cuda_build"] = p.torch.cuda_build;
  t["hip_build"] = p.torch.hip_build;
  t["cuda_available"] = p.torch.cuda_available;
  t["cuda_unavailable_reason"] = p.torch.cuda_unavailable_reason;
  t["arch_list"] = strings(p.torch.arch_list);
  t["cudnn_version"] = p.torch.cudnn_version;
  t["device_count"] = p.torch.device_count;
  t["devices"] = strings(p.torch.devices);
  t["error"] = p.torch.error;
  Value& tf = v["tensorflow"];
  tf["installed"] = p.tensorflow.installed;
  tf["imported"] = p.tensorflow.imported;
  tf["version"] = p.tensorflow.version;
  tf["built_with_cuda"] = p.tensorflow.built_with_cuda;
  tf["cuda_build"] = p.tensorflow.cuda_build;
  tf["cudnn_build"] = p.tensorflow.cudnn_build;
  tf["gpus"] = strings(p.tensorflow.gpus);
  tf["error"] = p.tensorflow.error;
  v["tensorflow_gpu_version"] = p.tensorflow_gpu_version;
  v["externally_managed"] = p.externally_managed;
  v["in_venv"] = p.in_venv;
  return v;
}

void python_from(FieldReader& r, PythonFacts& p) {
  r.read("interpreter", p.interpreter);
  r.read("executable", p.executable);
  r.read("version", p.version);
  r.read("platform", p.platform);
  r.read("found_by", p.found_by);
  r.read("probed", p.probed);
  r.read("timed_out", p.timed_out);
  r.read("probe_error", p.probe_error);
  read_object(r, "torch", [&](FieldReader& c) {
    c.read("installed", p.torch.installed);
    c.read("imported", p.torch.imported);
    c.read("version", p.torch.version);
    c.read("cuda_build", p.torch.cuda_build);
    c.read("hip_build", p.torch.hip_build);
    c.read("cuda_available", p.torch.cuda_available);
    c.read("cuda_unavailable_reason", p.torch.cuda_unavailable_reason);
    c.read("arch_list", p.torch.arch_list);
    c.read("cudnn_version", p.torch.cudnn_version);
    c.read("device_count", p.torch.device_count);
    c.read("devices", p.torch.devices);
    c.read("error", p.torch.error);
  });
  read_object(r, "tensorflow", [&](FieldReader& c) {
    c.read("installed", p.tensorflow.installed);
    c.read("imported", p.tensorflow.imported);
    c.read("version", p.tensorflow.version);
    c.read("built_with_cuda", p.tensorflow.built_with_cuda);
    c.read("cuda_build", p.tensorflow.cuda_build);
    c.read("cudnn_build", p.tensorflow.cudnn_build);
    c.read("gpus", p.tensorflow.gpus);
    c.read("error", p.tensorflow.error);
  });
  r.read("tensorflow_gpu_version", p.tensorflow_gpu_version);
  r.read("externally_managed", p.externally_managed);
  r.read("in_venv", p.in_venv);
}

}  // namespace

Result<void> python_facts_from_json(const json::Value& value, std::string where, PythonFacts& out) {
  FieldReader r(value, std::move(where));
  python_from(r, out);
  if (!r.ok()) return std::unexpected(r.error());
  return {};
}

json::Value to_json(const HostFacts& f) {
  Value v;
  v["collected_at"] = f.collected_at;
  v["gpuhost_version"] = f.gpuhost_version;
  v["system"] = system_to_json(f.system);
  Value disks = Value::array();
  for (const auto& d : f.disks) {
    Value dv;
    dv["role"] = d.role;
    dv["path"] = d.path;
    dv["capacity_bytes"] = d.capacity_bytes;
    dv["available_bytes"] = d.available_bytes;
    dv["error"] = d.error;
    disks.push_back(std::move(dv));
  }
  v["disks"] = std::move(disks);
  v["gpu"] = gpu::to_json(f.gpu);

  Value& cuda = v["cuda"];
  Value toolkits = Value::array();
  for (const auto& t : f.cuda.toolkits) {
    Value tv;
    tv["path"] = t.path;
    tv["version"] = t.version;
    tv["found_by"] = t.found_by;
    toolkits.push_back(std::move(tv));
  }
  cuda["toolkits"] = std::move(toolkits);
  cuda["nvcc_on_path"] = f.cuda.nvcc_on_path;
  Value cudnn = Value::array();
  for (const auto& c : f.cuda.cudnn) {
    Value cv;
    cv["path"] = c.path;
    cv["version"] = c.version;
    cudnn.push_back(std::move(cv));
  }
  cuda["cudnn"] = std::move(cudnn);
  cuda["risky_environment"] = pairs(f.cuda.risky_environment);

  Value pythons = Value::array();
  for (const auto& p : f.pythons) pythons.push_back(python_to_json(p));
  v["pythons"] = std::move(pythons);
  v["python_skipped"] = f.python_skipped;
  v["python_full_probe"] = f.python_full_probe;

  Value& win = v["windows"];
  win["tdr_level"] = registry_to_json(f.windows.tdr_level);
  win["tdr_delay"] = registry_to_json(f.windows.tdr_delay);
  win["tdr_ddi_delay"] = registry_to_json(f.windows.tdr_ddi_delay);
  win["hiberboot_enabled"] = registry_to_json(f.windows.hiberboot_enabled);
  win["rdp_hardware_gpu"] = registry_to_json(f.windows.rdp_hardware_gpu);
  win["long_paths_enabled"] = registry_to_json(f.windows.long_paths_enabled);
  win["page_file_bytes"] = f.windows.page_file_bytes;
  win["page_file_known"] = f.windows.page_file_known;
  Value devices = Value::array();
  for (const auto& d : f.windows_devices.display_devices) devices.push_back(pci_to_json(d));
  win["display_devices"] = std::move(devices);
  win["display_devices_error"] = f.windows_devices.error;

  Value& lin = v["linux"];
  if (f.linux.shm_bytes) lin["shm_bytes"] = *f.linux.shm_bytes;
  if (f.linux.open_files_soft) lin["open_files_soft"] = *f.linux.open_files_soft;
  if (f.linux.open_files_hard) lin["open_files_hard"] = *f.linux.open_files_hard;
  lin["persistenced_running"] = f.linux.persistenced_running;
  lin["persistenced_known"] = f.linux.persistenced_known;
  lin["in_container"] = f.linux.in_container;
  Value pci = Value::array();
  for (const auto& d : f.linux.pci_display_devices) pci.push_back(pci_to_json(d));
  lin["pci_display_devices"] = std::move(pci);
  lin["pci_error"] = f.linux.pci_error;
  lin["xid_lines"] = strings(f.linux.xid_lines);
  lin["kernel_log_read"] = f.linux.kernel_log_read;
  lin["kernel_log_error"] = f.linux.kernel_log_error;

  Value& sec = v["security"];
  sec["firewall_state"] = f.security.firewall_state;
  sec["firewall_evidence"] = strings(f.security.firewall_evidence);
  sec["encryption_state"] = f.security.encryption_state;
  sec["encryption_evidence"] = strings(f.security.encryption_evidence);
  sec["secure_boot"] = f.security.secure_boot;
  sec["secure_boot_evidence"] = f.security.secure_boot_evidence;
  Value listening = Value::array();
  for (const auto& s : f.security.listening) {
    Value sv;
    sv["address"] = s.address;
    sv["port"] = s.port;
    sv["pid"] = s.pid;
    listening.push_back(std::move(sv));
  }
  sec["listening"] = std::move(listening);
  sec["listening_error"] = f.security.listening_error;
  v["environment"] = pairs(f.environment);
  return v;
}

Result<HostFacts> facts_from_json(const json::Value& value) {
  HostFacts f;
  FieldReader r(value, "facts");
  r.read("collected_at", f.collected_at);
  r.read("gpuhost_version", f.gpuhost_version);
  read_object(r, "system", [&](FieldReader& c) { system_from(c, f.system); });
  read_list(r, "disks", f.disks, [](FieldReader& c, DiskFacts& d) {
    c.read("role", d.role);
    c.read("path", d.path);
    c.read("capacity_bytes", d.capacity_bytes);
    c.read("available_bytes", d.available_bytes);
    c.read("error", d.error);
  });
  if (const Value* g = r.object("gpu")) {
    auto snapshot = gpu::snapshot_from_json(*g);
    if (!snapshot)
      r.fail(with_context(snapshot.error(), "facts.gpu"));
    else
      f.gpu = std::move(*snapshot);
  }
  read_object(r, "cuda", [&](FieldReader& c) {
    read_list(c, "toolkits", f.cuda.toolkits, [](FieldReader& t, CudaToolkit& k) {
      t.read("path", k.path);
      t.read("version", k.version);
      t.read("found_by", k.found_by);
    });
    c.read("nvcc_on_path", f.cuda.nvcc_on_path);
    read_list(c, "cudnn", f.cuda.cudnn, [](FieldReader& t, CudnnInstall& k) {
      t.read("path", k.path);
      t.read("version", k.version);
    });
    read_pairs(c, "risky_environment", f.cuda.risky_environment);
  });
  read_list(r, "pythons", f.pythons, python_from);
  r.read("python_skipped", f.python_skipped);
  r.read("python_full_probe", f.python_full_probe);
  read_object(r, "windows", [&](FieldReader& c) {
    registry_from(c, "tdr_level", f.windows.tdr_level);
    registry_from(c, "tdr_delay", f.windows.tdr_delay);
    registry_from(c, "tdr_ddi_delay", f.windows.tdr_ddi_delay);
    registry_from(c, "hiberboot_enabled", f.windows.hiberboot_enabled);
    registry_from(c, "rdp_hardware_gpu", f.windows.rdp_hardware_gpu);
    registry_from(c, "long_paths_enabled", f.windows.long_paths_enabled);
    c.read("page_file_bytes", f.windows.page_file_bytes);
    c.read("page_file_known", f.windows.page_file_known);
    read_list(c, "display_devices", f.windows_devices.display_devices, pci_from);
    c.read("display_devices_error", f.windows_devices.error);
  });
  read_object(r, "linux", [&](FieldReader& c) {
    c.read("shm_bytes", f.linux.shm_bytes);
    c.read("open_files_soft", f.linux.open_files_soft);
    c.read("open_files_hard", f.linux.open_files_hard);
    c.read("persistenced_running", f.linux.persistenced_running);
    c.read("persistenced_known", f.linux.persistenced_known);
    c.read("in_container", f.linux.in_container);
    read_list(c, "pci_display_devices", f.linux.pci_display_devices, pci_from);
    c.read("pci_error", f.linux.pci_error);
    c.read("xid_lines", f.linux.xid_lines);
    c.read("kernel_log_read", f.linux.kernel_log_read);
    c.read("kernel_log_error", f.linux.kernel_log_error);
  });
  read_object(r, "security", [&](FieldReader& c) {
    c.read("firewall_state", f.security.firewall_state);
    c.read("firewall_evidence", f.security.firewall_evidence);
    c.read("encryption_state", f.security.encryption_state);
    c.read("encryption_evidence", f.security.encryption_evidence);
    c.read("secure_boot", f.security.secure_boot);
    c.read("secure_boot_evidence", f.security.secure_boot_evidence);
    read_list(c, "listening", f.security.listening, [](FieldReader& s, platform::ListeningSocket& l) {
      s.read("address", l.address);
      s.read("port", l.port);
      s.read("pid", l.pid);
    });
    c.read("listening_error", f.security.listening_error);
  });
  read_pairs(r, "environment", f.environment);
  if (!r.ok()) return std::unexpected(r.error());
  return f;
}

}  // namespace gpuhost::doctor
