#include "cli/doctor_render.h"

#include <ostream>

#include "cli/wording.h"

namespace gpuhost::cli {

namespace {

std::string tag(doctor::Severity s, const TerminalStyle& style) {
  switch (s) {
    case doctor::Severity::ok: return style.green("[ ok ]");
    case doctor::Severity::info: return style.dim("[info]");
    case doctor::Severity::warn: return style.yellow("[warn]");
    case doctor::Severity::fail: return style.red(style.bold("[FAIL]"));
  }
  return "";
}

}  // namespace

void render_doctor_report(std::ostream& out, const doctor::Report& report, const TerminalStyle& style, Detail detail) {
  const auto& facts = report.facts;
  out << style.bold("gpuhost doctor") << " - " << (facts.system.hostname.empty() ? "host" : facts.system.hostname);
  if (!facts.system.os.name.empty()) out << " (" << facts.system.os.name << ")";
  if (report.judged_from != "this host") out << "\n" << style.dim("judging a saved report: " + report.judged_from + ", collected " + facts.collected_at);
  out << "\n";

  const doctor::Layer layers[] = {doctor::Layer::host, doctor::Layer::gpu,      doctor::Layer::cuda,
                                  doctor::Layer::frameworks, doctor::Layer::os, doctor::Layer::security,
                                  doctor::Layer::preflight};
  for (auto layer : layers) {
    bool header = false;
    for (const auto& f : report.findings.all()) {
      if (f.layer != layer) continue;
      if (!header) {
        out << "\n" << style.bold(doctor::layer_title(layer)) << "\n";
        header = true;
      }
      out << "  " << tag(f.severity, style) << " " << f.title;
      if (!f.subject.empty()) out << style.dim("  " + f.subject);
      out << "\n";
      bool problem = f.severity == doctor::Severity::warn || f.severity == doctor::Severity::fail;
      bool show_all = problem || detail == Detail::verbose || layer == doctor::Layer::preflight;
      std::size_t shown = show_all ? f.evidence.size() : std::min<std::size_t>(f.evidence.size(), 1);
      for (std::size_t i = 0; i < shown; ++i) out << "         " << style.dim(f.evidence[i]) << "\n";
      if (!f.fix.empty() && (problem || detail == Detail::verbose || layer == doctor::Layer::preflight))
        out << "         " << style.cyan("fix: ") << f.fix << "\n";
    }
  }
  std::size_t fails = report.findings.count(doctor::Severity::fail);
  std::size_t warns = report.findings.count(doctor::Severity::warn);
  out << "\n" << style.bold("Summary: ");
  out << (fails ? style.red(std::to_string(fails) + " failed") : style.green("0 failed")) << ", "
      << (warns ? style.yellow(counted(static_cast<std::int64_t>(warns), "warning")) : std::string("0 warnings")) << ", "
      << report.findings.count(doctor::Severity::ok) << " ok, " << report.findings.count(doctor::Severity::info) << " info";
  out << style.dim("  (knowledge: " + report.knowledge_summary + ")") << "\n";
}

}  // namespace gpuhost::cli
