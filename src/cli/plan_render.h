#pragma once
// gpuhost plan's human output: the itemised memory estimate and the ranking table, laid out for
// the terminal's width (80 columns and up; narrower ones get the 80-column layout). Flags and
// notes go on lines of their own, wrapped, so that no row is cut and no column shifts.

#include <ostream>
#include <string>
#include <vector>

#include "plan/memory.h"
#include "plan/model.h"
#include "plan/ranking.h"

namespace gpuhost::cli {

// $COLUMNS when it holds a width, else the terminal's, else 160 (output to a file or pipe).
[[nodiscard]] int plan_output_width();

void render_estimate(std::ostream& out, const plan::ModelSpec& model, const plan::JobSetup& setup,
                     const plan::MemoryEstimate& estimate);

// The first `top` options, then the spot advice for the top fitting row, the ranking's notes and
// the catalog's warnings, wrapped to `width`. Columns: # cloud instance GPUs fits hours best, plus
// $/h, on-demand and spot+risk from 120 columns on.
void render_ranking(std::ostream& out, const plan::Ranking& ranking,
                    const std::vector<std::string>& catalog_warnings, int top, int width);

// "$3.67", "$147", "$1.2M", "$4.6B"; "missing" for no price.
[[nodiscard]] std::string money_text(std::optional<double> usd);
// "2.0 h", "1234.0 h", "57k h", "1.2M h"; "?" when unknown.
[[nodiscard]] std::string hours_text(std::optional<double> hours);

}  // namespace gpuhost::cli
