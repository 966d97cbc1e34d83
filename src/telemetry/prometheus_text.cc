#include "telemetry/prometheus_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace gpuhost::telemetry {
namespace {

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string label_key(const Labels& labels) {
  std::vector<std::pair<std::string, std::string>> sorted;
  for (const auto& l : labels) sorted.emplace_back(l.name, l.value);
  std::sort(sorted.begin(), sorted.end());
  std::string key;
  for (const auto& [n, v] : sorted) key += n + '\x1f' + v + '\x1e';
  return key;
}

}  // namespace

const char* metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::counter: return "counter";
    case MetricType::gauge: return "gauge";
    case MetricType::untyped: return "untyped";
  }
  return "untyped";
}

bool is_valid_metric_name(std::string_view name) {
  if (name.empty() || !(is_name_start(name[0]) || name[0] == ':')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return is_name_start(c) || is_digit(c) || c == ':'; });
}

bool is_valid_label_name(std::string_view name) {
  if (name.empty() || !is_name_start(name[0]) || name.starts_with("__")) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return is_name_start(c) || is_digit(c); });
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (ec != std::errc()) return "NaN";  // cannot happen with 64 bytes
  return std::string(buffer, end);
}

void MetricSet::add(std::string_view name, MetricType type, std::string_view help, Labels labels,
                    double value) {
  auto it = std::find_if(m_families.begin(), m_families.end(),
                         [&](const MetricFamily& f) { return f.name == name; });
  if (it == m_families.end()) {
    m_families.push_back(MetricFamily{std::string(name), type, std::string(help), {}});
    it = std::prev(m_families.end());
  } else if (it->type != type && m_conflict.empty()) {
    m_conflict =
        std::string(name) + " added as " + metric_type_name(it->type) + " and as " + metric_type_name(type);
  }
  it->samples.push_back(Sample{std::move(labels), value});
}

const MetricFamily* MetricSet::find(std::string_view name) const {
  for (const auto& f : m_families)
    if (f.name == name) return &f;
  return nullptr;
}

Result<std::string> to_prometheus_text(const MetricSet& set) {
  if (!set.conflict().empty())
    return make_error(ErrorCode::invalid_argument, "metric type conflict: " + set.conflict());
  std::string out;
  for (const auto& family : set.families()) {
    if (!is_valid_metric_name(family.name))
      return make_error(ErrorCode::invalid_argument, "invalid metric name '" + family.name + "'");
    out += "# HELP " + family.name + " " + escape_help(family.help) + "\n";
    out += "# TYPE " + family.name + " " + metric_type_name(family.type) + "\n";
    std::set<std::string> seen;
    for (const auto& sample : family.samples) {
      std::set<std::string_view> names;
      for (const auto& label : sample.labels) {
        if (!is_valid_label_name(label.name))
          return make_error(ErrorCode::invalid_argument,
                            family.name + ": invalid label name '" + label.name + "'");
        if (!names.insert(label.name).second)
          return make_error(ErrorCode::invalid_argument,
                            family.name + ": label '" + label.name + "' repeated");
      }
      if (!seen.insert(label_key(sample.labels)).second)
        return make_error(ErrorCode::invalid_argument, family.name + ": two samples with the same labels");
      out += family.name;
      if (!sample.labels.empty()) {
        out += '{';
        for (std::size_t i = 0; i < sample.labels.size(); ++i) {
          if (i) out += ',';
          out += sample.labels[i].name + "=\"" + escape_label_value(sample.labels[i].value) + '"';
        }
        out += '}';
      }
      out += ' ' + format_sample_value(sample.value) + '\n';
    }
  }
  return out;
}

}  // namespace gpuhost::telemetry
