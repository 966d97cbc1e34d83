// The only file that includes toml++ (Debian libtomlplusplus-dev, header only).
#include "supervise/job.h"

#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#define TOML_ENABLE_FORMATTERS 0
#include <cmath>

#include <toml++/toml.h>

#include "base/strings.h"
#include "platform/files.h"

namespace gpuhost::supervise {
namespace {

std::string utf8_path(const std::filesystem::path& path) {
  std::u8string text = path.u8string();
  return std::string(text.begin(), text.end());
}

const char* type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: return "a date or time";
    default: return "nothing";
  }
}

// Reads one table of the job file, reporting the first problem with its file:line:column.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string name, const std::string& file)
      : m_table(table), m_name(std::move(name)), m_file(file) {}

  // Every key must be one of `known`: a typo is an error, not silently ignored.
  [[nodiscard]] Result<void> check_keys(const std::vector<std::string>& known) const {
    for (auto&& [key, node] : m_table) {
      std::string_view k = key.str();
      if (std::find(known.begin(), known.end(), k) != known.end()) continue;
      std::string message = "unknown key \"" + std::string(k) + "\" in [" + m_name + "]";
      if (auto close = closest_match(k, known)) message += "; did you mean \"" + *close + "\"?";
      return make_error(ErrorCode::invalid_argument, where(key.source()) + message);
    }
    return {};
  }

  [[nodiscard]] Result<std::optional<std::string>> string(std::string_view key) const {
    const toml::node* node = m_table.get(key);
    if (!node) return std::nullopt;
    if (auto* s = node->as_string()) return std::optional<std::string>(s->get());
    return wrong_type(*node, key, "a string");
  }

  [[nodiscard]] Result<std::optional<std::int64_t>> integer(std::string_view key, std::int64_t min,
                                                            std::int64_t max) const {
    const toml::node* node = m_table.get(key);
    if (!node) return std::nullopt;
    auto* i = node->as_integer();
    if (!i) return wrong_type(*node, key, "an integer");
    if (i->get() < min || i->get() > max)
      return make_error(ErrorCode::invalid_argument, where(node->source()) + "[" + m_name + "] " +
                                                         std::string(key) + " must be between " +
                                                         std::to_string(min) + " and " + std::to_string(max));
    return std::optional<std::int64_t>(i->get());
  }

  [[nodiscard]] Result<std::optional<double>> number(std::string_view key) const {
    const toml::node* node = m_table.get(key);
    if (!node) return std::nullopt;
    if (auto* f = node->as_floating_point()) return std::optional<double>(f->get());
    if (auto* i = node->as_integer()) return std::optional<double>(static_cast<double>(i->get()));
    return wrong_type(*node, key, "a number");
  }

  // "10s", "500ms", "5m" or a number of seconds.
  [[nodiscard]] Result<std::optional<std::chrono::milliseconds>> duration(std::string_view key) const {
    const toml::node* node = m_table.get(key);
    if (!node) return std::nullopt;
    std::optional<std::chrono::milliseconds> parsed;
    if (auto* s = node->as_string()) {
      if (auto d = parse_duration(s->get())) parsed = *d;
    } else if (auto* i = node->as_integer()) {
      if (i->get() >= 0 && i->get() <= 1'000'000'000) parsed = std::chrono::seconds(i->get());
    } else if (auto* f = node->as_floating_point()) {
      if (std::isfinite(f->get()) && f->get() >= 0 && f->get() <= 1e9)
        parsed = std::chrono::milliseconds(std::llround(f->get() * 1000.0));
    } else {
      return wrong_type(*node, key, "a duration such as \"10s\"");
    }
    if (!parsed)
      return make_error(
          ErrorCode::invalid_argument,
          where(node->source()) + "[" + m_name + "] " + std::string(key) +
              " is not a duration: write \"500ms\", \"10s\", \"5m\", \"1h\" or a number of seconds");
    return parsed;
  }

  [[nodiscard]] Result<std::optional<std::vector<std::string>>> strings(std::string_view key) const {
    const toml::node* node = m_table.get(key);
    if (!node) return std::nullopt;
    auto* array = node->as_array();
    if (!array) return wrong_type(*node, key, "an array of strings");
    std::vector<std::string> out;
    for (const toml::node& item : *array) {
      auto* s = item.as_string();
      if (!s) return wrong_type(item, key, "an array of strings");
      out.push_back(s->get());
    }
    return std::optional<std::vector<std::string>>(std::move(out));
  }

  // A problem with a value the file does set.
  [[nodiscard]] Error invalid(std::string_view key, const std::string& message) const {
    const toml::node* node = m_table.get(key);
    return Error{ErrorCode::invalid_argument, (node ? where(node->source()) : m_file + ": ") + "[" + m_name +
                                                  "] " + std::string(key) + ": " + message};
  }

 private:
  [[nodiscard]] std::string where(const toml::source_region& region) const {
    return m_file + ":" + std::to_string(region.begin.line) + ":" + std::to_string(region.begin.column) +
           ": ";
  }
  [[nodiscard]] std::unexpected<Error> wrong_type(const toml::node& node, std::string_view key,
                                                  std::string_view want) const {
    return make_error(ErrorCode::invalid_argument, where(node.source()) + "[" + m_name + "] " +
                                                       std::string(key) + " must be " + std::string(want) +
                                                       ", not " + type_name(node));
  }

  const toml::table& m_table;
  std::string m_name;
  const std::string& m_file;
};

std::filesystem::path from_file_dir(const std::filesystem::path& base, const std::string& value) {
  std::filesystem::path p(std::u8string(value.begin(), value.end()));
  if (p.is_absolute()) return p.lexically_normal();
  return (base / p).lexically_normal();
}

Result<void> read_job_table(const TableReader& t, const std::filesystem::path& base, JobSpec& spec) {
  if (auto known = t.check_keys({"name", "command", "checkpoints", "preset", "keep", "working_directory",
                                 "settle", "marker", "ignore"});
      !known)
    return known;
  if (auto name = GPUHOST_TRY(t.string("name"))) {
    if (!job::is_valid_job_name(*name))
      return std::unexpected(
          t.invalid("name", "\"" + *name + "\" is not a usable job name (1 to 64 of A-Z a-z 0-9 . _ -)"));
    spec.name = *name;
  }
  if (auto command = GPUHOST_TRY(t.strings("command"))) {
    if (command->empty() || command->front().empty())
      return std::unexpected(t.invalid("command", "must name a program, e.g. [\"python3\", \"train.py\"]"));
    spec.command = std::move(*command);
  }
  if (auto checkpoints = GPUHOST_TRY(t.string("checkpoints"))) {
    if (checkpoints->empty()) return std::unexpected(t.invalid("checkpoints", "is empty"));
    spec.checkpoint_location = from_file_dir(base, *checkpoints);
  }
  if (auto preset = GPUHOST_TRY(t.string("preset"))) {
    auto parsed = parse_resume_preset(*preset);
    if (!parsed) {
      std::vector<std::string> names;
      for (auto p : {ResumePreset::none, ResumePreset::hf, ResumePreset::lightning, ResumePreset::ultralytics,
                     ResumePreset::kohya, ResumePreset::torchrun})
        names.emplace_back(resume_preset_name(p));
      std::string message = "unknown preset \"" + *preset + "\"";
      if (auto close = closest_match(*preset, names)) message += "; did you mean \"" + *close + "\"?";
      return std::unexpected(t.invalid("preset", message + " (one of " + join(names, ", ") + ")"));
    }
    spec.preset = *parsed;
  }
  if (auto keep = GPUHOST_TRY(t.integer("keep", 0, 1'000'000))) spec.keep = static_cast<int>(*keep);
  if (auto dir = GPUHOST_TRY(t.string("working_directory")))
    spec.working_directory = utf8_path(from_file_dir(base, *dir));
  if (auto settle = GPUHOST_TRY(t.duration("settle"))) spec.settle = *settle;
  if (auto marker = GPUHOST_TRY(t.string("marker"))) spec.marker = *marker;
  if (auto ignore = GPUHOST_TRY(t.strings("ignore"))) spec.ignore = std::move(*ignore);
  return {};
}

Result<void> read_save_table(const TableReader& t, JobSpec& spec) {
  if (auto known = t.check_keys({"request", "signal", "stop_signal", "stop_grace", "safety_margin"}); !known)
    return known;
  if (auto request = GPUHOST_TRY(t.string("request"))) {
    auto parsed = parse_save_request(*request);
    if (!parsed)
      return std::unexpected(
          t.invalid("request", "\"" + *request + "\" is not one of signal, file, both, none"));
    spec.save_request = *parsed;
  }
  for (auto [key, out] :
       {std::pair{"signal", &spec.save_signal}, std::pair{"stop_signal", &spec.stop_signal}}) {
    if (auto name = GPUHOST_TRY(t.string(key))) {
      auto parsed = platform::parse_child_signal(*name);
      if (!parsed)
        return std::unexpected(t.invalid(
            key,
            "unknown signal \"" + *name + "\" (SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP or CTRL_BREAK)"));
      *out = *parsed;
      if (out == &spec.save_signal) spec.save_signal_declared = true;
    }
  }
  if (auto grace = GPUHOST_TRY(t.duration("stop_grace"))) spec.stop_grace = *grace;
  if (auto margin = GPUHOST_TRY(t.duration("safety_margin"))) spec.safety_margin = *margin;
  return {};
}

Result<void> read_restart_table(const TableReader& t, JobSpec& spec) {
  if (auto known = t.check_keys({"max_restarts", "backoff", "max_backoff", "backoff_factor",
                                 "crash_loop_failures", "crash_loop_window"});
      !known)
    return known;
  RestartPolicy& r = spec.restart;
  if (auto n = GPUHOST_TRY(t.integer("max_restarts", 0, 1'000'000))) {
    r.max_restarts = static_cast<int>(*n);
    r.max_restarts_given = true;
  }
  if (auto backoff = GPUHOST_TRY(t.duration("backoff"))) r.initial_backoff = *backoff;
  if (auto backoff = GPUHOST_TRY(t.duration("max_backoff"))) r.max_backoff = *backoff;
  if (auto factor = GPUHOST_TRY(t.number("backoff_factor"))) {
    if (!std::isfinite(*factor) || *factor < 1.0 || *factor > 100.0)
      return std::unexpected(t.invalid("backoff_factor", "must be between 1 and 100"));
    r.backoff_factor = *factor;
  }
  if (auto n = GPUHOST_TRY(t.integer("crash_loop_failures", 0, 1000)))
    r.crash_loop_failures = static_cast<int>(*n);
  if (auto window = GPUHOST_TRY(t.duration("crash_loop_window"))) r.crash_loop_window = *window;
  if (r.max_backoff < r.initial_backoff)
    return std::unexpected(t.invalid("max_backoff", "is shorter than backoff"));
  return {};
}

Result<void> read_preemption_table(const TableReader& t, JobSpec& spec) {
  if (auto known = t.check_keys({"cloud", "metadata_endpoint", "poll_interval"}); !known) return known;
  if (auto cloud = GPUHOST_TRY(t.string("cloud"))) spec.cloud = to_lower(*cloud);
  if (auto endpoint = GPUHOST_TRY(t.string("metadata_endpoint"))) spec.metadata_endpoint = *endpoint;
  if (auto interval = GPUHOST_TRY(t.duration("poll_interval"))) {
    if (interval->count() <= 0) return std::unexpected(t.invalid("poll_interval", "must be more than 0"));
    spec.poll_interval = *interval;
  }
  return {};
}

// [remote]: the object-storage mirror (doc/remote-store.md). The key itself never goes in the
// file: only where to read it.
Result<void> read_remote_table(const TableReader& t, const std::filesystem::path& base, JobSpec& spec) {
  if (auto known = t.check_keys({"url", "encrypt", "key_file"}); !known) return known;
  if (auto url = GPUHOST_TRY(t.string("url"))) spec.remote = *url;
  if (auto encrypt = GPUHOST_TRY(t.string("encrypt"))) spec.encrypt = *encrypt;
  if (auto key_file = GPUHOST_TRY(t.string("key_file"))) spec.encryption_key_file = from_file_dir(base, *key_file);
  return {};
}

Result<void> read_env_table(const toml::table& table, const std::string& file, JobSpec& spec) {
  for (auto&& [key, node] : table) {
    std::string value;
    if (auto* s = node.as_string())
      value = s->get();
    else if (auto* i = node.as_integer())
      value = std::to_string(i->get());
    else if (auto* b = node.as_boolean())
      value = b->get() ? "1" : "0";
    else
      return make_error(ErrorCode::invalid_argument, file + ":" + std::to_string(node.source().begin.line) +
                                                         ":" + std::to_string(node.source().begin.column) +
                                                         ": [env] " + std::string(key.str()) +
                                                         " must be a string, not " + type_name(node));
    std::string name(key.str());
    auto existing = std::find_if(spec.environment.begin(), spec.environment.end(),
                                 [&](const auto& entry) { return entry.first == name; });
    if (existing != spec.environment.end())
      existing->second = std::move(value);
    else
      spec.environment.emplace_back(std::move(name), std::move(value));
  }
  return {};
}

}  // namespace

Result<void> load_job_file(const std::filesystem::path& path, JobSpec& spec) {
  const std::string file = utf8_path(path);
  auto text = platform::read_file(path, 1u << 20);
  if (!text) return std::unexpected(with_context(text.error(), "reading the job file"));
  toml::parse_result parsed = toml::parse(*text, file);
  if (!parsed) {
    const toml::parse_error& error = parsed.error();
    return make_error(ErrorCode::parse_error, file + ":" + std::to_string(error.source().begin.line) + ":" +
                                                  std::to_string(error.source().begin.column) + ": " +
                                                  std::string(error.description()));
  }
  const toml::table& root = parsed.table();
  const std::vector<std::string> tables = {"job", "save", "restart", "preemption", "remote", "env"};
  for (auto&& [key, node] : root) {
    std::string_view name = key.str();
    std::string where = file + ":" + std::to_string(key.source().begin.line) + ":" +
                        std::to_string(key.source().begin.column) + ": ";
    if (std::find(tables.begin(), tables.end(), name) == tables.end()) {
      std::string message = where + "unknown " +
                            (node.is_table() ? "table [" + std::string(name) + "]"
                                             : "key \"" + std::string(name) + "\" outside a table");
      if (auto close = closest_match(name, tables)) message += "; did you mean [" + *close + "]?";
      return make_error(ErrorCode::invalid_argument, message);
    }
    if (!node.is_table())
      return make_error(ErrorCode::invalid_argument, where + "\"" + std::string(name) +
                                                         "\" must be a table ([" + std::string(name) + "])");
  }

  // Relative paths in the file are relative to the file's own folder, not to where gpuhost runs.
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  std::filesystem::path base = (ec ? path : absolute).parent_path();

  // Work on a copy so a file with an error leaves `spec` as it was.
  JobSpec updated = spec;
  if (auto* job = root["job"].as_table()) {
    if (auto read = read_job_table(TableReader(*job, "job", file), base, updated); !read) return read;
  }
  if (auto* save = root["save"].as_table()) {
    if (auto read = read_save_table(TableReader(*save, "save", file), updated); !read) return read;
  }
  if (auto* restart = root["restart"].as_table()) {
    if (auto read = read_restart_table(TableReader(*restart, "restart", file), updated); !read) return read;
  }
  if (auto* preemption = root["preemption"].as_table()) {
    if (auto read = read_preemption_table(TableReader(*preemption, "preemption", file), updated); !read)
      return read;
  }
  if (auto* remote = root["remote"].as_table()) {
    if (auto read = read_remote_table(TableReader(*remote, "remote", file), base, updated); !read) return read;
  }
  if (auto* env = root["env"].as_table()) {
    if (auto read = read_env_table(*env, file, updated); !read) return read;
  }
  spec = std::move(updated);
  return {};
}

}  // namespace gpuhost::supervise
