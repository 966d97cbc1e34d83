#include "supervise/job.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "base/json.h"
#include "base/strings.h"
#include "platform/environment.h"
#include "platform/files.h"
#include "platform/state_root.h"
#include "platform/system_info.h"

namespace gpuhost::supervise {
namespace {

// Cloud ids the notice watchers know (supervise/notice.h NoticeSource, clouds only).
constexpr std::array<std::string_view, 6> k_clouds = {"aws",     "azure",   "gcp",
                                                      "alibaba", "tencent", "volcengine"};

constexpr int k_job_json_version = 1;

// Paths travel as UTF-8 whatever the OS's narrow encoding (MinGW's path::string() is the ANSI
// code page).
std::string utf8_path(const std::filesystem::path& path) {
  std::u8string text = path.u8string();
  return std::string(text.begin(), text.end());
}

std::filesystem::path path_from_utf8(std::string_view text) {
  return std::filesystem::path(std::u8string(text.begin(), text.end()));
}

// Folder names that say nothing about the job.
bool is_generic_folder(std::string_view name) {
  static constexpr std::array<std::string_view, 24> generic = {
      "checkpoints", "checkpoint", "ckpt",  "ckpts", "out",     "output", "outputs",   "weights",
      "runs",        "run",        "saved", "save",  "models",  "model",  "state",     "states",
      "data",        "home",       "mnt",   "tmp",   "scratch", "work",   "workspace", "root"};
  std::string lower = to_lower(name);
  for (std::string_view g : generic)
    if (lower == g) return true;
  return false;
}

// Replaces characters a job name cannot hold, trims separators at the ends, cuts to 64.
std::string sanitize_name(std::string_view raw) {
  std::string name;
  for (char c : raw) name += job::is_job_name_char(c) ? c : '-';
  while (!name.empty() && (name.front() == '.' || name.front() == '-')) name.erase(name.begin());
  if (name.size() > 64) name.resize(64);
  while (!name.empty() && (name.back() == '.' || name.back() == '-')) name.pop_back();
  if (!job::is_valid_job_name(name)) return {};
  return name;
}

std::string name_from_location(const std::filesystem::path& location) {
  std::filesystem::path p = location.lexically_normal();
  if (!p.empty() && !p.has_filename()) p = p.parent_path();  // a trailing separator
  // A single checkpoint file (last.pt) names nothing; its folder may.
  if (p.has_extension()) p = p.parent_path();
  for (int depth = 0; depth < 2 && p.has_filename(); ++depth) {
    std::string folder = utf8_path(p.filename());
    if (!is_generic_folder(folder)) return sanitize_name(folder);
    p = p.parent_path();
  }
  return {};
}

std::string name_from_command(const std::vector<std::string>& command) {
  if (command.empty()) return {};
  static constexpr std::array<std::string_view, 5> script_extensions = {".py", ".sh", ".bat", ".cmd", ".ps1"};
  for (std::size_t i = 1; i < command.size(); ++i) {
    if (command[i] == "-m" && i + 1 < command.size()) {
      std::vector<std::string> parts = split(command[i + 1], '.');
      return sanitize_name(parts.empty() ? command[i + 1] : parts.back());
    }
    std::filesystem::path arg = path_from_utf8(command[i]);
    std::string extension = to_lower(utf8_path(arg.extension()));
    for (std::string_view e : script_extensions)
      if (extension == e && command[i][0] != '-') return sanitize_name(utf8_path(arg.stem()));
  }
  return sanitize_name(utf8_path(path_from_utf8(command[0]).stem()));
}

// A typed reader over job.json with "<where>.<key>: expected ..." errors.
class SpecReader {
 public:
  explicit SpecReader(const json::Value& object, std::string where)
      : m_object(object), m_where(std::move(where)) {}

  const json::Value* get(std::string_view key, json::Value::Type want, bool null_ok = false) {
    const json::Value* v = m_object.find(key);
    if (!v || (null_ok && v->is_null())) return nullptr;
    bool fits = v->type() == want || (want == json::Value::Type::number && v->is_integer());
    if (!fits) {
      fail(std::string(key) + ": expected " + json::type_name(want) + ", found " +
           json::type_name(v->type()));
      return nullptr;
    }
    return v;
  }
  void read(std::string_view key, std::string& out) {
    if (auto* v = get(key, json::Value::Type::string)) out = v->as_string();
  }
  void read(std::string_view key, std::optional<std::string>& out) {
    if (m_object.find(key) && m_object.find(key)->is_null()) out.reset();
    if (auto* v = get(key, json::Value::Type::string, true)) out = v->as_string();
  }
  void read(std::string_view key, int& out) {
    if (auto* v = get(key, json::Value::Type::integer)) {
      if (v->as_int() < -2147483647 || v->as_int() > 2147483647)
        fail(std::string(key) + ": out of range");
      else
        out = static_cast<int>(v->as_int());
    }
  }
  void read(std::string_view key, bool& out) {
    if (auto* v = get(key, json::Value::Type::boolean)) out = v->as_bool();
  }
  void read(std::string_view key, double& out) {
    if (auto* v = get(key, json::Value::Type::number)) out = v->as_number();
  }
  void read(std::string_view key, std::chrono::milliseconds& out) {
    if (auto* v = get(key, json::Value::Type::integer)) out = std::chrono::milliseconds(v->as_int());
  }
  void read(std::string_view key, std::vector<std::string>& out) {
    auto* v = get(key, json::Value::Type::array);
    if (!v) return;
    std::vector<std::string> items;
    for (const auto& item : v->items()) {
      if (!item.is_string()) return fail(std::string(key) + ": expected an array of strings");
      items.push_back(item.as_string());
    }
    out = std::move(items);
  }
  void fail(std::string message) {
    if (!m_error) m_error = Error{ErrorCode::parse_error, "reading job.json: " + m_where + message};
  }
  [[nodiscard]] std::optional<Error>& error() { return m_error; }

 private:
  const json::Value& m_object;
  std::string m_where;
  std::optional<Error> m_error;
};

}  // namespace

const char* save_request_name(JobSpec::SaveRequest request) {
  switch (request) {
    case JobSpec::SaveRequest::signal: return "signal";
    case JobSpec::SaveRequest::file: return "file";
    case JobSpec::SaveRequest::both: return "both";
    case JobSpec::SaveRequest::none: return "none";
  }
  return "signal";
}

std::optional<JobSpec::SaveRequest> parse_save_request(std::string_view name) {
  for (auto request : {JobSpec::SaveRequest::signal, JobSpec::SaveRequest::file, JobSpec::SaveRequest::both,
                       JobSpec::SaveRequest::none})
    if (iequals(name, save_request_name(request))) return request;
  return std::nullopt;
}

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto invalid = [&] {
    return make_error(ErrorCode::invalid_argument, "\"" + std::string(text) +
                                                       "\" is not a duration: write 500ms, 10s, 5m, 1h or a "
                                                       "number of seconds");
  };
  std::string_view rest = trim(text);
  if (rest.empty()) return invalid();
  if (auto seconds = parse_double(rest)) {
    if (!std::isfinite(*seconds) || *seconds < 0 || *seconds > 1e9) return invalid();
    return std::chrono::milliseconds(std::llround(*seconds * 1000.0));
  }
  double total_ms = 0;
  std::size_t pos = 0;
  while (pos < rest.size()) {
    std::size_t start = pos;
    while (pos < rest.size() && ((rest[pos] >= '0' && rest[pos] <= '9') || rest[pos] == '.')) ++pos;
    auto number = parse_double(rest.substr(start, pos - start));
    if (!number) return invalid();
    start = pos;
    while (pos < rest.size() && rest[pos] >= 'a' && rest[pos] <= 'z') ++pos;
    std::string_view unit = rest.substr(start, pos - start);
    double scale = 0;
    if (unit == "ms")
      scale = 1;
    else if (unit == "s")
      scale = 1000;
    else if (unit == "m" || unit == "min")
      scale = 60'000;
    else if (unit == "h")
      scale = 3'600'000;
    else
      return invalid();
    total_ms += *number * scale;
  }
  if (!std::isfinite(total_ms) || total_ms > 1e12) return invalid();
  return std::chrono::milliseconds(std::llround(total_ms));
}

std::optional<std::string> spec_environment_value(const JobSpec& spec, std::string_view name) {
  std::optional<std::string> value;
  for (const auto& [each, v] : spec.environment)
    if (each == name) value = v;
  return value;
}

Result<void> validate_job_spec(const JobSpec& spec) {
  auto invalid = [](std::string message) {
    return make_error(ErrorCode::invalid_argument, std::move(message));
  };
  if (spec.command.empty() || spec.command.front().empty())
    return invalid("checking the job: no command to run (give it after --, or as command in the job file)");
  if (!job::is_valid_job_name(spec.name))
    return invalid("checking the job: \"" + spec.name +
                   "\" is not a usable job name (1 to 64 of A-Z a-z 0-9 . _ -, not a Windows device name)");
  if (spec.checkpoint_location.empty())
    return invalid(
        "checking the job: no checkpoint location (--checkpoints DIR, or checkpoints in the job file)");
  if (spec.keep < 0) return invalid("checking the job: keep must be 0 (keep all) or more");
  if (spec.settle.count() < 0 || spec.stop_grace.count() < 0 || spec.safety_margin.count() < 0)
    return invalid("checking the job: settle, stop_grace and safety_margin cannot be negative");
  if (spec.poll_interval.count() <= 0) return invalid("checking the job: poll_interval must be positive");
  const RestartPolicy& r = spec.restart;
  if (r.max_restarts < 0) return invalid("checking the job: max_restarts must be 0 or more");
  if (r.initial_backoff.count() < 0 || r.max_backoff < r.initial_backoff)
    return invalid("checking the job: backoff must be 0 or more and max_backoff at least backoff");
  if (!std::isfinite(r.backoff_factor) || r.backoff_factor < 1.0)
    return invalid("checking the job: backoff_factor must be 1 or more");
  if (r.crash_loop_failures < 0 || r.crash_loop_window.count() < 0)
    return invalid("checking the job: crash_loop_failures and crash_loop_window cannot be negative");
  if (spec.cloud != "auto" && spec.cloud != "none" &&
      std::find(k_clouds.begin(), k_clouds.end(), spec.cloud) == k_clouds.end()) {
    std::vector<std::string> names = {"auto", "none"};
    names.insert(names.end(), k_clouds.begin(), k_clouds.end());
    std::string message = "checking the job: unknown cloud \"" + spec.cloud + "\"";
    if (auto close = closest_match(spec.cloud, names)) message += "; did you mean \"" + *close + "\"?";
    return invalid(message + " (one of " + join(names, ", ") + ")");
  }
  if (spec.metadata_endpoint && !spec.metadata_endpoint->starts_with("http://") &&
      !spec.metadata_endpoint->starts_with("https://"))
    return invalid("checking the job: metadata_endpoint must start with http:// (got \"" +
                   *spec.metadata_endpoint + "\")");
  return {};
}

std::string default_job_name(const JobSpec& spec) {
  if (std::string name = name_from_location(spec.checkpoint_location); !name.empty()) return name;
  if (std::string name = name_from_command(spec.command); !name.empty()) return name;
  return "job";
}

namespace {

// "scheme://user:password@host/..." -> "scheme://host/...".
std::string without_userinfo(std::string_view url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  const std::size_t start = scheme + 3;
  const std::size_t end = std::min(url.find_first_of("/?#", start), url.size());
  const std::size_t at = url.substr(start, end - start).rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  return std::string(url.substr(0, start)) + std::string(url.substr(start + at + 1));
}

}  // namespace

std::string redact_store_url(std::string_view url) {
  std::string_view rest = url.substr(0, std::min(url.find('#'), url.size()));
  // A file:// path may hold '?': only s3:// URLs have parameters.
  if (!rest.starts_with("s3://")) return without_userinfo(rest);
  const std::size_t q = rest.find('?');
  std::string out = without_userinfo(rest.substr(0, q));
  if (q == std::string_view::npos) return out;
  std::vector<std::string> kept;
  for (const std::string& pair : split(rest.substr(q + 1), '&')) {
    const std::size_t eq = pair.find('=');
    const std::string name = pair.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    const bool known = name == "endpoint" || name == "region" || name == "style" || name == "provider";
    // An endpoint with userinfo, raw or percent-encoded, goes whole: it never worked anyway.
    const bool secret = !known || value.find('@') != std::string::npos || contains_icase(value, "%40");
    kept.push_back(secret && !value.empty() ? name + "=REDACTED" : pair);
  }
  return out + "?" + join(kept, "&");
}

std::string job_spec_to_json(const JobSpec& spec) {
  json::Value v = json::Value::object();
  v["version"] = k_job_json_version;
  v["name"] = spec.name;
  json::Value command = json::Value::array();
  for (const auto& arg : spec.command) command.push_back(arg);
  v["command"] = std::move(command);
  v["working_directory"] = spec.working_directory ? json::Value(*spec.working_directory) : json::Value();
  json::Value environment = json::Value::object();
  for (const auto& [key, value] : spec.environment) environment.members().emplace_back(key, value);
  v["environment"] = std::move(environment);
  v["checkpoint_location"] = utf8_path(spec.checkpoint_location);
  v["preset"] = resume_preset_name(spec.preset);
  v["settle_ms"] = static_cast<std::int64_t>(spec.settle.count());
  v["marker"] = spec.marker ? json::Value(*spec.marker) : json::Value();
  json::Value ignore = json::Value::array();
  for (const auto& pattern : spec.ignore) ignore.push_back(pattern);
  v["ignore"] = std::move(ignore);
  v["keep"] = spec.keep;

  json::Value& save = v["save"];
  save["request"] = save_request_name(spec.save_request);
  save["signal"] = platform::child_signal_name(spec.save_signal);
  save["signal_declared"] = spec.save_signal_declared;
  save["stop_signal"] = platform::child_signal_name(spec.stop_signal);
  save["stop_grace_ms"] = static_cast<std::int64_t>(spec.stop_grace.count());
  save["safety_margin_ms"] = static_cast<std::int64_t>(spec.safety_margin.count());

  json::Value& restart = v["restart"];
  restart["max_restarts"] = spec.restart.max_restarts;
  restart["backoff_ms"] = static_cast<std::int64_t>(spec.restart.initial_backoff.count());
  restart["max_backoff_ms"] = static_cast<std::int64_t>(spec.restart.max_backoff.count());
  restart["backoff_factor"] = spec.restart.backoff_factor;
  restart["crash_loop_failures"] = spec.restart.crash_loop_failures;
  restart["crash_loop_window_ms"] = static_cast<std::int64_t>(spec.restart.crash_loop_window.count());

  json::Value& preemption = v["preemption"];
  preemption["cloud"] = spec.cloud;
  preemption["metadata_endpoint"] =
      spec.metadata_endpoint ? json::Value(*spec.metadata_endpoint) : json::Value();
  preemption["poll_interval_ms"] = static_cast<std::int64_t>(spec.poll_interval.count());

  json::Value& remote = v["remote"];
  remote["url"] = redact_store_url(spec.remote);
  remote["encrypt"] = spec.encrypt;
  remote["key_file"] =
      spec.encryption_key_file ? json::Value(utf8_path(*spec.encryption_key_file)) : json::Value();
  return json::dump(v, 2) + "\n";
}

Result<JobSpec> job_spec_from_json(std::string_view text) {
  auto parsed = json::parse(text);
  if (!parsed) return std::unexpected(with_context(parsed.error(), "reading job.json"));
  if (!parsed->is_object()) return make_error(ErrorCode::parse_error, "reading job.json: not a JSON object");
  const json::Value& v = *parsed;
  JobSpec spec;
  SpecReader top(v, "");
  int version = k_job_json_version;
  top.read("version", version);
  if (version > k_job_json_version)
    return make_error(ErrorCode::parse_error, "reading job.json: version " + std::to_string(version) +
                                                  " was written by a newer gpuhost");
  top.read("name", spec.name);
  top.read("command", spec.command);
  top.read("working_directory", spec.working_directory);
  if (const json::Value* environment = top.get("environment", json::Value::Type::object)) {
    spec.environment.clear();
    for (const auto& [key, value] : environment->members()) {
      if (!value.is_string()) {
        top.fail("environment." + key + ": expected string");
        break;
      }
      spec.environment.emplace_back(key, value.as_string());
    }
  }
  std::string location;
  top.read("checkpoint_location", location);
  spec.checkpoint_location = path_from_utf8(location);
  std::string preset = resume_preset_name(spec.preset);
  top.read("preset", preset);
  if (auto p = parse_resume_preset(preset))
    spec.preset = *p;
  else
    top.fail("preset: unknown preset \"" + preset + "\"");
  top.read("settle_ms", spec.settle);
  top.read("marker", spec.marker);
  top.read("ignore", spec.ignore);
  top.read("keep", spec.keep);
  if (top.error()) return std::unexpected(*top.error());

  auto read_signal = [](SpecReader& reader, std::string_view key, platform::ChildSignal& out) {
    std::string name;
    reader.read(key, name);
    if (name.empty()) return;
    if (auto signal = platform::parse_child_signal(name))
      out = *signal;
    else
      reader.fail(std::string(key) + ": unknown signal \"" + name + "\"");
  };
  if (const json::Value* save = top.get("save", json::Value::Type::object)) {
    SpecReader r(*save, "save.");
    std::string request = save_request_name(spec.save_request);
    r.read("request", request);
    if (auto parsed_request = parse_save_request(request))
      spec.save_request = *parsed_request;
    else
      r.fail("request: unknown save request \"" + request + "\"");
    read_signal(r, "signal", spec.save_signal);
    r.read("signal_declared", spec.save_signal_declared);
    read_signal(r, "stop_signal", spec.stop_signal);
    r.read("stop_grace_ms", spec.stop_grace);
    r.read("safety_margin_ms", spec.safety_margin);
    if (r.error()) return std::unexpected(*r.error());
  }
  if (const json::Value* restart = top.get("restart", json::Value::Type::object)) {
    SpecReader r(*restart, "restart.");
    r.read("max_restarts", spec.restart.max_restarts);
    r.read("backoff_ms", spec.restart.initial_backoff);
    r.read("max_backoff_ms", spec.restart.max_backoff);
    r.read("backoff_factor", spec.restart.backoff_factor);
    r.read("crash_loop_failures", spec.restart.crash_loop_failures);
    r.read("crash_loop_window_ms", spec.restart.crash_loop_window);
    if (r.error()) return std::unexpected(*r.error());
  }
  if (const json::Value* preemption = top.get("preemption", json::Value::Type::object)) {
    SpecReader r(*preemption, "preemption.");
    r.read("cloud", spec.cloud);
    r.read("metadata_endpoint", spec.metadata_endpoint);
    r.read("poll_interval_ms", spec.poll_interval);
    if (r.error()) return std::unexpected(*r.error());
  }
  if (const json::Value* remote = top.get("remote", json::Value::Type::object)) {
    SpecReader r(*remote, "remote.");
    r.read("url", spec.remote);
    r.read("encrypt", spec.encrypt);
    std::optional<std::string> key_file;
    r.read("key_file", key_file);
    if (key_file) spec.encryption_key_file = path_from_utf8(*key_file);
    if (r.error()) return std::unexpected(*r.error());
  }
  if (top.error()) return std::unexpected(*top.error());
  return spec;
}

}  // namespace gpuhost::supervise
