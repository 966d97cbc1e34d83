#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gpuhost::telemetry {

// The Prometheus text exposition format 0.0.4 (prometheus/docs
// docs/instrumenting/exposition_formats.md; research/05 §1.2).
inline constexpr std::string_view k_prometheus_content_type = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { counter, gauge, untyped };
[[nodiscard]] const char* metric_type_name(MetricType type);  // "counter", "gauge", "untyped"

struct Label {
  std::string name;
  std::string value;
};
using Labels = std::vector<Label>;

struct Sample {
  Labels labels;
  double value = 0;
};

// All samples of one metric name; written as one contiguous block under one HELP and one TYPE.
struct MetricFamily {
  std::string name;
  MetricType type = MetricType::untyped;
  std::string help;
  std::vector<Sample> samples;
};

// [a-zA-Z_:][a-zA-Z0-9_:]*
[[nodiscard]] bool is_valid_metric_name(std::string_view name);
// [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved for Prometheus).
[[nodiscard]] bool is_valid_label_name(std::string_view name);
// Label values escape backslash, double quote and line feed.
[[nodiscard]] std::string escape_label_value(std::string_view value);
// HELP text escapes backslash and line feed.
[[nodiscard]] std::string escape_help(std::string_view help);
// Shortest text that parses back to `value` (Go ParseFloat), "NaN", "+Inf" or "-Inf".
[[nodiscard]] std::string format_sample_value(double value);

// The metrics of one scrape, grouped by family in the order each family was first added. Not
// thread-safe; one per scrape.
class MetricSet {
 public:
  // Adds one sample. The family is created on first use with `type` and `help`; a later add with
  // another type is remembered as an error that to_prometheus_text reports.
  void add(std::string_view name, MetricType type, std::string_view help, Labels labels, double value);

  [[nodiscard]] const std::vector<MetricFamily>& families() const { return m_families; }
  // nullptr when no sample of `name` was added.
  [[nodiscard]] const MetricFamily* find(std::string_view name) const;
  [[nodiscard]] const std::string& conflict() const { return m_conflict; }

 private:
  std::vector<MetricFamily> m_families;
  std::string m_conflict;  // first type mismatch, empty when none
};

// The set in text format 0.0.4, ending in a line feed. Errors (invalid_argument, naming the
// family): an invalid metric or label name, a label repeated within a sample, two samples with
// the same label set, a family added with two types. The caller's bug, not the scrape's.
[[nodiscard]] Result<std::string> to_prometheus_text(const MetricSet& set);

}  // namespace gpuhost::telemetry
