#pragma once

#include <string>
#include <string_view>

#include "base/error.h"
#include "base/json.h"
#include "doctor/facts.h"
#include "doctor/finding.h"

namespace gpuhost::doctor {

// The schema name written into every report; bump the number on incompatible changes
// (doc/doctor-json.md).
inline constexpr std::string_view k_report_schema = "gpuhost.doctor/1";

// A judged host: what was seen and what it means.
struct Report {
  HostFacts facts;
  Findings findings;
  std::string judged_from;  // "this host", or the --from file name
  std::string knowledge_summary;  // which data judged it ("embedded, as of 2026-11")
};

// The report document (doc/doctor-json.md): schema, summary, findings, then the facts.
[[nodiscard]] json::Value report_to_json(const Report& report);

// Reads the facts back out of a saved report, to judge them again. Errors say plainly when the
// file is not a gpuhost doctor report at all.
[[nodiscard]] Result<HostFacts> facts_from_report(std::string_view text);

}  // namespace gpuhost::doctor
