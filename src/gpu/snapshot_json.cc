// The JSON form of a GpuSnapshot; the format is written down in doc/gpu-snapshot-json.md.

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/json_fields.h"
#include "base/strings.h"
#include "gpu/snapshot.h"

namespace gpuhost::gpu {
namespace {

using json::Value;

constexpr int k_schema = 1;

// ---- writing ----

Value issue_to_json(const NvmlIssue& issue) {
  Value v = Value::object();
  v["status"] = issue.status;
  v["name"] = issue.name;
  v["message"] = issue.message;
  return v;
}

Value optional_issue(const std::optional<NvmlIssue>& issue) {
  return issue ? issue_to_json(*issue) : Value();
}

// A reading is its value, {"unavailable": issue}, or null when it was never attempted.
template <typename T, typename Fn>
Value reading_to_json(const Reading<T>& reading, Fn&& value_to_json) {
  if (reading.value) return value_to_json(*reading.value);
  if (reading.issue) {
    Value v = Value::object();
    v["unavailable"] = issue_to_json(*reading.issue);
    return v;
  }
  return Value();
}

template <typename T>
Value reading_to_json(const Reading<T>& reading) {
  return reading_to_json(reading, [](const T& value) { return Value(value); });
}

Value gpm_to_json(const Reading<GpmActivity>& gpm) {
  return reading_to_json(gpm, [](const GpmActivity& g) {
    Value o = Value::object();
    o["interval_s"] = g.interval_s;
    o["graphics_util_percent"] = reading_to_json(g.graphics_util_percent);
    o["tensor_util_percent"] = reading_to_json(g.tensor_util_percent);
    o["dram_bw_util_percent"] = reading_to_json(g.dram_bw_util_percent);
    o["pcie_tx_mib_per_s"] = reading_to_json(g.pcie_tx_mib_per_s);
    o["pcie_rx_mib_per_s"] = reading_to_json(g.pcie_rx_mib_per_s);
    return o;
  });
}

Value optional_uint(const std::optional<unsigned>& v) {
  return v ? Value(*v) : Value();
}

std::string hex32(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08X", v);
  return text;
}

Value device_to_json(const GpuDevice& d) {
  Value v = Value::object();
  v["index"] = d.index;
  v["lost"] = d.lost;
  v["handle_error"] = optional_issue(d.handle_error);
  v["name"] = d.name;
  v["uuid"] = d.uuid;
  v["serial"] = d.serial;
  v["pci_bus_id"] = d.pci_bus_id;
  v["pci_device_id"] = hex32(d.pci_device_id);
  v["architecture"] = reading_to_json(d.architecture);
  v["cc_major"] = reading_to_json(d.cc_major);
  v["cc_minor"] = reading_to_json(d.cc_minor);
  v["vbios_version"] = d.vbios_version;
  v["inforom_valid"] = reading_to_json(d.inforom_valid);
  v["memory"] = reading_to_json(d.memory, [](const MemoryState& m) {
    Value o = Value::object();
    o["total_bytes"] = m.total_bytes;
    o["used_bytes"] = m.used_bytes;
    o["free_bytes"] = m.free_bytes;
    o["reserved_bytes"] = m.reserved_bytes;
    return o;
  });
  v["ecc"] = reading_to_json(d.ecc, [](const EccState& e) {
    Value o = Value::object();
    o["enabled_current"] = e.enabled_current;
    o["enabled_pending"] = e.enabled_pending;
    o["volatile_corrected"] = e.volatile_corrected;
    o["volatile_uncorrected"] = e.volatile_uncorrected;
    o["aggregate_corrected"] = e.aggregate_corrected;
    o["aggregate_uncorrected"] = e.aggregate_uncorrected;
    return o;
  });
  v["retired_pages"] = reading_to_json(d.retired_pages, [](const RetiredPages& r) {
    Value o = Value::object();
    o["single_bit"] = r.single_bit;
    o["double_bit"] = r.double_bit;
    o["pending"] = r.pending;
    return o;
  });
  v["remapped_rows"] = reading_to_json(d.remapped_rows, [](const RemappedRows& r) {
    Value o = Value::object();
    o["correctable"] = r.correctable;
    o["uncorrectable"] = r.uncorrectable;
    o["pending"] = r.pending;
    o["failure"] = r.failure;
    return o;
  });
  v["pcie"] = reading_to_json(d.pcie, [](const PcieLink& p) {
    Value o = Value::object();
    o["current_generation"] = p.current_generation;
    o["max_generation"] = p.max_generation;
    o["gpu_max_generation"] = p.gpu_max_generation;
    o["current_width"] = p.current_width;
    o["max_width"] = p.max_width;
    return o;
  });
  v["pcie_replay_counter"] = reading_to_json(d.pcie_replay_counter);
  v["persistence_mode"] = reading_to_json(d.persistence_mode);
  v["compute_mode"] = reading_to_json(d.compute_mode);
  v["driver_model"] = reading_to_json(d.driver_model, [](const DriverModelState& m) {
    // A model newer than gpuhost keeps its number.
    auto model = [](DriverModel x) {
      std::string name = driver_model_name(x);
      return name == "unknown" ? Value(static_cast<int>(x)) : Value(name);
    };
    Value o = Value::object();
    o["current"] = model(m.current);
    o["pending"] = model(m.pending);
    return o;
  });
  v["mig"] = reading_to_json(d.mig, [](const MigState& m) {
    Value o = Value::object();
    o["current"] = m.current;
    o["pending"] = m.pending;
    return o;
  });
  v["mig_devices"] = reading_to_json(d.mig_devices, [](const std::vector<MigDevice>& list) {
    Value a = Value::array();
    for (const auto& m : list) {
      Value o = Value::object();
      o["slot"] = m.slot;
      o["uuid"] = m.uuid;
      o["name"] = m.name;
      o["profile"] = m.profile;
      o["gpu_instance_id"] = optional_uint(m.gpu_instance_id);
      o["compute_instance_id"] = optional_uint(m.compute_instance_id);
      o["memory_total_bytes"] = m.memory ? Value(m.memory->total_bytes) : Value();
      o["memory_used_bytes"] = m.memory ? Value(m.memory->used_bytes) : Value();
      o["memory_free_bytes"] = m.memory ? Value(m.memory->free_bytes) : Value();
      Value pids = Value::array();
      for (unsigned pid : m.compute_pids) pids.push_back(pid);
      o["compute_pids"] = std::move(pids);
      o["gpm"] = gpm_to_json(m.gpm);
      a.push_back(std::move(o));
    }
    return a;
  });
  v["virtualization"] = reading_to_json(d.virtualization, [](VirtualizationMode m) {
    // A mode newer than gpuhost keeps its number.
    std::string name = virtualization_mode_name(m);
    return name == "unknown" ? Value(static_cast<int>(m)) : Value(name);
  });
  v["vgpu_license"] = reading_to_json(d.vgpu_license, [](const VgpuLicense& l) {
    Value o = Value::object();
    o["licensing_supported"] = l.licensing_supported;
    o["licensed"] = l.licensed;
    o["feature"] = l.feature;
    o["state"] = l.state;
    o["expiry_unix"] = l.expiry_unix;
    return o;
  });
  v["clocks_event_reasons"] = reading_to_json(d.clocks_event_reasons, [](std::uint64_t mask) {
    Value o = Value::object();
    o["mask"] = mask;
    Value names = Value::array();
    for (auto& n : clocks_event_reason_names(mask)) names.push_back(n);
    o["names"] = std::move(names);
    return o;
  });
  v["temperature"] = reading_to_json(d.temperature, [](const Temperatures& t) {
    Value o = Value::object();
    o["current_c"] = t.current_c;
    o["shutdown_c"] = optional_uint(t.shutdown_c);
    o["slowdown_c"] = optional_uint(t.slowdown_c);
    o["gpu_max_c"] = optional_uint(t.gpu_max_c);
    o["memory_max_c"] = optional_uint(t.memory_max_c);
    return o;
  });
  v["clocks"] = reading_to_json(d.clocks, [](const Clocks& c) {
    Value o = Value::object();
    o["sm_mhz"] = c.sm_mhz;
    o["memory_mhz"] = c.memory_mhz;
    o["sm_max_mhz"] = c.sm_max_mhz;
    o["memory_max_mhz"] = c.memory_max_mhz;
    return o;
  });
  v["power"] = reading_to_json(d.power, [](const Power& p) {
    Value o = Value::object();
    o["usage_mw"] = p.usage_mw;
    o["enforced_limit_mw"] = p.enforced_limit_mw;
    return o;
  });
  v["utilization"] = reading_to_json(d.utilization, [](const Utilization& u) {
    Value o = Value::object();
    o["gpu_percent"] = u.gpu_percent;
    o["memory_percent"] = u.memory_percent;
    return o;
  });
  v["performance_state"] = reading_to_json(d.performance_state);
  v["fan_percent"] = reading_to_json(d.fan_percent);
  v["processes"] = reading_to_json(d.processes, [](const std::vector<GpuProcess>& list) {
    Value a = Value::array();
    for (const auto& p : list) {
      Value o = Value::object();
      o["pid"] = p.pid;
      o["graphics"] = p.graphics;
      o["used_memory_bytes"] = p.used_memory_bytes ? Value(*p.used_memory_bytes) : Value();
      a.push_back(std::move(o));
    }
    return a;
  });
  v["total_energy_mj"] = reading_to_json(d.total_energy_mj);
  v["pcie_throughput"] = reading_to_json(d.pcie_throughput, [](const PcieThroughput& t) {
    Value o = Value::object();
    o["tx_kb_per_s"] = t.tx_kb_per_s;
    o["rx_kb_per_s"] = t.rx_kb_per_s;
    return o;
  });
  v["encoder_percent"] = reading_to_json(d.encoder_percent);
  v["decoder_percent"] = reading_to_json(d.decoder_percent);
  v["memory_temperature_c"] = reading_to_json(d.memory_temperature_c);
  v["nvlink_traffic"] = reading_to_json(d.nvlink_traffic, [](const NvlinkTraffic& t) {
    Value o = Value::object();
    o["tx_kib"] = t.tx_kib;
    o["rx_kib"] = t.rx_kib;
    o["timestamp_us"] = t.timestamp_us;
    return o;
  });
  v["xid"] = reading_to_json(d.xid, [](const XidState& x) {
    Value o = Value::object();
    o["last_xid"] = x.last_xid;
    o["count"] = x.count;
    o["last_unix"] = x.last_unix;
    return o;
  });
  v["gpm"] = gpm_to_json(d.gpm);
  v["nvlink_bandwidth"] = reading_to_json(d.nvlink_bandwidth);
  return v;
}

// ---- reading ----

Error parse_error(const std::string& where, const std::string& what) {
  return Error{ErrorCode::parse_error, where + ": " + what};
}

// Reads one snapshot, remembering the first error; later reads after an error are harmless.
class SnapshotParser {
 public:
  [[nodiscard]] bool ok() const { return !m_error; }
  [[nodiscard]] const Error& error() const { return *m_error; }
  void fail(Error e) {
    if (!m_error) m_error = std::move(e);
  }
  void take(json::FieldReader& reader) {
    if (!reader.ok()) fail(reader.error());
  }

  std::optional<NvmlIssue> issue(const Value* v, const std::string& where) {
    if (!v || v->is_null()) return std::nullopt;
    json::FieldReader r(*v, where);
    NvmlIssue issue;
    r.read("status", issue.status);
    r.read("name", issue.name);
    r.read("message", issue.message);
    take(r);
    return issue;
  }

  // Fills `out` from member `key` of `parent`: the value through `parse`, or the issue.
  template <typename T>
  void reading(const Value& parent, std::string_view key, const std::string& where, Reading<T>& out,
               const std::function<std::optional<T>(const Value&, const std::string&)>& parse) {
    const Value* v = parent.find(key);
    std::string path = where + "." + std::string(key);
    if (!v || v->is_null()) return;
    if (const Value* unavailable = v->find("unavailable"); unavailable && v->size() == 1) {
      out.issue = issue(unavailable, path + ".unavailable");
      return;
    }
    out.value = parse(*v, path);
  }

  // Scalar readings.
  std::optional<int> integer(const Value& v, const std::string& where) {
    if (!v.is_integer()) return type_error<int>(v, where, "a whole number");
    return static_cast<int>(v.as_int());
  }
  std::optional<unsigned> uint(const Value& v, const std::string& where) {
    if (!v.is_integer() || v.as_int() < 0) return type_error<unsigned>(v, where, "a whole number >= 0");
    return static_cast<unsigned>(v.as_int());
  }
  std::optional<double> number(const Value& v, const std::string& where) {
    if (!v.is_number()) return type_error<double>(v, where, "a number");
    return v.as_number();
  }
  std::optional<std::uint64_t> uint64(const Value& v, const std::string& where) {
    if (!v.is_integer() || v.as_int() < 0) return type_error<std::uint64_t>(v, where, "a whole number >= 0");
    return static_cast<std::uint64_t>(v.as_int());
  }
  std::optional<std::int64_t> int64(const Value* v, const std::string& where) {
    if (!v || v->is_null()) return 0;
    if (!v->is_integer()) return type_error<std::int64_t>(*v, where, "a whole number");
    return v->as_int();
  }
  std::optional<bool> boolean(const Value& v, const std::string& where) {
    if (!v.is_bool()) return type_error<bool>(v, where, "true or false");
    return v.as_bool();
  }

  // A GPU's or MIG instance's "gpm" reading.
  void gpm(const Value& parent, const std::string& where, Reading<GpmActivity>& out) {
    const auto as_double = [this](const Value& x, const std::string& w) { return number(x, w); };
    reading<GpmActivity>(parent, "gpm", where, out,
                         [&, this](const Value& x, const std::string& w) -> std::optional<GpmActivity> {
                           json::FieldReader o(x, w);
                           take(o);
                           if (!o.ok()) return std::nullopt;
                           GpmActivity g;
                           if (const Value* interval = x.find("interval_s"); interval && !interval->is_null())
                             g.interval_s = number(*interval, w + ".interval_s").value_or(0);
                           reading<double>(x, "graphics_util_percent", w, g.graphics_util_percent, as_double);
                           reading<double>(x, "tensor_util_percent", w, g.tensor_util_percent, as_double);
                           reading<double>(x, "dram_bw_util_percent", w, g.dram_bw_util_percent, as_double);
                           reading<double>(x, "pcie_tx_mib_per_s", w, g.pcie_tx_mib_per_s, as_double);
                           reading<double>(x, "pcie_rx_mib_per_s", w, g.pcie_rx_mib_per_s, as_double);
                           return g;
                         });
  }

  template <typename T>
  std::optional<T> type_error(const Value& v, const std::string& where, const char* want) {
    fail(parse_error(where, std::string("expected ") + want + ", found " + json::type_name(v.type())));
    return std::nullopt;
  }

  // An object-valued reading read with a FieldReader.
  template <typename T, typename Fill>
  std::optional<T> object(const Value& v, const std::string& where, Fill&& fill) {
    json::FieldReader r(v, where);
    T out{};
    if (r.ok()) fill(r, out);
    take(r);
    if (!r.ok()) return std::nullopt;
    return out;
  }

  std::optional<DriverModel> driver_model(const Value* v, const std::string& where) {
    if (!v || v->is_null()) return DriverModel::wddm;
    if (v->is_integer()) return static_cast<DriverModel>(v->as_int());
    if (v->is_string()) {
      for (auto m : {DriverModel::wddm, DriverModel::tcc, DriverModel::mcdm})
        if (iequals(v->as_string(), driver_model_name(m))) return m;
      if (iequals(v->as_string(), "WDM")) return DriverModel::tcc;
    }
    fail(parse_error(where, "expected WDDM, TCC, MCDM or a number"));
    return std::nullopt;
  }

  std::optional<VirtualizationMode> virtualization(const Value& v, const std::string& where) {
    if (v.is_integer()) return static_cast<VirtualizationMode>(v.as_int());
    if (v.is_string()) {
      for (int i = 0; i <= 4; ++i) {
        auto m = static_cast<VirtualizationMode>(i);
        if (v.as_string() == virtualization_mode_name(m)) return m;
      }
    }
    fail(parse_error(where, "expected none, passthrough, vgpu, host_vgpu, host_vsga or a number"));
    return std::nullopt;
  }

  std::optional<std::uint32_t> hex_or_integer(const Value* v, const std::string& where) {
    if (!v || v->is_null()) return 0;
    if (v->is_integer()) return static_cast<std::uint32_t>(v->as_int());
    if (v->is_string()) {
      std::string_view text = v->as_string();
      if (text.starts_with("0x") || text.starts_with("0X")) text.remove_prefix(2);
      if (auto n = parse_int(text, 16); n && *n >= 0 && *n <= 0xFFFFFFFFLL)
        return static_cast<std::uint32_t>(*n);
    }
    fail(parse_error(where, "expected a hexadecimal string like \"0x20B210DE\" or a number"));
    return std::nullopt;
  }

  GpuDevice device(const Value& v, const std::string& where);
  void activity(const Value& v, const std::string& where, GpuDevice& d);

 private:
  std::optional<Error> m_error;
};

GpuDevice SnapshotParser::device(const Value& v, const std::string& where) {
  GpuDevice d;
  json::FieldReader r(v, where);
  if (!r.ok()) {
    take(r);
    return d;
  }
  r.read("index", d.index);
  r.read("lost", d.lost);
  d.handle_error = issue(v.find("handle_error"), where + ".handle_error");
  r.read("name", d.name);
  r.read("uuid", d.uuid);
  r.read("serial", d.serial);
  r.read("pci_bus_id", d.pci_bus_id);
  d.pci_device_id = hex_or_integer(v.find("pci_device_id"), where + ".pci_device_id").value_or(0);
  r.read("vbios_version", d.vbios_version);
  take(r);

  auto as_int = [this](const Value& x, const std::string& w) { return integer(x, w); };
  auto as_uint = [this](const Value& x, const std::string& w) { return uint(x, w); };
  auto as_bool = [this](const Value& x, const std::string& w) { return boolean(x, w); };
  reading<int>(v, "architecture", where, d.architecture, as_int);
  reading<int>(v, "cc_major", where, d.cc_major, as_int);
  reading<int>(v, "cc_minor", where, d.cc_minor, as_int);
  reading<bool>(v, "inforom_valid", where, d.inforom_valid, as_bool);
  reading<MemoryState>(v, "memory", where, d.memory, [this](const Value& x, const std::string& w) {
    return object<MemoryState>(x, w, [](json::FieldReader& o, MemoryState& m) {
      o.read("total_bytes", m.total_bytes);
      o.read("used_bytes", m.used_bytes);
      o.read("free_bytes", m.free_bytes);
      o.read("reserved_bytes", m.reserved_bytes);
    });
  });
  reading<EccState>(v, "ecc", where, d.ecc, [this](const Value& x, const std::string& w) {
    return object<EccState>(x, w, [](json::FieldReader& o, EccState& e) {
      o.read("enabled_current", e.enabled_current);
      o.read("enabled_pending", e.enabled_pending);
      o.read("volatile_corrected", e.volatile_corrected);
      o.read("volatile_uncorrected", e.volatile_uncorrected);
      o.read("aggregate_corrected", e.aggregate_corrected);
      o.read("aggregate_uncorrected", e.aggregate_uncorrected);
    });
  });
  reading<RetiredPages>(v, "retired_pages", where, d.retired_pages,
                        [this](const Value& x, const std::string& w) {
                          return object<RetiredPages>(x, w, [](json::FieldReader& o, RetiredPages& p) {
                            o.read("single_bit", p.single_bit);
                            o.read("double_bit", p.double_bit);
                            o.read("pending", p.pending);
                          });
                        });
  reading<RemappedRows>(v, "remapped_rows", where, d.remapped_rows,
                        [this](const Value& x, const std::string& w) {
                          return object<RemappedRows>(x, w, [](json::FieldReader& o, RemappedRows& p) {
                            o.read("correctable", p.correctable);
                            o.read("uncorrectable", p.uncorrectable);
                            o.read("pending", p.pending);
                            o.read("failure", p.failure);
                          });
                        });
  reading<PcieLink>(v, "pcie", where, d.pcie, [this](const Value& x, const std::string& w) {
    return object<PcieLink>(x, w, [](json::FieldReader& o, PcieLink& p) {
      o.read("current_generation", p.current_generation);
      o.read("max_generation", p.max_generation);
      o.read("gpu_max_generation", p.gpu_max_generation);
      o.read("current_width", p.current_width);
      o.read("max_width", p.max_width);
    });
  });
  reading<unsigned>(v, "pcie_replay_counter", where, d.pcie_replay_counter, as_uint);
  reading<bool>(v, "persistence_mode", where, d.persistence_mode, as_bool);
  reading<int>(v, "compute_mode", where, d.compute_mode, as_int);
  reading<DriverModelState>(v, "driver_model", where, d.driver_model,
                            [this](const Value& x, const std::string& w) {
                              json::FieldReader o(x, w);
                              take(o);
                              if (!o.ok()) return std::optional<DriverModelState>();
                              auto current = driver_model(x.find("current"), w + ".current");
                              auto pending = driver_model(x.find("pending"), w + ".pending");
                              if (!current || !pending) return std::optional<DriverModelState>();
                              return std::optional<DriverModelState>(DriverModelState{*current, *pending});
                            });
  reading<MigState>(v, "mig", where, d.mig, [this](const Value& x, const std::string& w) {
    return object<MigState>(x, w, [](json::FieldReader& o, MigState& m) {
      o.read("current", m.current);
      o.read("pending", m.pending);
    });
  });
  reading<VirtualizationMode>(v, "virtualization", where, d.virtualization,
                              [this](const Value& x, const std::string& w) { return virtualization(x, w); });
  reading<VgpuLicense>(v, "vgpu_license", where, d.vgpu_license,
                       [this](const Value& x, const std::string& w) {
                         auto license = object<VgpuLicense>(x, w, [](json::FieldReader& o, VgpuLicense& l) {
                           o.read("licensing_supported", l.licensing_supported);
                           o.read("licensed", l.licensed);
                           o.read("feature", l.feature);
                           o.read("state", l.state);
                         });
                         if (license) {
                           // json::FieldReader has no 64-bit signed read that is the same type on both OSes.
                           if (const Value* e = x.find("expiry_unix"); e && !e->is_null()) {
                             if (!e->is_integer())
                               return type_error<VgpuLicense>(*e, w + ".expiry_unix", "a whole number");
                             license->expiry_unix = e->as_int();
                           }
                         }
                         return license;
                       });
  reading<std::uint64_t>(v, "clocks_event_reasons", where, d.clocks_event_reasons,
                         [this](const Value& x, const std::string& w) -> std::optional<std::uint64_t> {
                           // The names are derived from the mask and not read back.
                           json::FieldReader o(x, w);
                           std::uint64_t mask = 0;
                           o.read("mask", mask);
                           take(o);
                           if (!o.ok()) return std::nullopt;
                           return mask;
                         });
  reading<Temperatures>(v, "temperature", where, d.temperature, [this](const Value& x, const std::string& w) {
    return object<Temperatures>(x, w, [](json::FieldReader& o, Temperatures& t) {
      o.read("current_c", t.current_c);
      o.read("shutdown_c", t.shutdown_c);
      o.read("slowdown_c", t.slowdown_c);
      o.read("gpu_max_c", t.gpu_max_c);
      o.read("memory_max_c", t.memory_max_c);
    });
  });
  reading<Clocks>(v, "clocks", where, d.clocks, [this](const Value& x, const std::string& w) {
    return object<Clocks>(x, w, [](json::FieldReader& o, Clocks& c) {
      o.read("sm_mhz", c.sm_mhz);
      o.read("memory_mhz", c.memory_mhz);
      o.read("sm_max_mhz", c.sm_max_mhz);
      o.read("memory_max_mhz", c.memory_max_mhz);
    });
  });
  reading<Power>(v, "power", where, d.power, [this](const Value& x, const std::string& w) {
    return object<Power>(x, w, [](json::FieldReader& o, Power& p) {
      o.read("usage_mw", p.usage_mw);
      o.read("enforced_limit_mw", p.enforced_limit_mw);
    });
  });
  reading<Utilization>(v, "utilization", where, d.utilization, [this](const Value& x, const std::string& w) {
    return object<Utilization>(x, w, [](json::FieldReader& o, Utilization& u) {
      o.read("gpu_percent", u.gpu_percent);
      o.read("memory_percent", u.memory_percent);
    });
  });
  reading<unsigned>(v, "performance_state", where, d.performance_state, as_uint);
  reading<unsigned>(v, "fan_percent", where, d.fan_percent, as_uint);
  activity(v, where, d);
  return d;
}

// The readings added with schema 1's second revision (processes onwards); absent in older reports.
void SnapshotParser::activity(const Value& v, const std::string& where, GpuDevice& d) {
  auto as_uint = [this](const Value& x, const std::string& w) { return uint(x, w); };
  auto as_u64 = [this](const Value& x, const std::string& w) { return uint64(x, w); };
  auto as_double = [this](const Value& x, const std::string& w) { return number(x, w); };
  reading<std::vector<GpuProcess>>(
      v, "processes", where, d.processes,
      [this](const Value& x, const std::string& w) -> std::optional<std::vector<GpuProcess>> {
        if (!x.is_array()) return type_error<std::vector<GpuProcess>>(x, w, "an array");
        std::vector<GpuProcess> out;
        for (std::size_t i = 0; i < x.items().size(); ++i) {
          auto p = object<GpuProcess>(x.items()[i], w + "[" + std::to_string(i) + "]",
                                      [](json::FieldReader& o, GpuProcess& g) {
                                        o.read("pid", g.pid);
                                        o.read("graphics", g.graphics);
                                        o.read("used_memory_bytes", g.used_memory_bytes);
                                      });
          if (!p) return std::nullopt;
          out.push_back(*p);
        }
        return out;
      });
  reading<std::vector<MigDevice>>(
      v, "mig_devices", where, d.mig_devices,
      [this](const Value& x, const std::string& w) -> std::optional<std::vector<MigDevice>> {
        if (!x.is_array()) return type_error<std::vector<MigDevice>>(x, w, "an array");
        std::vector<MigDevice> out;
        for (std::size_t i = 0; i < x.items().size(); ++i) {
          auto m = object<MigDevice>(x.items()[i], w + "[" + std::to_string(i) + "]",
                                     [](json::FieldReader& o, MigDevice& g) {
                                       o.read("slot", g.slot);
                                       o.read("uuid", g.uuid);
                                       o.read("name", g.name);
                                       o.read("profile", g.profile);
                                       o.read("gpu_instance_id", g.gpu_instance_id);
                                       o.read("compute_instance_id", g.compute_instance_id);
                                       std::optional<std::uint64_t> total, used, free;
                                       o.read("memory_total_bytes", total);
                                       o.read("memory_used_bytes", used);
                                       o.read("memory_free_bytes", free);
                                       if (total && used && free) g.memory = MemoryState{*total, *used, *free, 0};
                                       if (const Value* pids = o.array("compute_pids"))
                                         for (const auto& pid : pids->items())
                                           if (pid.is_integer()) g.compute_pids.push_back(static_cast<unsigned>(pid.as_int()));
                                     });
          if (!m) return std::nullopt;
          gpm(x.items()[i], w + "[" + std::to_string(i) + "]", m->gpm);
          out.push_back(std::move(*m));
        }
        return out;
      });
  reading<std::uint64_t>(v, "total_energy_mj", where, d.total_energy_mj, as_u64);
  reading<PcieThroughput>(v, "pcie_throughput", where, d.pcie_throughput,
                          [this](const Value& x, const std::string& w) {
                            return object<PcieThroughput>(x, w, [](json::FieldReader& o, PcieThroughput& t) {
                              o.read("tx_kb_per_s", t.tx_kb_per_s);
                              o.read("rx_kb_per_s", t.rx_kb_per_s);
                            });
                          });
  reading<unsigned>(v, "encoder_percent", where, d.encoder_percent, as_uint);
  reading<unsigned>(v, "decoder_percent", where, d.decoder_percent, as_uint);
  reading<unsigned>(v, "memory_temperature_c", where, d.memory_temperature_c, as_uint);
  reading<NvlinkTraffic>(v, "nvlink_traffic", where, d.nvlink_traffic,
                         [this](const Value& x, const std::string& w) -> std::optional<NvlinkTraffic> {
                           auto t = object<NvlinkTraffic>(x, w, [](json::FieldReader& o, NvlinkTraffic& n) {
                             o.read("tx_kib", n.tx_kib);
                             o.read("rx_kib", n.rx_kib);
                           });
                           auto timestamp = int64(x.find("timestamp_us"), w + ".timestamp_us");
                           if (!t || !timestamp) return std::nullopt;
                           t->timestamp_us = *timestamp;
                           return t;
                         });
  reading<XidState>(v, "xid", where, d.xid,
                    [this](const Value& x, const std::string& w) -> std::optional<XidState> {
                      auto state = object<XidState>(x, w, [](json::FieldReader& o, XidState& s) {
                        o.read("last_xid", s.last_xid);
                        o.read("count", s.count);
                      });
                      auto last = int64(x.find("last_unix"), w + ".last_unix");
                      if (!state || !last) return std::nullopt;
                      state->last_unix = *last;
                      return state;
                    });
  gpm(v, where, d.gpm);
  reading<double>(v, "nvlink_bandwidth", where, d.nvlink_bandwidth, as_double);
}

}  // namespace

Value to_json(const GpuSnapshot& s) {
  Value v = Value::object();
  v["schema"] = k_schema;
  v["available"] = s.available;
  v["library_path"] = s.library_path;
  v["error"] = optional_issue(s.error);
  Value missing = Value::array();
  for (const auto& name : s.missing_symbols) missing.push_back(name);
  v["missing_symbols"] = std::move(missing);
  v["driver_version"] = s.driver_version;
  v["nvml_version"] = s.nvml_version;
  v["cuda_driver_version"] = s.cuda_driver_version ? Value(*s.cuda_driver_version) : Value();
  v["cuda_driver_error"] = optional_issue(s.cuda_driver_error);
  v["count_error"] = optional_issue(s.count_error);
  Value devices = Value::array();
  for (const auto& d : s.devices) devices.push_back(device_to_json(d));
  v["devices"] = std::move(devices);
  return v;
}

Result<GpuSnapshot> snapshot_from_json(const Value& value) {
  const std::string where = "gpu";
  GpuSnapshot s;
  SnapshotParser parser;
  json::FieldReader r(value, where);
  if (!r.ok()) return std::unexpected(r.error());
  r.read("available", s.available);
  r.read("library_path", s.library_path);
  r.read("missing_symbols", s.missing_symbols);
  r.read("driver_version", s.driver_version);
  r.read("nvml_version", s.nvml_version);
  if (const Value* cuda = value.find("cuda_driver_version"); cuda && !cuda->is_null())
    s.cuda_driver_version = parser.integer(*cuda, where + ".cuda_driver_version");
  parser.take(r);
  s.error = parser.issue(value.find("error"), where + ".error");
  s.cuda_driver_error = parser.issue(value.find("cuda_driver_error"), where + ".cuda_driver_error");
  s.count_error = parser.issue(value.find("count_error"), where + ".count_error");
  if (const Value* devices = r.array("devices")) {
    for (std::size_t i = 0; i < devices->items().size(); ++i)
      s.devices.push_back(parser.device(devices->items()[i], where + ".devices[" + std::to_string(i) + "]"));
  }
  parser.take(r);
  if (!parser.ok()) return std::unexpected(parser.error());
  return s;
}

}  // namespace gpuhost::gpu
