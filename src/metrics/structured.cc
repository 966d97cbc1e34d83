#include "metrics/structured.h"

#include <cmath>
#include <limits>

#include "base/json.h"
#include "base/strings.h"
#include "metrics/line_parser.h"

namespace gpuhost::metrics {
namespace {

constexpr int k_max_flatten_depth = 8;

bool is_ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Python's json module writes NaN, Infinity and -Infinity (allow_nan=True is its default), which
// RFC 8259 JSON has not: quote them so the parser accepts the text and number_of() reads them.
std::string quote_python_nonfinite(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 16);
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    std::string_view word;
    if (i == 0 || !is_ident_char(text[i - 1]))
      for (std::string_view candidate :
           {std::string_view("-Infinity"), std::string_view("Infinity"), std::string_view("NaN")})
        if (text.substr(i, candidate.size()) == candidate &&
            (i + candidate.size() == text.size() || !is_ident_char(text[i + candidate.size()]))) {
          word = candidate;
          break;
        }
    if (word.empty()) {
      out.push_back(c);
      continue;
    }
    out += '"';
    out += word;
    out += '"';
    i += word.size() - 1;
  }
  return out;
}

Result<json::Value> parse_python_json(std::string_view text) {
  auto parsed = json::parse(text);
  if (parsed) return parsed;
  if (text.find("NaN") == std::string_view::npos && text.find("Infinity") == std::string_view::npos)
    return parsed;
  return json::parse(quote_python_nonfinite(text));
}

std::optional<double> number_of(const json::Value& v) {
  if (v.is_number()) return v.as_number();
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.as_string();
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (s == "Infinity") return std::numeric_limits<double>::infinity();
  if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

std::optional<std::int64_t> step_of(double v) {
  if (!std::isfinite(v) || v < 0 || v >= 9.0e18 || v != std::floor(v)) return std::nullopt;
  return static_cast<std::int64_t>(v);
}

// Seconds since the Unix epoch from a "time" member, when it is one: 2001 to 5138 in seconds, or
// in milliseconds (JavaScript's Date.now()). Anything else is a duration, kept as a metric.
std::optional<double> timestamp_of(const json::Value& v) {
  if (!v.is_number()) return std::nullopt;
  const double t = v.as_number();
  if (t >= 1e9 && t < 1e11) return t;
  if (t >= 1e12 && t < 1e14) return t / 1000.0;
  return std::nullopt;
}

void flatten(const json::Value& object, const std::string& prefix, int depth, std::string_view time_key,
             std::vector<Point>& out) {
  for (const auto& [name, value] : object.members()) {
    if (out.size() >= k_max_points_per_json_line) return;
    if (prefix.empty() && (name == "step" || name == time_key)) continue;
    std::string full = prefix.empty() ? name : prefix + "/" + name;
    if (value.is_object()) {
      if (depth < k_max_flatten_depth) flatten(value, full, depth + 1, time_key, out);
    } else if (auto number = number_of(value)) {
      out.push_back(Point{std::move(full), *number, std::nullopt, 0});
    }
  }
}

}  // namespace

Result<std::vector<LogHistoryEntry>> parse_trainer_state(std::string_view text) {
  auto root = parse_python_json(text);
  if (!root) return std::unexpected(with_context(root.error(), "reading trainer_state.json"));
  const json::Value* history = root->find("log_history");
  if (history == nullptr || !history->is_array())
    return make_error(ErrorCode::parse_error, "reading trainer_state.json: no \"log_history\" array in it");
  std::vector<LogHistoryEntry> entries;
  entries.reserve(history->size());
  for (const json::Value& item : history->items()) {
    LogHistoryEntry entry;
    if (item.is_object()) {
      if (const json::Value* step = item.find("step"))
        if (auto s = number_of(*step)) entry.step = step_of(*s);
      for (const auto& [name, value] : item.members()) {
        if (name == "step") continue;
        if (auto number = number_of(value)) entry.points.push_back(Point{name, *number, entry.step, 0});
      }
    }
    entries.push_back(std::move(entry));  // kept even when empty: entries are counted by position
  }
  return entries;
}

std::vector<std::string> split_csv_record(std::string_view line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field.push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back(trim(field));
      field.clear();
    } else if (c != '\r') {
      field.push_back(c);
    }
  }
  fields.emplace_back(trim(field));
  return fields;
}

CsvColumns::CsvColumns(std::vector<std::string> header) : m_header(std::move(header)) {
  for (std::string_view name : {std::string_view("step"), std::string_view("epoch")}) {
    for (std::size_t i = 0; i < m_header.size() && !m_step_column; ++i)
      if (m_header[i] == name) m_step_column = i;
    if (m_step_column) break;
  }
}

std::vector<Point> CsvColumns::row_points(std::string_view line) const {
  const std::vector<std::string> fields = split_csv_record(line);
  std::optional<std::int64_t> step;
  double value = 0;
  if (m_step_column && *m_step_column < fields.size() && parse_number_token(fields[*m_step_column], value))
    step = step_of(value);
  std::vector<Point> points;
  for (std::size_t i = 0; i < fields.size() && i < m_header.size(); ++i) {
    if (i == m_step_column || m_header[i].empty() || !parse_number_token(fields[i], value)) continue;
    points.push_back(Point{m_header[i], value, step, 0});
  }
  return points;
}

Result<std::vector<Point>> parse_metrics_json_line(std::string_view line) {
  auto root = parse_python_json(line);
  if (!root) return std::unexpected(with_context(root.error(), "reading a metrics JSON line"));
  if (!root->is_object())
    return make_error(ErrorCode::parse_error,
                      std::string("reading a metrics JSON line: expected an object, found ") +
                          json::type_name(root->type()));
  std::optional<std::int64_t> step;
  if (const json::Value* s = root->find("step"))
    if (auto n = number_of(*s)) step = step_of(*n);
  double wall_time = 0;
  std::string_view time_key;
  for (std::string_view name : {std::string_view("wall_time"), std::string_view("time")}) {
    const json::Value* t = root->find(name);
    if (auto seconds = t ? timestamp_of(*t) : std::nullopt) {
      wall_time = *seconds;
      time_key = name;
      break;
    }
  }
  std::vector<Point> points;
  flatten(*root, "", 0, time_key, points);
  for (auto& p : points) {
    p.step = step;
    p.wall_time = wall_time;
  }
  return points;
}

}  // namespace gpuhost::metrics
