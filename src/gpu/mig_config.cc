#include "gpu/mig_config.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/yaml.h"

namespace gpuhost::gpu {

using json::Value;

namespace {

std::unexpected<Error> invalid(const std::string& where, const std::string& what) {
  return make_error(ErrorCode::parse_error, where + ": " + what);
}

// "12" -> 12 (digits only); nullopt otherwise.
std::optional<unsigned> digits(std::string_view s) {
  if (s.empty() || s.size() > 6) return std::nullopt;
  unsigned n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<unsigned>(c - '0');
  }
  return n;
}

std::optional<std::uint32_t> pci_id(std::string_view s) {
  if (!(s.starts_with("0x") || s.starts_with("0X")) || s.size() != 10) return std::nullopt;
  std::uint32_t v = 0;
  for (char c : s.substr(2)) {
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                         : -1;
    if (d < 0) return std::nullopt;
    v = v * 16 + static_cast<std::uint32_t>(d);
  }
  return v;
}

std::string hex_id(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08X", v);
  return text;
}

Result<MigConfigEntry::Filter> read_filter(const Value& v, const std::string& where) {
  if (!v.is_string()) return invalid(where, "a PCI ID string such as \"0x20B210DE\" expected");
  const std::string& s = v.as_string();
  const auto colon = s.find(':');
  MigConfigEntry::Filter f;
  const auto device = pci_id(std::string_view(s).substr(0, colon));
  if (!device)
    return invalid(where, "'" + s + "' is not a PCI ID (0xDDDDVVVV: device then vendor, as lspci -nn shows)");
  f.device_id = *device;
  if (colon != std::string::npos) {
    f.subsystem_id = pci_id(std::string_view(s).substr(colon + 1));
    if (!f.subsystem_id) return invalid(where, "'" + s + "': the subsystem ID after ':' is not 0xDDDDVVVV");
  }
  return f;
}

Result<MigConfigEntry> read_entry(const Value& v, const std::string& where) {
  if (!v.is_object()) return invalid(where, "a mapping with devices and mig-enabled expected");
  for (const auto& [key, _] : v.members())
    if (key != "device-filter" && key != "devices" && key != "mig-enabled" && key != "mig-devices")
      return invalid(
          where, "unknown key '" + key + "' (an entry has device-filter, devices, mig-enabled, mig-devices)");
  MigConfigEntry e;
  if (const Value* f = v.find("device-filter")) {
    if (f->is_array()) {
      for (std::size_t i = 0; i < f->items().size(); ++i)
        e.device_filter.push_back(
            GPUHOST_TRY(read_filter(f->items()[i], where + ".device-filter[" + std::to_string(i) + "]")));
    } else {
      e.device_filter.push_back(GPUHOST_TRY(read_filter(*f, where + ".device-filter")));
    }
  }
  const Value* devices = v.find("devices");
  if (!devices || devices->is_null())
    return invalid(where, "'devices' is required (all, or a list of GPU indices)");
  if (devices->is_string()) {
    if (devices->as_string() != "all")
      return invalid(where + ".devices", "'" + devices->as_string() + "': all, or a list of GPU indices");
  } else if (devices->is_array()) {
    std::vector<unsigned> list;
    for (const auto& d : devices->items()) {
      if (!d.is_integer() || d.as_int() < 0 || d.as_int() > 1023)
        return invalid(where + ".devices", "GPU indices are integers from 0");
      list.push_back(static_cast<unsigned>(d.as_int()));
    }
    if (list.empty()) return invalid(where + ".devices", "an empty list selects no GPU");
    e.devices = std::move(list);
  } else {
    return invalid(where + ".devices", "all, or a list of GPU indices");
  }
  const Value* enabled = v.find("mig-enabled");
  if (!enabled || !enabled->is_bool()) return invalid(where, "'mig-enabled' is required: true or false");
  e.mig_enabled = enabled->as_bool();
  const Value* mig_devices = v.find("mig-devices");
  if (!e.mig_enabled) {
    if (mig_devices) return invalid(where, "'mig-devices' is not allowed with mig-enabled: false");
    return e;
  }
  if (!mig_devices || !mig_devices->is_object())
    return invalid(
        where, "'mig-devices' is required with mig-enabled: true (a profile -> count mapping; {} for none)");
  for (const auto& [profile, count] : mig_devices->members()) {
    const std::string at = where + ".mig-devices." + profile;
    if (!parse_mig_profile_name(profile))
      return invalid(
          at,
          "'" + profile + "' is not a MIG profile name (such as 1g.10gb, 3g.40gb, 1g.10gb+me, 1c.3g.40gb)");
    if (!count.is_integer() || count.as_int() < 0 || count.as_int() > 64)
      return invalid(at, "the count is an integer from 0");
    e.mig_devices.emplace_back(profile, static_cast<unsigned>(count.as_int()));
  }
  return e;
}

}  // namespace

std::string MigProfileName::gpu_instance() const {
  return std::to_string(gpu_slices) + "g." + std::to_string(memory_gb) + "gb" + attributes;
}

std::optional<MigProfileName> parse_mig_profile_name(std::string_view name) {
  MigProfileName p;
  std::string_view s = name;
  // Optional "Nc." compute-instance prefix.
  if (const auto c = s.find("c."); c != std::string_view::npos && c < s.find('g')) {
    auto n = digits(s.substr(0, c));
    if (!n || *n == 0) return std::nullopt;
    p.compute_slices = *n;
    s.remove_prefix(c + 2);
  }
  const auto g = s.find("g.");
  if (g == std::string_view::npos) return std::nullopt;
  auto slices = digits(s.substr(0, g));
  if (!slices || *slices == 0) return std::nullopt;
  p.gpu_slices = *slices;
  s.remove_prefix(g + 2);
  const auto gb = s.find("gb");
  if (gb == std::string_view::npos) return std::nullopt;
  auto memory = digits(s.substr(0, gb));
  if (!memory || *memory == 0) return std::nullopt;
  p.memory_gb = *memory;
  s.remove_prefix(gb + 2);
  if (!s.empty() && s != "+me" && s != "+gfx" && s != "-me" && s != "+me.all") return std::nullopt;
  p.attributes = std::string(s);
  if (p.compute_slices > p.gpu_slices) return std::nullopt;
  return p;
}

bool MigConfigEntry::selects(unsigned index, std::uint32_t device_id, std::uint32_t subsystem_id) const {
  if (devices && std::find(devices->begin(), devices->end(), index) == devices->end()) return false;
  if (device_filter.empty()) return true;
  for (const auto& f : device_filter)
    if (f.device_id == device_id && (!f.subsystem_id || *f.subsystem_id == subsystem_id)) return true;
  return false;
}

const MigConfig* MigConfigFile::find(std::string_view name) const {
  for (const auto& c : configs)
    if (c.name == name) return &c;
  return nullptr;
}

std::string MigConfigFile::names() const {
  std::string out;
  for (const auto& c : configs) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}

Result<MigConfigFile> mig_config_from_value(const Value& document) {
  if (!document.is_object()) return invalid("the file", "a mapping with version and mig-configs expected");
  for (const auto& [key, _] : document.members())
    if (key != "version" && key != "mig-configs")
      return invalid(key, "unknown key (a mig-parted file has version and mig-configs)");
  const Value* version = document.find("version");
  if (!version || !version->is_string() || version->as_string() != "v1")
    return invalid("version", "must be v1 (the mig-parted format gpuhost reads)");
  const Value* configs = document.find("mig-configs");
  if (!configs || !configs->is_object() || configs->members().empty())
    return invalid("mig-configs", "at least one named config is required");
  MigConfigFile file;
  for (const auto& [name, list] : configs->members()) {
    const std::string where = "mig-configs." + name;
    if (!list.is_array() || list.items().empty())
      return invalid(where, "a non-empty list of entries expected");
    MigConfig config{name, {}};
    for (std::size_t i = 0; i < list.items().size(); ++i)
      config.entries.push_back(
          GPUHOST_TRY(read_entry(list.items()[i], where + "[" + std::to_string(i) + "]")));
    file.configs.push_back(std::move(config));
  }
  return file;
}

Result<MigConfigFile> parse_mig_config(std::string_view text) {
  auto tree = yaml::parse(text);
  if (!tree) return std::unexpected(tree.error());
  return mig_config_from_value(*tree);
}

Value mig_config_to_value(const MigConfig& config) {
  Value doc = Value::object();
  doc["version"] = "v1";
  Value list = Value::array();
  for (const auto& e : config.entries) {
    Value entry = Value::object();
    if (e.device_filter.size() == 1 && !e.device_filter[0].subsystem_id) {
      entry["device-filter"] = hex_id(e.device_filter[0].device_id);
    } else if (!e.device_filter.empty()) {
      Value filters = Value::array();
      for (const auto& f : e.device_filter)
        filters.push_back(hex_id(f.device_id) +
                          (f.subsystem_id ? ":" + hex_id(*f.subsystem_id) : std::string()));
      entry["device-filter"] = std::move(filters);
    }
    if (e.devices) {
      Value d = Value::array();
      for (unsigned i : *e.devices) d.push_back(i);
      entry["devices"] = std::move(d);
    } else {
      entry["devices"] = "all";
    }
    entry["mig-enabled"] = e.mig_enabled;
    if (e.mig_enabled) {
      Value m = Value::object();
      for (const auto& [profile, count] : e.mig_devices) m[profile] = count;
      entry["mig-devices"] = std::move(m);
    }
    list.push_back(std::move(entry));
  }
  doc["mig-configs"][config.name] = std::move(list);
  return doc;
}

}  // namespace gpuhost::gpu
