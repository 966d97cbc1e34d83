#include "cli/top_view.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/strings.h"
#include "base/time_format.h"
#include "gpu/nvml_types.h"

namespace gpuhost::cli {
namespace {

std::string printf_string(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

// Four significant digits ("0.4321", "12.35"); whole numbers from 10 000 up to 10^12 in full
// ("31337" tokens/s rather than "3.134e+04").
std::string number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (std::fabs(value) >= 1e4 && std::fabs(value) < 1e12) return printf_string("%.0f", value);
  return printf_string("%.4g", value);
}

std::string issue_text(const gpu::NvmlIssue& issue) {
  if (issue.message.empty()) return issue.name;
  return issue.name + ": " + issue.message;
}

std::string pad_right(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string pad_left(std::string text, std::size_t width) {
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

// Green while there is room, yellow from 70 %, red from 90 % (nvitop's load colours).
std::string by_load(const TerminalStyle& style, double fraction, std::string_view text) {
  if (fraction >= 0.9) return style.red(text);
  if (fraction >= 0.7) return style.yellow(text);
  return style.green(text);
}

struct Gauge {
  std::string label;
  std::optional<double> fraction;  // 0..1; empty: n/a
  std::string text;                // "45%", "4.0 GiB/80.0 GiB", "n/a"
};

std::string render_gauges(const std::vector<Gauge>& gauges, int columns, const TerminalStyle& style) {
  // "  label [|||||    ] text   label [..." with equal bars filling the width.
  int fixed = 2;
  for (const auto& g : gauges) fixed += static_cast<int>(g.label.size() + 3 + g.text.size()) + 3;
  const int bar = std::clamp((columns - fixed) / static_cast<int>(gauges.size()), 4, 40);
  std::string line = "  ";
  for (std::size_t i = 0; i < gauges.size(); ++i) {
    const auto& g = gauges[i];
    if (i > 0) line += "   ";
    const double fraction = std::clamp(g.fraction.value_or(0.0), 0.0, 1.0);
    const int filled = static_cast<int>(std::lround(fraction * bar));
    line += style.bold(g.label) + " [" +
            by_load(style, fraction, std::string(static_cast<std::size_t>(filled), '|')) +
            std::string(static_cast<std::size_t>(bar - filled), ' ') + "] " +
            (g.fraction ? g.text : style.dim(g.text));
  }
  return line;
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

void render_job(const TopFrame& frame, std::vector<std::string>& lines, const TerminalStyle& style) {
  const std::string indent = "      ";
  if (!frame.job) {
    lines.push_back(style.bold("job") + "   " + style.dim(frame.job_note.empty() ? "none" : frame.job_note));
    return;
  }
  const JobView& job = *frame.job;
  std::string phase = job::job_phase_name(job.state.phase);
  switch (job.state.phase) {
    case job::JobPhase::finished: phase = style.green(phase); break;
    case job::JobPhase::failed: phase = style.red(phase); break;
    case job::JobPhase::preempted:
    case job::JobPhase::stopped:
    case job::JobPhase::waiting_restart: phase = style.yellow(phase); break;
    default: phase = style.cyan(phase); break;
  }
  std::string head = style.bold("job") + "   " + style.bold(job.name) + "  " + phase;
  head += "  step " + (job.step ? std::to_string(*job.step) : std::string("-"));
  head += "  restarts " + std::to_string(job.state.restarts);
  head += "  preemptions " + std::to_string(job.state.preemptions);
  lines.push_back(head);

  const double now = std::chrono::duration<double>(frame.time.time_since_epoch()).count();
  std::string training = indent;
  if (job.loss) {
    const auto& loss = *job.loss;
    training += "loss " + style.bold(number(loss.value));
    if (loss.name != "loss") training += " (" + loss.name + ")";
    if (loss.step) training += " at step " + std::to_string(*loss.step);
    training += ", " + format_age(now - loss.time) + " ago";
  } else {
    training += "loss " + style.dim("n/a: " + job.metrics_note);
  }
  if (job.throughput)
    training +=
        "   throughput " + style.bold(number(job.throughput->per_second)) + " " + job.throughput->name;
  lines.push_back(training);

  std::string checkpoint = indent + "checkpoint ";
  if (job.checkpoint) {
    const auto& c = *job.checkpoint;
    checkpoint += style.bold(c.id);
    if (c.step) checkpoint += " at step " + std::to_string(*c.step);
    checkpoint += ", " + format_bytes(static_cast<double>(c.size_bytes));
    if (job.checkpoint_age_seconds) checkpoint += ", " + format_age(*job.checkpoint_age_seconds) + " ago";
  } else {
    checkpoint += style.dim("none committed yet");
  }
  lines.push_back(checkpoint);
}

void render_device(const TopFrame& frame, const gpu::GpuDevice& d, int columns,
                   std::vector<std::string>& lines, const TerminalStyle& style) {
  std::string head = style.bold("GPU " + std::to_string(d.index));
  if (!d.name.empty()) head += "  " + d.name;
  if (d.handle_error) {
    lines.push_back(head + "  " + style.red("cannot be opened: " + issue_text(*d.handle_error)));
    return;
  }
  if (d.lost) head += "  " + style.red("LOST (fell off the bus; see gpuhost doctor)");
  if (d.temperature.has_value()) {
    const auto& t = *d.temperature;
    std::string text = std::to_string(t.current_c) + "C";
    if (t.slowdown_c && t.current_c >= *t.slowdown_c)
      text = style.red(text + " (slowdown at " + std::to_string(*t.slowdown_c) + "C)");
    else if (t.slowdown_c && t.current_c + 5 >= *t.slowdown_c)
      text = style.yellow(text);
    head += "  " + text;
  }
  if (d.performance_state.has_value() && *d.performance_state < 32)
    head += "  P" + std::to_string(*d.performance_state);
  if (d.clocks.has_value()) {
    const auto& c = *d.clocks;
    head += "  sm " + std::to_string(c.sm_mhz) + (c.sm_max_mhz ? "/" + std::to_string(c.sm_max_mhz) : "") +
            " MHz";
    head += "  mem " + std::to_string(c.memory_mhz) +
            (c.memory_max_mhz ? "/" + std::to_string(c.memory_max_mhz) : "") + " MHz";
  }
  if (d.fan_percent.has_value()) head += "  fan " + std::to_string(*d.fan_percent) + "%";
  lines.push_back(head);

  std::vector<Gauge> gauges;
  if (d.utilization.has_value())
    gauges.push_back({"util", d.utilization.value->gpu_percent / 100.0,
                      std::to_string(d.utilization.value->gpu_percent) + "%"});
  else
    gauges.push_back({"util", std::nullopt, "n/a"});
  if (d.memory.has_value() && d.memory.value->total_bytes > 0) {
    const auto& m = *d.memory;
    gauges.push_back({"mem", static_cast<double>(m.used_bytes) / static_cast<double>(m.total_bytes),
                      format_bytes(static_cast<double>(m.used_bytes)) + "/" +
                          format_bytes(static_cast<double>(m.total_bytes))});
  } else {
    gauges.push_back({"mem", std::nullopt, "n/a"});
  }
  if (d.power.has_value()) {
    const auto& p = *d.power;
    const double watts = p.usage_mw / 1000.0;
    if (p.enforced_limit_mw > 0)
      gauges.push_back(
          {"power", static_cast<double>(p.usage_mw) / p.enforced_limit_mw,
           printf_string("%.0f", watts) + "/" + printf_string("%.0f W", p.enforced_limit_mw / 1000.0)});
    else
      gauges.push_back({"power", 0.0, printf_string("%.0f W", watts)});
  } else {
    gauges.push_back({"power", std::nullopt, "n/a"});
  }
  lines.push_back(render_gauges(gauges, columns, style));

  if (d.processes.issue) {
    lines.push_back("  processes " + style.dim("n/a: " + issue_text(*d.processes.issue)));
  } else if (d.processes.has_value()) {
    for (const auto& p : *d.processes) {
      auto name = frame.process_names.find(p.pid);
      std::string shown = name == frame.process_names.end() ? "?" : name->second;
      if (shown.size() > 24) shown = shown.substr(0, 23) + "~";
      const std::string memory =
          p.used_memory_bytes ? format_bytes(static_cast<double>(*p.used_memory_bytes)) : "n/a";
      lines.push_back("  " + style.dim("pid") + " " + pad_left(std::to_string(p.pid), 7) + "  " +
                      pad_right(shown, 24) + " " + pad_left(memory, 10) + "  " +
                      (p.graphics ? "graphics" : "compute"));
    }
  }
}

void render_gpus(const TopFrame& frame, int columns, std::vector<std::string>& lines,
                 const TerminalStyle& style) {
  const auto& s = frame.gpus;
  if (!s.available) {
    lines.push_back(style.bold("GPUs") + "  " +
                    style.red("unavailable: " +
                              (s.error ? issue_text(*s.error) : std::string("NVML could not be used"))));
    // IN_USE: closed on purpose while gpuhost mig apply resets a GPU (gpu/nvml_hold.h); nothing to fix.
    if (!s.error || s.error->status != gpu::nvml::NVML_ERROR_IN_USE)
      lines.push_back("      gpuhost doctor says what is missing and how to fix it");
    return;
  }
  if (s.count_error) {
    lines.push_back(style.bold("GPUs") + "  " +
                    style.red("cannot be counted: " + issue_text(*s.count_error)));
    return;
  }
  if (s.devices.empty()) {
    lines.push_back(style.bold("GPUs") + "  none found by NVML");
    return;
  }
  for (const auto& d : s.devices) render_device(frame, d, columns, lines, style);
}

template <typename T, typename F>
json::Value optional_json(const gpu::Reading<T>& reading, F value) {
  return reading.has_value() ? json::Value(value(*reading)) : json::Value();
}

json::Value issue_json(const std::optional<gpu::NvmlIssue>& issue) {
  if (!issue) return json::Value();
  json::Value doc = json::Value::object();
  doc["status"] = issue->status;
  doc["name"] = issue->name;
  doc["message"] = issue->message;
  return doc;
}

json::Value job_json(const JobView& job) {
  json::Value doc = json::Value::object();
  doc["name"] = job.name;
  doc["phase"] = job::job_phase_name(job.state.phase);
  doc["step"] = job.step ? json::Value(*job.step) : json::Value();
  doc["restarts"] = job.state.restarts;
  doc["preemptions"] = job.state.preemptions;
  if (job.loss) {
    json::Value loss = json::Value::object();
    loss["name"] = job.loss->name;
    loss["value"] =
        std::isfinite(job.loss->value) ? json::Value(job.loss->value) : json::Value(number(job.loss->value));
    loss["step"] = job.loss->step ? json::Value(*job.loss->step) : json::Value();
    loss["time"] = job.loss->time;
    doc["loss"] = std::move(loss);
  } else {
    doc["loss"] = json::Value();
  }
  if (job.throughput) {
    json::Value rate = json::Value::object();
    rate["name"] = job.throughput->name;
    rate["per_second"] = job.throughput->per_second;
    rate["derived_from_steps"] = job.throughput->derived;
    doc["throughput"] = std::move(rate);
  } else {
    doc["throughput"] = json::Value();
  }
  doc["metrics_note"] = job.metrics_note;
  if (job.checkpoint) {
    json::Value c = json::Value::object();
    c["id"] = job.checkpoint->id;
    c["step"] = job.checkpoint->step ? json::Value(*job.checkpoint->step) : json::Value();
    c["size_bytes"] = job.checkpoint->size_bytes;
    c["committed_at"] = job.checkpoint->committed_at;
    c["age_seconds"] = job.checkpoint_age_seconds ? json::Value(*job.checkpoint_age_seconds) : json::Value();
    doc["checkpoint"] = std::move(c);
  } else {
    doc["checkpoint"] = json::Value();
  }
  return doc;
}

}  // namespace

std::string format_age(double seconds) {
  const long long s = std::max(0LL, std::llround(seconds));
  char buffer[48];
  if (s < 60)
    std::snprintf(buffer, sizeof buffer, "%llds", s);
  else if (s < 3600)
    std::snprintf(buffer, sizeof buffer, "%lldm %02llds", s / 60, s % 60);
  else if (s < 86400)
    std::snprintf(buffer, sizeof buffer, "%lldh %02lldm", s / 3600, (s % 3600) / 60);
  else
    std::snprintf(buffer, sizeof buffer, "%lldd %lldh", s / 86400, (s % 86400) / 3600);
  return buffer;
}

std::string fit_line(std::string_view line, int columns) {
  std::string out;
  int visible = 0;
  bool colored = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      std::size_t end = line.find('m', i);
      if (end == std::string_view::npos) break;
      out.append(line.substr(i, end - i + 1));
      colored = true;
      i = end;
      continue;
    }
    const bool continuation = (static_cast<unsigned char>(c) & 0xC0) == 0x80;
    if (!continuation) {
      if (visible == columns) {
        if (colored) out += "\x1b[0m";
        return out;
      }
      ++visible;
    }
    out += c;
  }
  return out;
}

std::vector<std::string> render_top(const TopFrame& frame, const TopLayout& layout,
                                    const TerminalStyle& style) {
  std::vector<std::string> lines;
  std::string head = style.bold("gpuhost top");
  if (layout.interactive)
    head += style.dim(" (q quits; every " + number(std::chrono::duration<double>(layout.interval).count()) +
                      " s)");
  if (!frame.hostname.empty()) head += "  " + frame.hostname;
  head += "  " + format_rfc3339_utc(frame.time);
  if (!frame.gpus.driver_version.empty()) head += "  driver " + frame.gpus.driver_version;
  if (frame.gpus.cuda_driver_version) head += "  CUDA " + cuda_version_text(*frame.gpus.cuda_driver_version);
  lines.push_back(head);
  lines.emplace_back();
  render_job(frame, lines, style);
  lines.emplace_back();
  render_gpus(frame, layout.columns, lines, style);
  if (layout.fit)
    for (auto& line : lines) line = fit_line(line, layout.columns);
  return lines;
}

json::Value top_json(const TopFrame& frame) {
  json::Value doc = json::Value::object();
  doc["time"] = format_rfc3339_utc(frame.time);
  doc["hostname"] = frame.hostname;
  const auto& s = frame.gpus;
  json::Value nvml = json::Value::object();
  nvml["available"] = s.available;
  nvml["error"] = issue_json(s.error);
  nvml["count_error"] = issue_json(s.count_error);
  nvml["driver_version"] = s.driver_version;
  nvml["cuda_driver_version"] =
      s.cuda_driver_version ? json::Value(cuda_version_text(*s.cuda_driver_version)) : json::Value();
  doc["nvml"] = std::move(nvml);

  json::Value gpus = json::Value::array();
  for (const auto& d : s.devices) {
    json::Value g = json::Value::object();
    g["index"] = d.index;
    g["name"] = d.name;
    g["uuid"] = d.uuid;
    g["lost"] = d.lost;
    g["error"] = issue_json(d.handle_error);
    g["utilization_percent"] = optional_json(d.utilization, [](const auto& u) { return u.gpu_percent; });
    g["memory_used_bytes"] = optional_json(d.memory, [](const auto& m) { return m.used_bytes; });
    g["memory_total_bytes"] = optional_json(d.memory, [](const auto& m) { return m.total_bytes; });
    g["temperature_c"] = optional_json(d.temperature, [](const auto& t) { return t.current_c; });
    g["power_watts"] = optional_json(d.power, [](const auto& p) { return p.usage_mw / 1000.0; });
    g["power_limit_watts"] = d.power.has_value() && d.power.value->enforced_limit_mw > 0
                                 ? json::Value(d.power.value->enforced_limit_mw / 1000.0)
                                 : json::Value();
    g["sm_clock_mhz"] = optional_json(d.clocks, [](const auto& c) { return c.sm_mhz; });
    g["sm_clock_max_mhz"] = d.clocks.has_value() && d.clocks.value->sm_max_mhz
                                ? json::Value(d.clocks.value->sm_max_mhz)
                                : json::Value();
    g["memory_clock_mhz"] = optional_json(d.clocks, [](const auto& c) { return c.memory_mhz; });
    g["memory_clock_max_mhz"] = d.clocks.has_value() && d.clocks.value->memory_max_mhz
                                    ? json::Value(d.clocks.value->memory_max_mhz)
                                    : json::Value();
    json::Value processes = json::Value::array();
    if (d.processes.has_value()) {
      for (const auto& p : *d.processes) {
        json::Value item = json::Value::object();
        item["pid"] = p.pid;
        auto name = frame.process_names.find(p.pid);
        item["name"] = name == frame.process_names.end() ? json::Value() : json::Value(name->second);
        item["type"] = p.graphics ? "graphics" : "compute";
        item["used_memory_bytes"] = p.used_memory_bytes ? json::Value(*p.used_memory_bytes) : json::Value();
        processes.push_back(std::move(item));
      }
    }
    g["processes"] = std::move(processes);
    g["processes_error"] = issue_json(d.processes.issue);
    gpus.push_back(std::move(g));
  }
  doc["gpus"] = std::move(gpus);
  doc["job"] = frame.job ? job_json(*frame.job) : json::Value();
  doc["job_note"] = frame.job_note;
  return doc;
}

}  // namespace gpuhost::cli
