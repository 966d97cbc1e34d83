#pragma once

#include <string_view>

#include "job/job_state.h"
#include "metrics/history.h"
#include "telemetry/prometheus_text.h"

namespace gpuhost::telemetry {

// The gpuhost_* metrics of one supervised job, labelled job_name="<name>" (not `job`, which
// Prometheus renames to exported_job on scrape), in base units (research/05 §1.1): its phase
// (gpuhost_job_phase{phase}, 1 for the current one), checkpoint commits (count, newest usable
// checkpoint's size, step, commit time and age at `now`), preemption notices, restarts, child
// starts, the newest step; and every training scalar of `history` (may be null) as one family,
// gpuhost_train_metric{name="<as the trainer wrote it>"}, with its step and time, plus the points
// dropped (cardinality cap, other source). `now` is seconds since the Unix epoch. Reference:
// doc/metrics.md.
void append_job_metrics(std::string_view job_name, const job::JobState& state,
                        const metrics::MetricHistory* history, double now, MetricSet& out);

}  // namespace gpuhost::telemetry
