// gpuhost mig: MIG layouts from NVIDIA mig-parted's v1 files, applied, asserted and exported
// through NVML (gpu/mig_config.h, gpu/mig_manager.h; doc/mig.md).

#include <algorithm>
#include <chrono>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>

#include "base/yaml.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "gpu/mig_config.h"
#include "gpu/mig_manager.h"
#include "gpu/nvml_hold.h"
#include "platform/files.h"
#include "platform/process.h"
#include "platform/system_info.h"

namespace gpuhost::cli {

const char k_mig_help[] = R"(Usage: gpuhost mig apply  -f FILE -c NAME [--mode-only] [--dry-run]
       gpuhost mig assert -f FILE -c NAME
       gpuhost mig export [-c NAME] [-o FILE]
       gpuhost mig list

Splits GPUs into MIG instances so that one host carries several jobs, each on its own slice
with its own memory and faults (A100, A30, H100, H200, B200...). The layouts come from NVIDIA
mig-parted's `version: v1` files, read as they are: a file nvidia-mig-parted applies, gpuhost
applies, and what `export` writes `nvidia-mig-parted assert` accepts.

  apply   sets each selected GPU's MIG mode, then its instances: the GPU is cleared (compute
          instances before GPU instances) and each creation order is tried until the layout
          fits, then read back. Nothing is touched while a process runs on a GPU it would change.
          A mode change needs a GPU reset: where the platform cannot reset (a passthrough VM, as
          most cloud VMs are) the mode stays pending until the machine reboots: run the same
          command again after it. Instances do not survive a reboot: apply again at boot.
  assert  exit 0 when the GPUs hold the config, 1 (with the differences) when not.
  export  prints the current layout as a mig-parted file with one config (default `current`).
  list    each GPU's MIG mode, profiles (ID, slices, memory, how many fit) and instances.

Then give each job its slice: gpuhost run --gpu mig:3g.40gb ... (or --gpu MIG-<uuid>).

MIG is Linux only (NVIDIA); on Windows NVML can only turn it off. For isolated jobs on a
Windows host use Hyper-V GPU partitioning (Windows Server 2025 Datacenter:
Set-VMHostPartitionableGpu) or give each VM a whole GPU (DDA).

Flags:
  -f, --config-file FILE     the mig-parted file (- reads standard input)
  -c, --selected-config NAME the config in it to apply or assert; export: the name to write
  -o, --output FILE          export: write the file there instead of standard output
  --mode-only                apply: set the MIG modes only, no instances
  --dry-run                  apply: say what would change, change nothing
  --json                     print the result as JSON (doc/mig.md)
  --no-color, --color=auto|always|never
  -h, --help

Exit codes:
  0  applied (or nothing to change); assert: the config is in place
  1  assert: the config is not in place (each difference is printed)
  2  bad command line or file, an unknown config or profile, or MIG asked for on Windows
  3  NVML cannot be used, or a call failed (the GPU is left without instances)
  6  a mode change is pending until the machine reboots: run the same command after it
  7  blocked: processes or other clients hold a GPU (listed); stop them and run it again

Examples:
  gpuhost mig list
  gpuhost mig apply -f /etc/nvidia-mig-manager/config.yaml -c all-balanced
  gpuhost mig assert -f config.yaml -c all-balanced || gpuhost mig apply -f config.yaml -c all-balanced
  gpuhost mig export -o layout.yaml
)";

namespace {

constexpr FlagSpec k_mig_flags[] = {{"--config-file", true, "-f"},
                                    {"--selected-config", true, "-c"},
                                    {"--output", true, "-o"},
                                    {"--mode-only", false},
                                    {"--dry-run", false}};

using gpu::MigGpu;

std::string join(const std::vector<std::string>& list, const char* separator = ", ") {
  std::string out;
  for (const auto& s : list) out += (out.empty() ? "" : separator) + s;
  return out;
}

std::string layout_text(const std::vector<std::string>& layout) {
  if (layout.empty()) return "no instances";
  std::map<std::string, unsigned> counts;
  for (const auto& p : layout) ++counts[p];
  std::vector<std::string> parts;
  for (const auto& [p, n] : counts) parts.push_back(std::to_string(n) + " x " + p);
  return join(parts, " + ");
}

// What a config asks of one GPU.
struct Wanted {
  unsigned index = 0;
  bool enabled = false;
  std::vector<std::string> layout;  // sorted
};

Result<std::vector<Wanted>> wanted_for(const gpu::MigConfig& config, const std::vector<MigGpu>& gpus) {
  std::vector<Wanted> out;
  for (std::size_t e = 0; e < config.entries.size(); ++e)
    if (config.entries[e].devices)
      for (unsigned i : *config.entries[e].devices)
        if (i >= gpus.size())
          return make_error(ErrorCode::invalid_argument, "config " + config.name + " names GPU " +
                                                             std::to_string(i) + ", but this host has " +
                                                             std::to_string(gpus.size()));
  for (const auto& g : gpus) {
    const gpu::MigConfigEntry* match = nullptr;
    for (const auto& entry : config.entries) {
      if (!entry.selects(g.index, g.pci_device_id, g.pci_subsystem_id)) continue;
      if (match)
        return make_error(
            ErrorCode::invalid_argument,
            "GPU " + std::to_string(g.index) + " is selected by two entries of config " + config.name);
      match = &entry;
    }
    if (!match) continue;
    Wanted w{g.index, match->mig_enabled, {}};
    for (const auto& [profile, count] : match->mig_devices)
      for (unsigned k = 0; k < count; ++k) w.layout.push_back(profile);
    std::sort(w.layout.begin(), w.layout.end());
    out.push_back(std::move(w));
  }
  return out;
}

Result<gpu::MigConfig> load_config(const ParsedArgs& parsed) {
  const auto file = parsed.value("--config-file");
  const auto name = parsed.value("--selected-config");
  if (!file || !name)
    return make_error(ErrorCode::invalid_argument,
                      "-f FILE and -c NAME are both needed (the mig-parted file and its config)");
  std::string text;
  if (*file == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    auto read = platform::read_file(*file);
    if (!read) return make_error(ErrorCode::invalid_argument, *file + ": " + read.error().message);
    text = std::move(*read);
  }
  auto parsed_file = gpu::parse_mig_config(text);
  if (!parsed_file)
    return make_error(ErrorCode::invalid_argument, *file + ": " + parsed_file.error().message);
  const gpu::MigConfig* config = parsed_file->find(*name);
  if (!config)
    return make_error(ErrorCode::invalid_argument,
                      *file + " has no config '" + *name + "'; it has " + parsed_file->names());
  return *config;
}

json::Value gpu_json(const MigGpu& g) {
  json::Value v = json::Value::object();
  v["index"] = g.index;
  v["name"] = g.name;
  v["uuid"] = g.uuid;
  v["mig_enabled"] = g.current;
  v["mig_pending"] = g.pending;
  json::Value layout = json::Value::array();
  for (const auto& p : g.layout()) layout.push_back(p);
  v["layout"] = std::move(layout);
  json::Value instances = json::Value::array();
  for (const auto& gi : g.instances) {
    json::Value i = json::Value::object();
    i["gpu_instance_id"] = gi.id;
    i["profile"] = gi.profile;
    i["placement_start"] = gi.start;
    i["placement_size"] = gi.size;
    i["compute_instances"] = gi.compute_slices.size();
    instances.push_back(std::move(i));
  }
  v["instances"] = std::move(instances);
  json::Value pids = json::Value::array();
  for (unsigned pid : g.compute_pids) pids.push_back(pid);
  v["compute_pids"] = std::move(pids);
  return v;
}

// The current layout as one mig-parted config: consecutive GPUs with the same PCI ID and state
// share an entry.
gpu::MigConfig export_config(const std::vector<MigGpu>& gpus, const std::string& name) {
  gpu::MigConfig config{name, {}};
  for (const auto& g : gpus) {
    if (!g.mig_capable) continue;
    std::vector<std::pair<std::string, unsigned>> devices;
    for (const auto& p : g.layout()) {
      if (!devices.empty() && devices.back().first == p)
        ++devices.back().second;
      else
        devices.emplace_back(p, 1);
    }
    if (!config.entries.empty()) {
      auto& last = config.entries.back();
      if (last.device_filter.size() == 1 && last.device_filter[0].device_id == g.pci_device_id &&
          last.mig_enabled == g.current && last.mig_devices == devices && last.devices &&
          last.devices->back() + 1 == g.index) {
        last.devices->push_back(g.index);
        continue;
      }
    }
    gpu::MigConfigEntry entry;
    if (g.pci_device_id) entry.device_filter.push_back({g.pci_device_id, std::nullopt});
    entry.devices = std::vector<unsigned>{g.index};
    entry.mig_enabled = g.current;
    entry.mig_devices = std::move(devices);
    config.entries.push_back(std::move(entry));
  }
  return config;
}

struct Outcome {
  int code = k_exit_ok;
  std::vector<std::string> lines;  // what happened, one GPU each
  std::string error;               // when code != 0: the reason
  std::string hint;
};

const char* reset_blockers =
    "what holds a GPU: nvidia-persistenced, DCGM (nv-hostengine, dcgm-exporter), nvsm, the nvidia_drm "
    "module, "
    "monitoring (nvidia-smi, DCGM exporters, nvitop; gpuhost serve closes NVML by itself) and CUDA processes";

int apply(CommandContext& context, const ParsedArgs& parsed, bool json, bool windows) {
  auto config = load_config(parsed);
  if (!config)
    return report_error(context.err, config.error().message, "see gpuhost mig --help", k_exit_usage);
  if (windows && std::any_of(config->entries.begin(), config->entries.end(),
                             [](const auto& e) { return e.mig_enabled; }))
    return report_error(
        context.err, "MIG is supported on Linux only (NVIDIA); NVML on Windows can only turn it off",
        "for isolated jobs on a Windows host use Hyper-V GPU partitioning (Set-VMHostPartitionableGpu, "
        "Windows Server 2025 Datacenter) or a whole GPU per VM (DDA)",
        k_exit_usage);
  const bool dry_run = parsed.has("--dry-run"), mode_only = parsed.has("--mode-only");
  auto nvml = gpu::NvmlLibrary::open();
  if (!nvml.initialized())
    return report_error(context.err, "NVML cannot be used: " + nvml.error()->message,
                        "gpuhost doctor says why", k_exit_error);
  gpu::MigManager manager(nvml);
  auto gpus = manager.read();
  if (!gpus) return report_error(context.err, gpus.error().message, "gpuhost doctor", k_exit_error);
  auto wanted = wanted_for(*config, *gpus);
  if (!wanted) return report_error(context.err, wanted.error().message, "", k_exit_usage);
  if (wanted->empty())
    return report_error(context.err, "config " + config->name + " selects none of this host's GPUs",
                        "check its devices and device-filter (gpuhost mig list shows the GPUs' PCI IDs)",
                        k_exit_usage);

  Outcome outcome;
  json::Value results = json::Value::array();
  auto progress = [&](const std::string& line) {
    outcome.lines.push_back(line);
    if (!json) context.out << line << "\n";
  };
  for (const Wanted& w : *wanted) {
    const MigGpu& before = (*gpus)[w.index];
    const std::string who = "GPU " + std::to_string(w.index) + " (" + before.name + ")";
    json::Value r = json::Value::object();
    r["index"] = w.index;
    r["mode_before"] = before.current;
    if (!before.mig_capable) {
      if (!w.enabled) {
        progress(who + ": no MIG on this GPU; left as it is");
        continue;
      }
      outcome = {k_exit_usage, outcome.lines,
                 who + " does not support MIG (A100, A30, H100, H200 and later do)", ""};
      break;
    }
    // 1. The mode.
    if (before.current != w.enabled || before.pending != w.enabled) {
      if (dry_run) {
        progress(who + ": would turn MIG " + (w.enabled ? "on" : "off"));
        r["mode_change"] = "planned";
        results.push_back(std::move(r));
        continue;
      }
      if (!w.enabled && !before.instances.empty()) {
        if (!before.compute_pids.empty()) {
          outcome = {k_exit_blocked, outcome.lines,
                     who + ": processes run on its MIG instances (PIDs " +
                         [&] {
                           std::vector<std::string> p;
                           for (unsigned pid : before.compute_pids) p.push_back(std::to_string(pid));
                           return join(p);
                         }() +
                         "): MIG is not turned off under them",
                     "stop them and run the same command again"};
          break;
        }
        if (auto cleared = manager.clear(w.index); !cleared) {
          outcome = {k_exit_error, outcome.lines, cleared.error().message, ""};
          break;
        }
      }
      // gpuhost's own NVML readers (serve, advisors) step aside for the reset (gpu/nvml_hold.h).
      auto hold =
          gpu::NvmlHold::take(gpu::nvml_hold_directory(),
                              "gpuhost mig apply, pid " + std::to_string(platform::current_process_id()));
      if (!hold && hold.error().code == ErrorCode::unavailable) {
        outcome = {k_exit_blocked, outcome.lines, hold.error().message, ""};
        break;
      }
      std::vector<std::string> readers;
      if (hold) readers = hold->wait_for_readers(std::chrono::seconds(5));
      auto change = manager.set_mode(w.index, w.enabled);
      if (!change) {
        outcome = {k_exit_error, outcome.lines, who + ": " + change.error().message, ""};
        break;
      }
      if (change->status != gpu::nvml::NVML_SUCCESS) {
        const bool unsupported = change->status == gpu::nvml::NVML_ERROR_NOT_SUPPORTED;
        outcome = {unsupported ? k_exit_usage : k_exit_error, outcome.lines,
                   who + ": setting MIG mode failed: " + nvml.issue(change->status).message,
                   change->status == gpu::nvml::NVML_ERROR_NO_PERMISSION ? "run it as root" : ""};
        break;
      }
      if (change->activation == gpu::nvml::NVML_ERROR_RESET_REQUIRED) {
        progress(who + ": MIG " + (w.enabled ? "on" : "off") +
                 " is pending: this platform cannot reset the GPU (a passthrough VM); it applies at the next "
                 "reboot");
        r["mode_change"] = "pending_reboot";
        results.push_back(std::move(r));
        if (outcome.code == k_exit_ok) {
          outcome.code = k_exit_reboot;
          outcome.error = "MIG mode changes are pending until this machine reboots";
          outcome.hint = "reboot, then run the same command again to create the instances";
        }
        continue;
      }
      if (change->activation == gpu::nvml::NVML_ERROR_IN_USE) {
        outcome = {
            k_exit_blocked, outcome.lines,
            who + ": MIG " + (w.enabled ? "on" : "off") +
                " is pending: the GPU could not be reset, something holds it" +
                (readers.empty()
                     ? std::string()
                     : " (gpuhost readers that did not close NVML within 5 s: " + join(readers, "; ") + ")"),
            std::string("stop ") + reset_blockers + ", then run the same command again"};
        break;
      }
      if (change->activation != gpu::nvml::NVML_SUCCESS) {
        outcome = {k_exit_error, outcome.lines,
                   who + ": the GPU reset failed: " + nvml.issue(change->activation).message, ""};
        break;
      }
      progress(who + ": MIG turned " + (w.enabled ? "on" : "off"));
      r["mode_change"] = "applied";
    }
    if (!w.enabled || mode_only) {
      results.push_back(std::move(r));
      continue;
    }
    // 2. The instances, on the GPU as it is now.
    auto now = manager.read();
    if (!now) {
      outcome = {k_exit_error, outcome.lines, now.error().message, ""};
      break;
    }
    const MigGpu& g = (*now)[w.index];
    std::vector<std::string> gi_names;
    for (const auto& name : w.layout) {
      const auto parsed_name = gpu::parse_mig_profile_name(name);
      if (parsed_name && parsed_name->compute_slices != 0) {
        outcome = {k_exit_usage, outcome.lines,
                   who + ": compute-instance profiles such as " + name + " are not applied by gpuhost yet",
                   "use whole GPU instances (" + parsed_name->gpu_instance() +
                       "), or nvidia-mig-parted for this layout"};
        break;
      }
      const gpu::MigGpuProfile* p = g.profile(name);
      if (!p) {
        outcome = {k_exit_usage, outcome.lines,
                   who + " has no MIG profile " + name + "; it has " + g.profile_names(),
                   "profile names differ by GPU model and memory size"};
        break;
      }
      gi_names.push_back(name);
    }
    if (outcome.code != k_exit_ok && outcome.code != k_exit_reboot) break;
    for (const auto& p : g.profiles) {
      const auto n = static_cast<unsigned>(std::count(gi_names.begin(), gi_names.end(), p.name));
      if (n > p.instances) {
        outcome = {k_exit_usage, outcome.lines,
                   who + ": " + std::to_string(n) + " x " + p.name + " asked, the GPU holds at most " +
                       std::to_string(p.instances),
                   ""};
        break;
      }
    }
    if (outcome.code != k_exit_ok && outcome.code != k_exit_reboot) break;
    r["layout_before"] = gpu_json(g)["layout"];
    if (g.layout() == w.layout) {
      progress(who + ": already holds " + layout_text(w.layout));
      results.push_back(std::move(r));
      continue;
    }
    if (dry_run) {
      progress(who + ": would replace " + layout_text(g.layout()) + " with " + layout_text(w.layout));
      results.push_back(std::move(r));
      continue;
    }
    if (!g.compute_pids.empty()) {
      std::vector<std::string> p;
      for (unsigned pid : g.compute_pids) p.push_back(std::to_string(pid));
      outcome = {
          k_exit_blocked, outcome.lines,
          who + ": processes run on it (PIDs " + join(p) + "): its instances are not replaced under them",
          "stop them (nvidia-smi shows them per MIG device) and run the same command again"};
      break;
    }
    if (auto applied = manager.apply_layout(w.index, gi_names); !applied) {
      outcome = {applied.error().code == ErrorCode::invalid_argument ? k_exit_usage : k_exit_error,
                 outcome.lines, applied.error().message, ""};
      break;
    }
    auto after = manager.read();
    if (after) r["gpu"] = gpu_json((*after)[w.index]);
    progress(who + ": now holds " + layout_text(w.layout));
    results.push_back(std::move(r));
  }
  if (json) {
    json::Value doc = json::Value::object();
    doc["config"] = config->name;
    doc["dry_run"] = dry_run;
    doc["exit_code"] = outcome.code;
    if (!outcome.error.empty()) doc["error"] = outcome.error;
    doc["gpus"] = std::move(results);
    context.out << json::dump(doc, 2) << "\n";
  }
  if (outcome.code != k_exit_ok) return report_error(context.err, outcome.error, outcome.hint, outcome.code);
  return k_exit_ok;
}

int assert_config(CommandContext& context, const ParsedArgs& parsed, bool json) {
  auto config = load_config(parsed);
  if (!config)
    return report_error(context.err, config.error().message, "see gpuhost mig --help", k_exit_usage);
  auto nvml = gpu::NvmlLibrary::open();
  if (!nvml.initialized())
    return report_error(context.err, "NVML cannot be used: " + nvml.error()->message,
                        "gpuhost doctor says why", k_exit_error);
  auto gpus = gpu::MigManager(nvml).read();
  if (!gpus) return report_error(context.err, gpus.error().message, "", k_exit_error);
  auto wanted = wanted_for(*config, *gpus);
  if (!wanted) return report_error(context.err, wanted.error().message, "", k_exit_usage);
  std::vector<std::string> differences;
  for (const Wanted& w : *wanted) {
    const MigGpu& g = (*gpus)[w.index];
    const std::string who = "GPU " + std::to_string(w.index) + " (" + g.name + ")";
    if (g.current != w.enabled) {
      differences.push_back(who + ": MIG is " + (g.current ? "on" : "off") + ", the config wants it " +
                            (w.enabled ? "on" : "off") +
                            (g.pending == w.enabled ? " (pending until a reboot)" : ""));
      continue;
    }
    if (w.enabled && g.layout() != w.layout)
      differences.push_back(who + ": holds " + layout_text(g.layout()) + ", the config wants " +
                            layout_text(w.layout));
  }
  if (json) {
    json::Value doc = json::Value::object();
    doc["config"] = config->name;
    doc["applied"] = differences.empty();
    json::Value d = json::Value::array();
    for (const auto& s : differences) d.push_back(s);
    doc["differences"] = std::move(d);
    context.out << json::dump(doc, 2) << "\n";
  } else if (differences.empty()) {
    context.out << "config " << config->name << " is applied\n";
  } else {
    context.out << "selected configuration not currently applied (" << config->name << "):\n";
    for (const auto& s : differences) context.out << "  " << s << "\n";
  }
  return differences.empty() ? k_exit_ok : k_exit_findings;
}

int export_or_list(CommandContext& context, const ParsedArgs& parsed, bool json, bool list) {
  auto nvml = gpu::NvmlLibrary::open();
  if (!nvml.initialized())
    return report_error(context.err, "NVML cannot be used: " + nvml.error()->message,
                        "gpuhost doctor says why", k_exit_error);
  auto gpus = gpu::MigManager(nvml).read();
  if (!gpus) return report_error(context.err, gpus.error().message, "", k_exit_error);
  if (list) {
    if (json) {
      json::Value doc = json::Value::array();
      for (const auto& g : *gpus) {
        json::Value v = gpu_json(g);
        json::Value profiles = json::Value::array();
        for (const auto& p : g.profiles) {
          json::Value o = json::Value::object();
          o["name"] = p.name;
          o["id"] = p.id;
          o["slices"] = p.slices;
          o["instances"] = p.instances;
          o["memory_mib"] = p.memory_mib;
          o["multiprocessors"] = p.multiprocessors;
          profiles.push_back(std::move(o));
        }
        v["profiles"] = std::move(profiles);
        doc.push_back(std::move(v));
      }
      context.out << json::dump(doc, 2) << "\n";
      return k_exit_ok;
    }
    for (const auto& g : *gpus) {
      context.out << "GPU " << g.index << " " << g.name << ": MIG "
                  << (!g.mig_capable ? "not supported"
                      : g.current    ? "on"
                                     : "off")
                  << (g.mig_capable && g.pending != g.current
                          ? std::string(" (") + (g.pending ? "on" : "off") + " pending a reset or reboot)"
                          : "")
                  << "\n";
      for (const auto& p : g.profiles)
        context.out << "  profile " << p.name << "  ID " << p.id << ", " << p.slices << " slices, "
                    << p.memory_mib << " MiB, up to " << p.instances << "\n";
      for (const auto& gi : g.instances)
        context.out << "  instance " << gi.id << ": " << gi.profile << " at slice " << gi.start << "\n";
      if (g.current && g.instances.empty())
        context.out << "  no instances (gpuhost mig apply creates them)\n";
    }
    return k_exit_ok;
  }
  const std::string name = parsed.value("--selected-config").value_or("current");
  const gpu::MigConfig config = export_config(*gpus, name);
  if (config.entries.empty())
    return report_error(context.err, "no GPU of this host supports MIG: nothing to export", "", k_exit_error);
  const std::string text = yaml::dump(gpu::mig_config_to_value(config));
  if (auto out = parsed.value("--output")) {
    if (auto written = platform::write_file_atomic(*out, text); !written)
      return report_error(context.err, *out + ": " + written.error().message, "", k_exit_error);
    if (!json) context.err << "gpuhost mig: wrote " << *out << "\n";
  } else if (!json) {
    context.out << text;
  }
  if (json) context.out << json::dump(gpu::mig_config_to_value(config), 2) << "\n";
  return k_exit_ok;
}

}  // namespace

int run_mig(CommandContext& context) {
  std::vector<FlagSpec> specs(std::begin(k_mig_flags), std::end(k_mig_flags));
  specs.insert(specs.end(), std::begin(k_common_flags), std::end(k_common_flags));
  auto parsed = parse_args(context.args, specs);
  if (!parsed)
    return report_error(context.err, parsed.error().message, "see gpuhost mig --help", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "", k_exit_usage);
  if (common->help) {
    context.out << k_mig_help;
    return k_exit_ok;
  }
  if (parsed->positionals.size() != 1)
    return report_error(context.err, "gpuhost mig takes one of apply, assert, export, list",
                        "see gpuhost mig --help", k_exit_usage);
  const std::string verb = parsed->positionals.front();
  const bool windows = platform::current_os() == platform::OsFamily::windows;
  const bool config_flags = parsed->has("--config-file");
  if (verb == "apply") return apply(context, *parsed, common->json, windows);
  if (verb == "assert") return assert_config(context, *parsed, common->json);
  if (verb == "export" || verb == "list") {
    if (config_flags || parsed->has("--mode-only") || parsed->has("--dry-run"))
      return report_error(
          context.err,
          "gpuhost mig " + verb + " reads the GPUs, not a file (-f, --mode-only and --dry-run are for apply)",
          "", k_exit_usage);
    return export_or_list(context, *parsed, common->json, verb == "list");
  }
  return report_error(context.err, "unknown mig action '" + verb + "': apply, assert, export or list",
                      "see gpuhost mig --help", k_exit_usage);
}

}  // namespace gpuhost::cli
