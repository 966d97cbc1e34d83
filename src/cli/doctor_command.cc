#include <filesystem>
#include <fstream>
#include <ostream>

#include "base/json.h"
#include "base/strings.h"
#include "cli/commands.h"
#include "cli/doctor_render.h"
#include "cli/exit_codes.h"
#include "cli/progress.h"
#include "doctor/collect.h"
#include "doctor/report.h"
#include "doctor/rules.h"
#include "knowledge/knowledge.h"
#include "platform/environment.h"
#include "platform/files.h"

namespace gpuhost::cli {

const char k_doctor_help[] = R"(Usage: gpuhost doctor [FLAGS]

Checks every layer a GPU training job depends on and says, for each problem, what is wrong, the
evidence, and the exact fix for this OS:
  host        OS, CPU, RAM, free disk, hypervisor, cloud vendor
  gpu         driver and NVML, each GPU's health: ECC, retired pages / row remapping, PCIe link,
              persistence, driver model (Windows), MIG, vGPU licence, thermal/power slowdown,
              Xid errors (Linux kernel log), Device Manager problem codes (Windows)
  cuda        CUDA toolkits and whether this driver runs them, cuDNN, variables that break CUDA
  frameworks  PyTorch and TensorFlow in every Python on PATH (and --python): CUDA build,
              compiled GPU architectures, cuda.is_available(), the native-Windows TF rule
  os          Windows: TDR, Fast Startup, RDP GPU policy, long paths, page file;
              Linux: nvidia-persistenced, /dev/shm, open-file limit
  security    firewall, disk encryption, ML services listening on all interfaces
  preflight   the newest PyTorch / TensorFlow build that will work here, with install commands

Flags:
  --json                 print the report as JSON (schema: doc/doctor-json.md)
  --save FILE            also write the JSON report to FILE (atomically)
  --from FILE            judge a report saved on another host with this gpuhost's knowledge
  --python PATH          also probe this interpreter, venv or conda env (repeatable)
  --no-python            skip the framework probes (fast: milliseconds)
  --full-probe           import torch/tensorflow in every interpreter, to catch broken installs
                         even where no GPU could use them (default: import only on GPU hosts;
                         elsewhere versions and build facts are read from the installed files)
  --python-timeout SECS  stop a Python probe after SECS seconds (default 60)
  --knowledge DIR        use data files in DIR over the built-in ones (also GPUHOST_KNOWLEDGE_DIR)
  --only LAYERS          report only these layers, comma-separated (e.g. gpu,cuda)
  -v, --verbose          show all evidence and fixes, also for passing checks
  --no-color, --color=auto|always|never
  -h, --help

Environment:
  GPUHOST_NVML_LIBRARY   load NVML from this path instead of the driver's default location
  NO_COLOR               any non-empty value turns colour off

Exit codes:
  0  no check failed (warnings allowed)
  1  at least one check failed
  2  bad command line
  3  could not run: unreadable --from file, corrupt knowledge override

Examples:
  gpuhost doctor
  gpuhost doctor --python ~/venvs/train --only frameworks,preflight
  gpuhost doctor --no-python --json > report.json
  gpuhost doctor --from report.json        # a report a user sent you
)";

namespace {

struct DoctorOptions {
  CommonOptions common;
  std::string from;
  std::string save;
  std::vector<std::string> pythons;
  bool no_python = false;
  bool full_probe = false;
  int python_timeout_seconds = 60;
  std::string knowledge_dir;
  std::vector<doctor::Layer> only;
  Detail detail = Detail::normal;
};

constexpr FlagSpec k_doctor_flags[] = {
    {"--json", false},          {"--color", true},         {"--no-color", false},      {"--help", false, "-h"},
    {"--from", true},           {"--save", true},          {"--python", true},         {"--no-python", false},
    {"--python-timeout", true}, {"--knowledge", true},     {"--only", true},           {"--verbose", false, "-v"},
    {"--full-probe", false},
};

Result<DoctorOptions> parse_doctor_options(std::span<const std::string> args) {
  ParsedArgs parsed = GPUHOST_TRY(parse_args(args, k_doctor_flags));
  DoctorOptions o;
  o.common = GPUHOST_TRY(common_options(parsed));
  if (!parsed.positionals.empty())
    return make_error(ErrorCode::invalid_argument, "doctor takes no arguments, got '" + parsed.positionals.front() + "'");
  o.from = parsed.value("--from").value_or("");
  o.save = parsed.value("--save").value_or("");
  o.pythons = parsed.values("--python");
  // A path that names no file is a typo, not a finding: said before anything runs. A bare name
  // (python3.10) is looked up on PATH when it runs.
  for (const auto& python : o.pythons) {
    std::error_code ec;
    const bool is_path = python.find('/') != std::string::npos || python.find('\\') != std::string::npos;
    if (is_path && !std::filesystem::exists(python, ec))
      return make_error(ErrorCode::invalid_argument, "--python " + python + ": no such file (give the interpreter's path, or a name on PATH)");
  }
  o.no_python = parsed.has("--no-python");
  o.full_probe = parsed.has("--full-probe");
  if (auto t = parsed.value("--python-timeout")) {
    auto n = parse_int(*t);
    if (!n || *n <= 0 || *n > 3600)
      return make_error(ErrorCode::invalid_argument, "--python-timeout must be a number of seconds from 1 to 3600, not '" + *t + "'");
    o.python_timeout_seconds = static_cast<int>(*n);
  }
  o.knowledge_dir = parsed.value("--knowledge").value_or(platform::get_env("GPUHOST_KNOWLEDGE_DIR").value_or(""));
  if (auto only = parsed.value("--only")) {
    std::vector<std::string> names;
    for (auto l : {doctor::Layer::host, doctor::Layer::gpu, doctor::Layer::cuda, doctor::Layer::frameworks,
                   doctor::Layer::os, doctor::Layer::security, doctor::Layer::preflight})
      names.emplace_back(doctor::layer_id(l));
    for (const auto& item : split(*only, ',')) {
      std::string name(trim(item));
      bool found = false;
      for (auto l : {doctor::Layer::host, doctor::Layer::gpu, doctor::Layer::cuda, doctor::Layer::frameworks,
                     doctor::Layer::os, doctor::Layer::security, doctor::Layer::preflight}) {
        if (name == doctor::layer_id(l)) {
          o.only.push_back(l);
          found = true;
        }
      }
      if (!found) {
        std::string message = "unknown layer '" + name + "' in --only";
        if (auto close = closest_match(name, names)) message += " (did you mean '" + *close + "'?)";
        return make_error(ErrorCode::invalid_argument, message + "; layers: " + join(names, ","));
      }
    }
  }
  if (parsed.has("--verbose")) o.detail = Detail::verbose;
  if (!o.from.empty() && (!o.pythons.empty() || o.no_python || o.full_probe))
    return make_error(ErrorCode::invalid_argument, "--from judges a saved report; --python, --no-python and --full-probe do not apply");
  if (o.no_python && (o.full_probe || !o.pythons.empty()))
    return make_error(ErrorCode::invalid_argument, "--no-python cannot be combined with --python or --full-probe");
  return o;
}

// "built-in data as of 2026-11" or "built-in data as of 2026-11; gpus.json from /path".
std::string knowledge_summary(const knowledge::Knowledge& k) {
  std::string newest;
  std::vector<std::string> overridden;
  for (const auto& f : k.files) {
    if (f.as_of > newest) newest = f.as_of;
    if (f.origin == knowledge::FileOrigin::override_file) overridden.push_back(f.name + " from " + f.path);
  }
  std::string out = "built-in data as of " + (newest.empty() ? std::string("unknown") : newest);
  if (!overridden.empty()) out += "; " + join(overridden, ", ");
  return out;
}

}  // namespace

int run_doctor(CommandContext& context) {
  auto options = parse_doctor_options(context.args);
  if (!options) return report_error(context.err, options.error().message, "see 'gpuhost doctor --help'", k_exit_usage);
  if (options->common.help) {
    context.out << k_doctor_help;
    return k_exit_ok;
  }

  knowledge::LoadOptions load;
  if (!options->knowledge_dir.empty()) load.overrides.push_back(options->knowledge_dir);
  auto knowledge = knowledge::load_knowledge(load);
  if (!knowledge)
    return report_error(context.err, knowledge.error().message,
                        "fix or remove the override file, or run without --knowledge / GPUHOST_KNOWLEDGE_DIR", k_exit_error);

  doctor::Report report;
  report.knowledge_summary = knowledge_summary(*knowledge);
  if (!options->from.empty()) {
    auto text = platform::read_file(options->from);
    if (!text) return report_error(context.err, "reading the report: " + text.error().message, "", k_exit_error);
    auto facts = doctor::facts_from_report(*text);
    if (!facts)
      return report_error(context.err, options->from + ": " + facts.error().message,
                          "pass a file written by 'gpuhost doctor --json' or '--save'", k_exit_error);
    report.facts = std::move(*facts);
    report.judged_from = options->from;
  } else {
    doctor::CollectOptions collect;
    collect.probe_python = !options->no_python;
    collect.extra_pythons = options->pythons;
    collect.full_python_probe = options->full_probe;
    collect.python_timeout = std::chrono::seconds(options->python_timeout_seconds);
    ProgressLine progress("checking this host");
    collect.progress = [&](std::string_view step) { progress.set_step(step); };
    report.facts = doctor::collect_facts(collect);
    progress.stop();
    report.judged_from = "this host";
  }

  doctor::Findings all = doctor::evaluate(report.facts, *knowledge);
  if (options->only.empty()) {
    report.findings = std::move(all);
  } else {
    for (const auto& f : all.all()) {
      for (auto l : options->only)
        if (f.layer == l) {
          doctor::Finding& copy = report.findings.add(f.layer, f.severity, f.id, f.title);
          copy = f;
        }
    }
  }

  std::string json_text;
  if (options->common.json || !options->save.empty()) json_text = json::dump(doctor::report_to_json(report), 2) + "\n";
  if (!options->save.empty()) {
    if (auto saved = platform::write_file_atomic(options->save, json_text); !saved)
      return report_error(context.err, "saving the report: " + saved.error().message, "", k_exit_error);
  }
  if (options->common.json)
    context.out << json_text;
  else
    render_doctor_report(context.out, report, TerminalStyle::for_stdout(options->common.color), options->detail);
  return report.findings.count(doctor::Severity::fail) ? k_exit_findings : k_exit_ok;
}

}  // namespace gpuhost::cli
