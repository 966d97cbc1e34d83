#pragma once

#include <iosfwd>

#include "cli/terminal_style.h"
#include "doctor/report.h"

namespace gpuhost::cli {

enum class Detail { normal, verbose };

// Human rendering of a doctor report: findings grouped by layer, problems with evidence and fix,
// then a summary line. The JSON rendering is doctor::report_to_json.
void render_doctor_report(std::ostream& out, const doctor::Report& report, const TerminalStyle& style, Detail detail);

}  // namespace gpuhost::cli
