#include <filesystem>
#include <mutex>
#include <thread>

#include "base/json.h"
#include "doctor/collect.h"
#include "doctor/embedded_assets.h"
#include "platform/files.h"
#include "platform/process.h"
#include "platform/system_info.h"

namespace gpuhost::doctor {

namespace fs = std::filesystem;

std::string_view python_probe_script() {
  const EmbeddedFile* file = assets::find_embedded("python_probe.py");
  return file ? file->bytes : std::string_view();
}

Result<void> parse_python_probe(std::string_view output, PythonFacts& facts) {
  static constexpr std::string_view marker = "GPUHOST_PROBE ";
  std::size_t pos = output.rfind(marker);
  if (pos == std::string_view::npos)
    return make_error(ErrorCode::parse_error, "the interpreter printed no probe result");
  std::string_view line = output.substr(pos + marker.size());
  line = line.substr(0, line.find('\n'));
  auto doc = json::parse(line);
  if (!doc) return make_error(ErrorCode::parse_error, "probe result is not JSON: " + doc.error().message);
  // The probe prints the same fields a report keeps for an interpreter; interpreter and
  // found_by are ours and the probe leaves them alone.
  return python_facts_from_json(*doc, "probe", facts);
}

namespace {

// A --python argument may name an interpreter or an environment directory (venv, conda).
std::string resolve_python_argument(const std::string& arg) {
  std::error_code ec;
  if (!fs::is_directory(arg, ec)) return arg;
  bool windows = platform::current_os() == platform::OsFamily::windows;
  const char* candidates_posix[] = {"bin/python3", "bin/python"};
  const char* candidates_win[] = {"Scripts/python.exe", "python.exe"};
  for (const char* c : windows ? std::span<const char* const>(candidates_win) : std::span<const char* const>(candidates_posix)) {
    fs::path p = fs::path(arg) / c;
    if (fs::exists(p, ec)) return p.string();
  }
  return (fs::path(arg) / (windows ? "python.exe" : "bin/python")).string();
}

void probe(PythonFacts& p, const CollectOptions& options, bool gpu_host) {
  platform::ProcessOptions run;
  run.argv = {p.interpreter, "-c", std::string(python_probe_script())};
  if (gpu_host) run.argv.push_back("--gpu-host");
  if (options.full_python_probe) run.argv.push_back("--full");
  run.timeout = options.python_timeout;
  // Keep the probe from writing .pyc files into the user's environment and from picking up a
  // breakpoint hook or a startup script.
  run.environment = {{"PYTHONDONTWRITEBYTECODE", "1"}, {"PYTHONBREAKPOINT", "0"}, {"TF_CPP_MIN_LOG_LEVEL", "3"}};
  auto result = platform::run_process(run);
  p.probed = true;
  if (!result) {
    p.probe_error = result.error().message;
    return;
  }
  if (result->timed_out) {
    p.timed_out = true;
    p.probe_error = "did not answer within " + std::to_string(options.python_timeout.count() / 1000) +
                    " s and was stopped";
    return;
  }
  if (auto parsed = parse_python_probe(result->stdout_text, p); !parsed) {
    std::string err = result->stderr_text;
    if (err.size() > 600) err = "..." + err.substr(err.size() - 600);
    p.probe_error = parsed.error().message;
    if (result->signaled) p.probe_error += " (killed by signal " + std::to_string(result->signal) + ")";
    else p.probe_error += " (exit code " + std::to_string(result->exit_code) + ")";
    if (!err.empty()) p.probe_error += ": " + err;
  }
}

}  // namespace

void collect_pythons(HostFacts& facts, const CollectOptions& options, bool gpu_host) {
  facts.python_full_probe = options.full_python_probe;
  std::vector<PythonFacts> candidates;
  auto add = [&](const std::string& interpreter, const char* found_by) {
    for (const auto& c : candidates)
      if (c.interpreter == interpreter) return;
    PythonFacts p;
    p.interpreter = interpreter;
    p.found_by = found_by;
    candidates.push_back(std::move(p));
  };
  for (const auto& arg : options.extra_pythons) add(resolve_python_argument(arg), "--python");
  for (const char* name : {"python3", "python"})
    for (const auto& path : platform::find_all_executables(name)) add(path, "PATH");

  // Probe in parallel: each interpreter spends its time importing torch/tensorflow.
  std::mutex progress_mutex;
  std::vector<std::thread> threads;
  for (auto& c : candidates) {
    threads.emplace_back([&] {
      if (options.progress) {
        std::lock_guard lock(progress_mutex);
        options.progress("probing " + c.interpreter);
      }
      probe(c, options, gpu_host);
    });
  }
  for (auto& t : threads) t.join();

  // Several PATH entries often lead to one interpreter (shims, symlinks): keep the first of each
  // sys.executable, but keep every interpreter named with --python.
  for (auto& c : candidates) {
    bool duplicate = false;
    if (c.found_by != std::string("--python") && !c.executable.empty()) {
      for (const auto& kept : facts.pythons)
        if (kept.executable == c.executable && kept.version == c.version) duplicate = true;
    }
    if (!duplicate) facts.pythons.push_back(std::move(c));
  }
}

}  // namespace gpuhost::doctor
