#include <filesystem>
#include <iostream>
#include <ostream>

#include "base/json.h"
#include "base/strings.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/progress.h"
#include "doctor/collect.h"
#include "doctor/report.h"
#include "knowledge/knowledge.h"
#include "platform/boot_id.h"
#include "platform/environment.h"
#include "platform/files.h"
#include "platform/system_info.h"
#include "setup/apply.h"
#include "setup/render.h"

namespace gpuhost::cli {

const char k_setup_help[] = R"(Usage: gpuhost setup [FLAGS]

Turns doctor's findings into a reviewable plan that makes this host a working training
environment: the NVIDIA driver (only when none works), a CUDA toolkit (only with --toolkit), a
Python environment, the framework build that matches driver, GPU, Python and OS, and a real
verification last. By default it prints the plan and the script and changes nothing.

Flags:
  --framework SPEC       torch[==X.Y], tensorflow[==X.Y] or both (default: torch)
  --python X.Y           the environment's Python version (default: python3 on PATH)
  --env DIR              the virtual environment to create or reuse (default: ./venv)
  --conda NAME           a conda environment instead of a venv
  --toolkit              also install a CUDA toolkit (nvcc) for building extensions
  --for-image            plan for a custom image built without a GPU (with --apply: on the
                         image builder): install, skip the runtime checks, print the checks
                         to run on the first boot
  --upgrade-driver       allow replacing a working driver that no framework build runs on
                         (a cloud's licensed GRID/vGPU driver is never replaced)
  --driver-flavour F     open or proprietary kernel modules (default: from the GPU)
  --offline              no wheel index: frameworks come from the system's packages, seen
                         through --system-site-packages (Debian: python3-torch)
  --torch-index URL      a mirror of https://download.pytorch.org/whl (same cu126/, cpu/ ... folders)
  --allow-cpu            accept a CPU build of the framework on a host with an NVIDIA GPU
  --script sh|powershell print only the script (the plan's shell; for review or an image)
  --apply                run the plan here, step by step (asks first on a terminal)
  --yes                  with --apply: do not ask
  --check                compare this host with what the last --apply recorded
  --from FILE            plan for the host a saved doctor report describes (dry run only)
  --knowledge DIR        use data files in DIR over the built-in ones (also GPUHOST_KNOWLEDGE_DIR)
  --json                 print the plan (and with --apply, each step's result) as JSON
  --no-color, --color=auto|always|never
  -h, --help

Each step probes first and is skipped when already in place, so running the same command
again does only what is left. Progress is kept in the state directory (GPUHOST_HOME/setup,
default ~/.local/state/gpuhost/setup or %LOCALAPPDATA%\gpuhost\setup); after a step that needs a
restart, restart and run the same command again. A finished run writes lock.json there.

Environment:
  GPUHOST_HOME           state directory root (setup/ below it)
  GPUHOST_BOOT_ID        use this as the boot identity instead of the kernel's (image builders)
  GPUHOST_POWERSHELL     the PowerShell that runs a Windows plan (default powershell.exe;
                         pwsh.exe for PowerShell 7)

Exit codes:
  0  plan printed; or applied and verified; or --check found no drift
  1  a step or the verification failed (the message names it and its log); --check: drift
  2  bad command line (nothing was done)
  3  could not run: unreadable --from file, corrupt knowledge, unwritable state directory
  6  a step needs a restart: restart, then run the same command again
  7  blocked: the plan needs a flag or a person (the message says which)

Examples:
  gpuhost setup                                   # the plan and the script, nothing changed
  gpuhost setup --framework torch==2.8 --env /opt/venv --apply
  gpuhost setup --framework tensorflow --python 3.11 --json
  gpuhost setup --for-image --script sh > image-setup.sh
  gpuhost setup --from report.json --script powershell   # for a Windows host's report
  gpuhost setup --check
)";

namespace {

namespace fs = std::filesystem;

struct SetupOptions {
  CommonOptions common;
  setup::SetupRequest request;
  std::string script;  // "", "sh", "powershell"
  bool apply = false;
  bool yes = false;
  bool check = false;
  std::string from;
  std::string knowledge_dir;
};

constexpr FlagSpec k_setup_flags[] = {
    {"--json", false},
    {"--color", true},
    {"--no-color", false},
    {"--help", false, "-h"},
    {"--framework", true},
    {"--python", true},
    {"--env", true},
    {"--conda", true},
    {"--toolkit", false},
    {"--for-image", false},
    {"--upgrade-driver", false},
    {"--driver-flavour", true},
    {"--offline", false},
    {"--allow-cpu", false},
    {"--script", true},
    {"--apply", false},
    {"--yes", false},
    {"--check", false},
    {"--from", true},
    {"--knowledge", true},
    {"--torch-index", true},
};

bool valid_conda_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

Result<SetupOptions> parse_setup_options(std::span<const std::string> args) {
  ParsedArgs parsed = GPUHOST_TRY(parse_args(args, k_setup_flags));
  SetupOptions o;
  o.common = GPUHOST_TRY(common_options(parsed));
  if (!parsed.positionals.empty())
    return make_error(ErrorCode::invalid_argument,
                      "setup takes no arguments, got '" + parsed.positionals.front() + "'");
  if (auto f = parsed.value("--framework")) o.request.frameworks = GPUHOST_TRY(setup::parse_framework(*f));
  if (auto p = parsed.value("--python")) {
    auto v = Version::parse(*p);
    if (!v || v->parts().size() < 2 || v->major() != 3)
      return make_error(ErrorCode::invalid_argument,
                        "--python takes a Python version like 3.11, not '" + *p + "'");
    o.request.python = *v;
  }
  o.request.conda_name = parsed.value("--conda").value_or("");
  if (parsed.has("--conda") && !valid_conda_name(o.request.conda_name))
    return make_error(
        ErrorCode::invalid_argument,
        "--conda takes an environment name (letters, digits, _ - .), not '" + o.request.conda_name + "'");
  if (parsed.has("--conda") && parsed.has("--env"))
    return make_error(ErrorCode::invalid_argument, "give --env DIR or --conda NAME, not both");
  if (o.request.conda_name.empty()) {
    std::error_code ec;
    fs::path env = parsed.value("--env").value_or("venv");
    if (env.empty()) return make_error(ErrorCode::invalid_argument, "--env needs a directory");
    o.request.env_dir = fs::absolute(env, ec).lexically_normal().string();
    if (!o.request.env_dir.empty() && o.request.env_dir.size() > 1 &&
        (o.request.env_dir.back() == '/' || o.request.env_dir.back() == '\\'))
      o.request.env_dir.pop_back();
    if (fs::exists(env, ec) && !fs::is_directory(env, ec))
      return make_error(ErrorCode::invalid_argument, "--env " + env.string() + " is a file, not a directory");
  }
  o.request.toolkit = parsed.has("--toolkit");
  o.request.for_image = parsed.has("--for-image");
  o.request.upgrade_driver = parsed.has("--upgrade-driver");
  o.request.offline = parsed.has("--offline");
  o.request.allow_cpu = parsed.has("--allow-cpu");
  if (auto d = parsed.value("--driver-flavour")) {
    if (*d != "open" && *d != "proprietary")
      return make_error(ErrorCode::invalid_argument,
                        "--driver-flavour is open or proprietary, not '" + *d + "'");
    o.request.driver_flavour = *d;
  }
  if (auto t = parsed.value("--torch-index")) {
    if (t->rfind("https://", 0) != 0 && t->rfind("http://", 0) != 0)
      return make_error(ErrorCode::invalid_argument, "--torch-index takes an http(s) URL, not '" + *t + "'");
    o.request.torch_index = *t;
    while (!o.request.torch_index.empty() && o.request.torch_index.back() == '/')
      o.request.torch_index.pop_back();
  }
  if (auto s = parsed.value("--script")) {
    if (*s != "sh" && *s != "powershell")
      return make_error(ErrorCode::invalid_argument, "--script is sh or powershell, not '" + *s + "'");
    o.script = *s;
  }
  o.apply = parsed.has("--apply");
  o.yes = parsed.has("--yes");
  o.check = parsed.has("--check");
  o.from = parsed.value("--from").value_or("");
  o.knowledge_dir =
      parsed.value("--knowledge").value_or(platform::get_env("GPUHOST_KNOWLEDGE_DIR").value_or(""));
  if (o.yes && !o.apply) return make_error(ErrorCode::invalid_argument, "--yes goes with --apply");
  if (o.apply && !o.script.empty())
    return make_error(ErrorCode::invalid_argument,
                      "--script prints the script and --apply runs the plan: pick one");
  if (o.apply && !o.from.empty())
    return make_error(ErrorCode::invalid_argument,
                      "--from plans for another host's report; --apply runs only on this host");
  if (o.check && (o.apply || !o.script.empty() || !o.from.empty()))
    return make_error(ErrorCode::invalid_argument,
                      "--check compares this host with the lock; it takes no --apply, --script or --from");
  return o;
}

void print_plan(std::ostream& out, const setup::Plan& plan, const TerminalStyle& style) {
  out << style.bold("gpuhost setup") << "  " << plan.host << "\n";
  if (!plan.environment.empty()) out << "environment: " << plan.environment << "\n";
  for (const auto& d : plan.decisions) out << "  " << style.dim("decided:") << " " << d << "\n";
  for (const auto& w : plan.warnings) out << "  " << style.yellow("warning:") << " " << w << "\n";
  for (const auto& b : plan.blockers) out << "  " << style.red("blocked:") << " " << b << "\n";
  out << "\n";
  std::size_t n = 0;
  for (const auto& s : plan.steps) {
    out << style.bold("[" + std::to_string(++n) + "/" + std::to_string(plan.steps.size()) + "] " + s.id)
        << "  " << s.title;
    if (s.reboot) out << "  " << style.yellow("(restart after)");
    if (s.attended) out << "  " << style.yellow("(needs a person)");
    out << "\n";
    if (!s.reason.empty()) out << "      why:   " << s.reason << "\n";
    if (!s.expect.empty()) out << "      after: " << s.expect << "\n";
  }
  for (const auto& line : plan.first_boot) out << "  first boot: " << split_lines(line).front() << "\n";
}

int outcome_exit(setup::ApplyOutcome outcome) {
  switch (outcome) {
    case setup::ApplyOutcome::done: return k_exit_ok;
    case setup::ApplyOutcome::failed: return k_exit_findings;
    case setup::ApplyOutcome::reboot_needed: return k_exit_reboot;
    case setup::ApplyOutcome::blocked: return k_exit_blocked;
  }
  return k_exit_error;
}

// --check: the host against lock.json.
int run_check(CommandContext& context, const SetupOptions& options) {
  const fs::path lock_path = setup::setup_state_dir() / "lock.json";
  auto text = platform::read_file(lock_path);
  if (!text)
    return report_error(context.err, "no setup lock at " + lock_path.string() + ": " + text.error().message,
                        "run 'gpuhost setup --apply' first", k_exit_error);
  auto lock = json::parse(*text);
  if (!lock || !lock->is_object())
    return report_error(context.err, lock_path.string() + " is not a setup lock",
                        "run 'gpuhost setup --apply' again", k_exit_error);
  const json::Value* expected = lock->find("expected");
  auto str = [&](const json::Value* obj, std::string_view key) -> std::string {
    if (!obj || !obj->is_object()) return {};
    const json::Value* v = obj->find(key);
    return v && v->is_string() ? v->as_string() : std::string();
  };
  doctor::CollectOptions collect;
  const std::string env = str(expected, "environment");
  const bool windows = platform::current_os() == platform::OsFamily::windows;
  const std::string python =
      env.empty() ? std::string() : (windows ? env + "\\Scripts\\python.exe" : env + "/bin/python");
  std::error_code ec;
  if (!python.empty() && fs::exists(python, ec)) collect.extra_pythons.push_back(python);
  doctor::HostFacts facts = doctor::collect_facts(collect);

  struct Line {
    std::string what, locked, now;
  };
  std::vector<Line> lines;
  lines.push_back({"driver", str(expected, "driver"), facts.gpu.driver_version});
  const doctor::PythonFacts* p = nullptr;
  for (const auto& candidate : facts.pythons)
    if (candidate.interpreter == python) p = &candidate;
  lines.push_back({"environment", env, p ? env : std::string()});
  const json::Value* torch = expected ? expected->find("torch") : nullptr;
  if (torch && torch->is_object()) {
    std::string want = str(torch, "version");
    std::string have = p && p->torch.installed ? p->torch.version : std::string();
    if (str(torch, "source") == "system")
      want = have.empty() ? "system torch" : have;  // any system torch
    else if (!have.empty() && have.rfind(want, 0) == 0)
      have = want;
    lines.push_back({"torch", want, have});
  }
  const json::Value* tf = expected ? expected->find("tensorflow") : nullptr;
  if (tf && tf->is_object())
    lines.push_back({"tensorflow", str(tf, "version"),
                     p && p->tensorflow.installed ? p->tensorflow.version : std::string()});

  std::size_t drift = 0;
  json::Value items = json::Value::array();
  for (const auto& l : lines) {
    const bool same = l.locked == l.now;
    if (!same) ++drift;
    json::Value one = json::Value::object();
    one["what"] = l.what;
    one["locked"] = l.locked;
    one["now"] = l.now;
    one["same"] = same;
    items.push_back(std::move(one));
  }
  if (options.common.json) {
    json::Value out = json::Value::object();
    out["lock"] = lock_path.string();
    out["drift"] = static_cast<std::int64_t>(drift);
    out["items"] = std::move(items);
    context.out << json::dump(out, 2) << "\n";
  } else {
    auto style = TerminalStyle::for_stdout(options.common.color);
    for (const auto& l : lines) {
      if (l.locked == l.now)
        context.out << style.green("same") << "     " << l.what << " " << (l.now.empty() ? "(none)" : l.now)
                    << "\n";
      else
        context.out << style.red("changed") << "  " << l.what << ": locked "
                    << (l.locked.empty() ? "(none)" : l.locked) << ", now "
                    << (l.now.empty() ? "(none)" : l.now) << "\n";
    }
    context.out << (drift ? std::to_string(drift) + " change(s) since " : std::string("no drift since "))
                << lock_path.string() << "\n";
  }
  return drift ? k_exit_findings : k_exit_ok;
}

}  // namespace

int run_setup(CommandContext& context) {
  auto options = parse_setup_options(context.args);
  if (!options)
    return report_error(context.err, options.error().message, "see 'gpuhost setup --help'", k_exit_usage);
  if (options->common.help) {
    context.out << k_setup_help;
    return k_exit_ok;
  }
  if (options->check) return run_check(context, *options);

  knowledge::LoadOptions load;
  if (!options->knowledge_dir.empty()) load.overrides.push_back(options->knowledge_dir);
  auto knowledge = knowledge::load_knowledge(load);
  if (!knowledge)
    return report_error(context.err, knowledge.error().message,
                        "fix or remove the override file, or run without --knowledge / GPUHOST_KNOWLEDGE_DIR",
                        k_exit_error);

  doctor::HostFacts facts;
  if (!options->from.empty()) {
    auto text = platform::read_file(options->from);
    if (!text)
      return report_error(context.err, "reading the report: " + text.error().message, "", k_exit_error);
    auto parsed = doctor::facts_from_report(*text);
    if (!parsed)
      return report_error(context.err, options->from + ": " + parsed.error().message,
                          "pass a file written by 'gpuhost doctor --json' or '--save'", k_exit_error);
    facts = std::move(*parsed);
  } else {
    doctor::CollectOptions collect;
    ProgressLine progress("reading this host");
    collect.progress = [&](std::string_view step) { progress.set_step(step); };
    facts = doctor::collect_facts(collect);
    progress.stop();
  }

  auto plan = setup::build_plan(facts, *knowledge, options->request);
  if (!plan)
    return report_error(context.err, plan.error().message, "see 'gpuhost setup --help'", k_exit_usage);

  if (!options->script.empty()) {
    if (options->script != setup::shell_name(plan->shell))
      return report_error(
          context.err,
          "this plan is for " + std::string(plan->os == knowledge::Os::windows ? "Windows" : "Linux") +
              ", so its script is " + setup::shell_name(plan->shell) + ", not " + options->script,
          "pass --script " + std::string(setup::shell_name(plan->shell)) +
              ", or plan from the other host's report: gpuhost setup --from report.json",
          k_exit_usage);
    context.out << setup::render_script(*plan);
    return plan->blockers.empty() ? k_exit_ok : k_exit_blocked;
  }

  if (!options->apply) {
    if (options->common.json) {
      json::Value out = setup::plan_to_json(*plan);
      out["script"] = setup::render_script(*plan);
      context.out << json::dump(out, 2) << "\n";
    } else {
      print_plan(context.out, *plan, TerminalStyle::for_stdout(options->common.color));
      context.out << "\n# The script (review it; 'gpuhost setup --apply' runs the same steps):\n\n"
                  << setup::render_script(*plan);
    }
    return plan->blockers.empty() ? k_exit_ok : k_exit_blocked;
  }

  if (!options->yes) {
    if (!platform::stderr_is_terminal())
      return report_error(context.err, "--apply changes this host and there is no terminal to ask on",
                          "review 'gpuhost setup' first, then pass --apply --yes", k_exit_usage);
    context.err << "Apply " << plan->steps.size() << " steps to this host? [y/N] " << std::flush;
    std::string answer;
    if (!std::getline(std::cin, answer) || (answer != "y" && answer != "Y" && answer != "yes")) {
      context.err << "nothing done\n";
      return k_exit_ok;
    }
  }
  setup::ApplyOptions apply;
  apply.state_dir = setup::setup_state_dir();
  apply.unattended = options->yes;
  if (auto ps = platform::get_env("GPUHOST_POWERSHELL"); ps && !ps->empty()) apply.powershell = *ps;
  if (auto id = platform::get_env("GPUHOST_BOOT_ID"); id && !id->empty())
    apply.boot_id = *id;
  else if (auto boot = platform::boot_id())
    apply.boot_id = *boot;
  const bool json_out = options->common.json;
  if (!json_out) print_plan(context.out, *plan, TerminalStyle::for_stdout(options->common.color));
  apply.progress = [&](std::string_view line) {
    if (!json_out) context.out << "  " << line << "\n" << std::flush;
  };
  auto result = setup::apply_plan(*plan, apply);
  if (!result)
    return report_error(context.err, result.error().message, "check that the state directory is writable",
                        k_exit_error);
  if (json_out) {
    json::Value out = setup::plan_to_json(*plan);
    out["apply"] = setup::apply_result_to_json(*result);
    context.out << json::dump(out, 2) << "\n";
  } else {
    auto style = TerminalStyle::for_stdout(options->common.color);
    for (const auto& s : result->steps)
      if (s.status == "failed" && !s.detail.empty())
        context.out << "  " << replace_all(s.detail, "\n", "\n    ") << "\n";
    if (result->verification) {
      const json::Value& v = *result->verification;
      if (const auto* t = v.find("torch"); t && t->is_object()) {
        auto field = [&](std::string_view k) {
          const auto* x = t->find(k);
          return x ? json::dump(*x) : std::string("null");
        };
        context.out << "  verified torch " << field("version") << ", cuda available "
                    << field("cuda_available") << ", device " << field("device") << ", matmul finite "
                    << field("matmul_finite") << "\n";
      }
    }
    const char* tag =
        result->outcome == setup::ApplyOutcome::done ? "done" : setup::apply_outcome_name(result->outcome);
    context.out << (result->outcome == setup::ApplyOutcome::done ? style.green(tag) : style.red(tag)) << ": "
                << result->message << "\n";
  }
  return outcome_exit(result->outcome);
}

}  // namespace gpuhost::cli
