#include "setup/apply.h"

#include <chrono>

#include "base/checksum.h"
#include "base/strings.h"
#include "base/time_format.h"
#include "platform/files.h"
#include "platform/process.h"
#include "platform/state_root.h"
#include "setup/render.h"

namespace gpuhost::setup {

namespace fs = std::filesystem;

fs::path setup_state_dir() {
  return platform::state_root() / "setup";
}

const char* apply_outcome_name(ApplyOutcome outcome) {
  switch (outcome) {
    case ApplyOutcome::done: return "done";
    case ApplyOutcome::failed: return "failed";
    case ApplyOutcome::reboot_needed: return "reboot_needed";
    case ApplyOutcome::blocked: return "blocked";
  }
  return "unknown";
}

namespace {

// What survives between runs: the steps done (by id, with the plan they belonged to) and a
// pending restart with the boot it was asked for in.
struct State {
  std::vector<std::string> done;
  std::string reboot_step;
  std::string reboot_boot_id;
};

State load_state(const fs::path& path) {
  State state;
  auto text = platform::read_file(path);
  if (!text) return state;
  auto value = json::parse(*text);
  if (!value || !value->is_object()) return state;  // a damaged state file only costs probes
  if (const auto* done = value->find("done"); done && done->is_array())
    for (const auto& d : done->items())
      if (d.is_string()) state.done.push_back(d.as_string());
  if (const auto* reboot = value->find("reboot"); reboot && reboot->is_object()) {
    if (const auto* s = reboot->find("step"); s && s->is_string()) state.reboot_step = s->as_string();
    if (const auto* b = reboot->find("boot_id"); b && b->is_string()) state.reboot_boot_id = b->as_string();
  }
  return state;
}

Result<void> save_state(const fs::path& path, const State& state) {
  json::Value v = json::Value::object();
  json::Value done = json::Value::array();
  for (const auto& d : state.done) done.push_back(d);
  v["done"] = std::move(done);
  if (!state.reboot_step.empty()) {
    v["reboot"] = json::Value::object();
    v["reboot"]["step"] = state.reboot_step;
    v["reboot"]["boot_id"] = state.reboot_boot_id;
  }
  return platform::write_file_atomic(path, json::dump(v, 2) + "\n");
}

struct Ran {
  bool ok = false;
  int exit_code = -1;
  std::string output;  // stdout then stderr
  std::string why;     // could not start, timed out, killed
};

// Runs `program` (a whole script for the plan's shell) from a file under steps/.
Ran run_program(const Plan& plan, const ApplyOptions& options, const fs::path& file,
                const std::string& program, std::chrono::milliseconds timeout) {
  Ran ran;
  if (auto written = platform::write_file_atomic(file, program); !written) {
    ran.why = "writing " + file.string() + ": " + written.error().message;
    return ran;
  }
  platform::ProcessOptions run;
  if (plan.shell == Shell::powershell)
    run.argv = {options.powershell, "-NoProfile", "-NonInteractive", "-ExecutionPolicy",
                "Bypass",           "-File",      file.string()};
  else
    run.argv = {"sh", file.string()};
  run.timeout = timeout;
  auto result = platform::run_process(run);
  if (!result) {
    ran.why = "could not start " + run.argv.front() + ": " + result.error().message;
    return ran;
  }
  ran.output = result->stdout_text + result->stderr_text;
  ran.exit_code = result->exit_code;
  if (result->timed_out)
    ran.why = "did not finish within " + std::to_string(timeout.count() / 60000) + " minutes";
  else if (result->signaled)
    ran.why = "was killed by signal " + std::to_string(result->signal);
  ran.ok = result->succeeded();
  return ran;
}

std::string tail_lines(const std::string& text, std::size_t count) {
  auto lines = split_lines(text);
  if (lines.size() > count) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(count));
  return join(lines, "\n");
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  for (const auto& x : list)
    if (x == item) return true;
  return false;
}

}  // namespace

Result<ApplyResult> apply_plan(const Plan& plan, const ApplyOptions& options) {
  ApplyResult result;
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  if (!plan.blockers.empty()) {
    result.outcome = ApplyOutcome::blocked;
    result.message = "the plan is blocked: " + plan.blockers.front();
    return result;
  }
  std::error_code ec;
  fs::create_directories(options.state_dir / "steps", ec);
  fs::create_directories(options.state_dir / "logs", ec);
  if (ec)
    return make_error(ErrorCode::io_error, "creating " + options.state_dir.string() + ": " + ec.message());
  const fs::path state_path = options.state_dir / "state.json";
  State state = load_state(state_path);

  if (!state.reboot_step.empty()) {
    if (state.reboot_boot_id == options.boot_id) {
      result.outcome = ApplyOutcome::reboot_needed;
      result.message = "step " + state.reboot_step +
                       " asked for a restart, and the host has not restarted since: restart, then run "
                       "the same command again";
      return result;
    }
    say("restarted since " + state.reboot_step + ": continuing");
    state.reboot_step.clear();
    state.reboot_boot_id.clear();
  }

  const std::string ext = plan.shell == Shell::powershell ? ".ps1" : ".sh";
  const std::size_t total = plan.steps.size();
  std::size_t index = 0;
  for (const auto& step : plan.steps) {
    ++index;
    const std::string label = "[" + std::to_string(index) + "/" + std::to_string(total) + "] " + step.id;
    StepResult sr{step.id, "not run", "", 0};
    const auto started = std::chrono::steady_clock::now();
    auto finish = [&](std::string status, std::string detail = {}) {
      sr.status = std::move(status);
      sr.detail = std::move(detail);
      sr.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      result.steps.push_back(sr);
    };

    if (!step.probe.empty()) {
      Ran probe = run_program(plan, options, options.state_dir / "steps" / (step.id + ".probe" + ext),
                              probe_program(plan, step), std::chrono::minutes(2));
      if (probe.ok) {
        const bool before = contains(state.done, step.id);
        say(label + ": " + (before ? "done in an earlier run" : "already in place") + " (" + step.title +
            ")");
        finish(before ? "done before" : "satisfied");
        continue;
      }
    }
    if (step.attended) {
      finish("not run", "needs a person: " + join(step.actions, "; "));
      result.outcome = ApplyOutcome::blocked;
      result.message = "step " + step.id + " (" + step.title + ") needs a person" +
                       (options.unattended ? " and --yes runs unattended" : "") + ": run " +
                       join(step.actions, " && ") + " yourself, then run the same command again";
      (void)save_state(state_path, state);
      return result;
    }
    say(label + ": " + step.title);
    const fs::path log = options.state_dir / "logs" / (step.id + ".log");
    Ran act = run_program(plan, options, options.state_dir / "steps" / (step.id + ext),
                          action_program(plan, step), std::chrono::hours(2));
    (void)platform::write_file_atomic(log, act.output);
    if (step.id == "verify.frameworks") {
      for (const auto& line : split_lines(act.output)) {
        if (line.rfind("GPUHOST_VERIFY ", 0) != 0) continue;
        if (auto v = json::parse(line.substr(15)); v) result.verification = std::move(*v);
      }
    }
    if (!act.ok) {
      std::string why = act.why.empty() ? "exited with " + std::to_string(act.exit_code) : act.why;
      std::string tail = tail_lines(act.output, 6);
      finish("failed", why + (tail.empty() ? std::string() : "\n" + tail));
      result.outcome = ApplyOutcome::failed;
      result.message = "step " + step.id + " (" + step.title + ") failed: it " + why +
                       "; the full output is in " + log.string() +
                       "; fix the cause and run the same command again (the steps done are kept)";
      (void)save_state(state_path, state);
      return result;
    }
    if (!step.probe.empty()) {
      Ran again = run_program(plan, options, options.state_dir / "steps" / (step.id + ".probe" + ext),
                              probe_program(plan, step), std::chrono::minutes(2));
      if (!again.ok && !step.reboot) {
        finish("failed", "the step ran, but its check still fails: " + step.probe);
        result.outcome = ApplyOutcome::failed;
        result.message = "step " + step.id + " ran without an error, but its check still fails (" +
                         step.probe + "); its output is in " + log.string();
        (void)save_state(state_path, state);
        return result;
      }
    }
    if (!contains(state.done, step.id)) state.done.push_back(step.id);
    finish("ran");
    if (step.reboot) {
      state.reboot_step = step.id;
      state.reboot_boot_id = options.boot_id;
      if (auto saved = save_state(state_path, state); !saved) return std::unexpected(saved.error());
      result.outcome = ApplyOutcome::reboot_needed;
      result.message = "step " + step.id +
                       " needs a restart: restart the host, then run the same command again to continue";
      return result;
    }
    if (auto saved = save_state(state_path, state); !saved) return std::unexpected(saved.error());
  }

  json::Value lock = json::Value::object();
  lock["written_at"] = format_rfc3339_utc(std::chrono::system_clock::now());
  lock["host"] = plan.host;
  lock["expected"] = plan.expected;
  lock["verification"] = result.verification ? *result.verification : json::Value();
  json::Value steps = json::Value::array();
  for (const auto& s : result.steps) {
    json::Value one = json::Value::object();
    one["id"] = s.id;
    one["status"] = s.status;
    steps.push_back(std::move(one));
  }
  lock["steps"] = std::move(steps);
  result.lock_path = options.state_dir / "lock.json";
  if (auto saved = platform::write_file_atomic(result.lock_path, json::dump(lock, 2) + "\n"); !saved)
    return std::unexpected(saved.error());
  fs::remove(state_path, ec);
  result.outcome = ApplyOutcome::done;
  result.message = "every step is in place and verified; the lock is " + result.lock_path.string();
  return result;
}

json::Value apply_result_to_json(const ApplyResult& result) {
  json::Value out = json::Value::object();
  out["outcome"] = apply_outcome_name(result.outcome);
  out["message"] = result.message;
  json::Value steps = json::Value::array();
  for (const auto& s : result.steps) {
    json::Value one = json::Value::object();
    one["id"] = s.id;
    one["status"] = s.status;
    one["detail"] = s.detail;
    one["seconds"] = s.seconds;
    steps.push_back(std::move(one));
  }
  out["steps"] = std::move(steps);
  out["verification"] = result.verification ? *result.verification : json::Value();
  out["lock"] = result.lock_path.empty() ? json::Value() : json::Value(result.lock_path.string());
  return out;
}

}  // namespace gpuhost::setup
