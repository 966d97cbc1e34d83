#include "cli/plan_render.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "base/strings.h"
#include "platform/environment.h"
#include "platform/system_info.h"

namespace gpuhost::cli {

namespace {

// `text` cut to `width` with a trailing '~' when it did not fit.
std::string fit(const std::string& text, std::size_t width) {
  if (text.size() <= width) return text;
  return text.substr(0, width - 1) + "~";
}

std::string left(const std::string& text, std::size_t width) {
  std::string s = fit(text, width);
  return s + std::string(width - s.size(), ' ');
}

std::string right(const std::string& text, std::size_t width) {
  std::string s = fit(text, width);
  return std::string(width - s.size(), ' ') + s;
}

// `text` as lines of at most `width` columns, each after `indent`, broken at spaces.
void wrapped(std::ostream& out, const std::string& indent, const std::string& text, int width) {
  const std::size_t room = static_cast<std::size_t>(std::max(20, width - static_cast<int>(indent.size())));
  std::string line;
  for (const std::string& word : split(text, ' ')) {
    if (!line.empty() && line.size() + 1 + word.size() > room) {
      out << indent << line << "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out << indent << line << "\n";
}

}  // namespace

int plan_output_width() {
  if (auto columns = platform::get_env("COLUMNS")) {
    if (auto n = parse_int(*columns); n && *n > 0 && *n < 10000) return static_cast<int>(*n);
  }
  if (int width = platform::terminal_width(); width > 0) return width;
  return 160;
}

// No %e or %g here: their exponents differ between C runtimes (1e+09 / 1e+009), and the output is
// compared with golden files on Linux and Windows.
std::string money_text(std::optional<double> usd) {
  if (!usd) return "missing";
  char buf[32];
  const double v = *usd;
  if (v < 100)
    std::snprintf(buf, sizeof buf, "$%.2f", v);
  else if (v < 1e6)
    std::snprintf(buf, sizeof buf, "$%.0f", v);
  else if (v < 1e9)
    std::snprintf(buf, sizeof buf, "$%.1fM", v / 1e6);
  else if (v < 1e12)
    std::snprintf(buf, sizeof buf, "$%.1fB", v / 1e9);
  else
    return ">$1000B";
  return buf;
}

std::string hours_text(std::optional<double> hours) {
  if (!hours) return "?";
  char buf[32];
  const double v = *hours;
  if (v < 10000)
    std::snprintf(buf, sizeof buf, "%.1f h", v);
  else if (v < 1e6)
    std::snprintf(buf, sizeof buf, "%.0fk h", v / 1e3);
  else if (v < 1e9)
    std::snprintf(buf, sizeof buf, "%.1fM h", v / 1e6);
  else
    return ">1G h";
  return buf;
}

void render_estimate(std::ostream& out, const plan::ModelSpec& model, const plan::JobSetup& s,
                     const plan::MemoryEstimate& e) {
  out << model.name << " (" << model.key << "), " << plan::method_name(s.method);
  if (s.method != plan::Method::inference)
    out << ", " << plan::precision_name(s.precision) << ", " << plan::optimizer_name(s.optimizer);
  out << ", batch " << s.batch;
  if (e.seq) out << " x " << e.seq << " tokens";
  if (s.gpus > 1) out << ", " << s.gpus << " GPUs (" << plan::sharding_name(s.sharding) << ")";
  out << "\n";
  if (!model.provenance.note.empty()) out << "  preset: " << model.provenance.note << "\n";
  for (const auto& item : e.items) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-44s %10s", item.label.c_str(), format_bytes(item.bytes).c_str());
    out << line << "   " << item.explanation << "\n";
  }
  out << "  total per GPU: " << format_bytes(e.total_bytes)
      << (e.basis == "incomplete" ? " (lower bound: a term is unknown)" : "")
      << (e.basis == "calibrated" ? " (calibrated estimate)" : "")
      << (e.basis == "layer_table" ? " (activations from the layer table)" : "") << "\n";
  if (e.trainable_params > 0)
    out << "  trainable parameters: " << static_cast<long long>(e.trainable_params) << "\n";
  for (const auto& n : e.notes) out << "  note: " << n << "\n";
}

void render_ranking(std::ostream& out, const plan::Ranking& ranking,
                    const std::vector<std::string>& catalog_warnings, int top, int width) {
  const bool wide = width >= 120;
  // 80 columns: 2 + rank 2 + cloud 7 + instance 18 + GPUs 17 + fit 3 + hours 8 + best 17, spaced.
  const std::size_t rank_width = wide ? 3 : 2, instance_width = wide ? 28 : 18, gpus_width = wide ? 18 : 17,
                    hours_width = wide ? 9 : 8;
  auto row = [&](const std::string& rank, const std::string& cloud, const std::string& instance,
                 const std::string& gpus, const std::string& fits, const std::string& per_hour,
                 const std::string& hours, const std::string& on_demand, const std::string& spot,
                 const std::string& best) {
    std::string line = "  " + left(rank, rank_width) + " " + left(cloud, 7) + " " +
                       left(instance, instance_width) + " " + left(gpus, gpus_width) + " " + left(fits, 3) +
                       " ";
    if (wide) line += right(per_hour, 9) + " ";
    line += right(hours, hours_width) + " ";
    if (wide) line += right(on_demand, 10) + " " + right(spot, 10) + " ";
    line += left(best, 17);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  };
  row("#", "cloud", "instance", "GPUs", "fit", "$/h", "hours", "on-demand", "spot+risk", "best");
  int rank = 0;
  for (const auto& o : ranking.options) {
    if (rank >= top) break;
    ++rank;
    row(std::to_string(rank), o.instance->cloud, o.instance->instance_type,
        std::to_string(o.instance->gpu_count) + "x " + o.instance->gpu, o.fits ? "yes" : "no",
        money_text(o.price_per_hour), hours_text(o.hours), money_text(o.on_demand_total),
        money_text(o.spot_total), o.best_total ? money_text(o.best_total) + " " + o.best_option : "-");
    if (!o.flags.empty()) wrapped(out, "        ", join(o.flags, "; "), width);
  }
  for (const auto& o : ranking.options)
    if (o.fits && o.risk && o.risk->finishes) {
      char text[240];
      std::snprintf(
          text, sizeof text,
          "spot on the top row: %.2f expected interruptions; checkpoint every %.0f min to minimise the "
          "expected cost (Young: sqrt(2 x checkpoint time / interruption rate))",
          o.risk->expected_interruptions, o.risk->optimal_interval_hours * 60);
      wrapped(out, "  ", text, width);
      break;
    }
  for (const auto& n : ranking.notes) wrapped(out, "  ", "note: " + n, width);
  for (const auto& w : catalog_warnings) wrapped(out, "  ", "catalog: " + w, width);
}

}  // namespace gpuhost::cli
