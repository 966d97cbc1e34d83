// Names follow the Prometheus naming guide (base units, `_total` counters, `_timestamp_seconds`;
// prometheus/docs docs/practices/naming.md) and lint clean with `promtool check metrics`.
#include "telemetry/job_metrics.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "job/journal.h"

namespace gpuhost::telemetry {
namespace {

// Not `job`: Prometheus attaches its own `job` label (the scrape job) and, with the default
// honor_labels: false, renames ours to `exported_job` (prometheus/docs configuration.md,
// scrape_config honor_labels). kube-state-metrics' kube_job_* families use `job_name` likewise.
constexpr std::string_view k_job_label = "job_name";

constexpr job::JobPhase k_phases[] = {
    job::JobPhase::new_job,  job::JobPhase::running, job::JobPhase::waiting_restart, job::JobPhase::preempted,
    job::JobPhase::finished, job::JobPhase::failed,  job::JobPhase::stopped,
};

struct JobEmitter {
  MetricSet& out;
  std::string job;

  [[nodiscard]] Labels labels(Labels extra = {}) const {
    Labels l{{std::string(k_job_label), job}};
    for (auto& label : extra) l.push_back(std::move(label));
    return l;
  }
  void gauge(std::string_view name, std::string_view help, double value, Labels extra = {}) const {
    out.add(name, MetricType::gauge, help, labels(std::move(extra)), value);
  }
  void counter(std::string_view name, std::string_view help, double value, Labels extra = {}) const {
    out.add(name, MetricType::counter, help, labels(std::move(extra)), value);
  }
};

// The advisor's newest judgement (doc/advise.md): one series per finding, as kube-state-metrics
// gives a condition; absent findings are absent series, so `gpuhost_job_finding == 1` alerts.
void append_advice(const JobEmitter& e, const job::JobState& state) {
  if (!state.advice) return;
  for (const auto& f : state.advice->findings)
    e.gauge("gpuhost_job_finding",
            "1 for each finding of the advisor's newest judgement (what limits the trainer)", 1,
            {{"finding", f.id},
             {"strength", f.strength},
             {"gpu", f.gpu ? std::to_string(*f.gpu) : std::string()}});
  e.gauge("gpuhost_job_findings",
          "Findings in the advisor's newest judgement (0: nothing seen holds the job back)",
          static_cast<double>(state.advice->findings.size()));
  if (state.advice->step_seconds)
    e.gauge("gpuhost_job_step_seconds", "The trainer's step time over the advisor's newest window",
            *state.advice->step_seconds);
  if (state.advice->mfu_percent)
    e.gauge("gpuhost_job_mfu_ratio",
            "Model FLOPs utilisation, 0..1: the trainer's own figure (its mfu line or logged metric), or "
            "computed from run --model (6N + 12LHQT FLOPs per token x tokens/s over the GPUs' dense peak)",
            *state.advice->mfu_percent / 100);
  if (state.last_run_step_seconds)
    e.gauge("gpuhost_job_last_run_step_seconds",
            "The step time the advisor measured in the job's previous run", *state.last_run_step_seconds);
}

double seconds_since_epoch(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

void append_checkpoints(const JobEmitter& e, const job::JobState& state, double now) {
  // Every commit record counts, whatever became of the checkpoint since: the counter never falls.
  e.counter("gpuhost_job_checkpoints_committed_total",
            "Checkpoints the supervisor validated and committed to the job's journal",
            static_cast<double>(state.checkpoints.size()));
  auto candidates = job::resume_candidates(state);
  if (candidates.empty()) return;
  const job::CommittedCheckpoint& newest = *candidates.front();
  e.gauge("gpuhost_job_checkpoint_last_size_bytes",
          "Size of the newest usable committed checkpoint (the one a restart resumes from)",
          static_cast<double>(newest.size_bytes));
  if (newest.step)
    e.gauge("gpuhost_job_checkpoint_last_step", "Training step of the newest usable committed checkpoint",
            static_cast<double>(*newest.step));
  if (auto committed = job::parse_journal_time(newest.committed_at)) {
    double at = seconds_since_epoch(*committed);
    e.gauge("gpuhost_job_checkpoint_last_commit_timestamp_seconds",
            "When the newest usable checkpoint was committed, in seconds since the Unix epoch", at);
    e.gauge("gpuhost_job_checkpoint_age_seconds",
            "Seconds since the newest usable checkpoint was committed: the work a crash now would lose",
            std::max(0.0, now - at));
  }
}

// The remote mirror (doc/remote-store.md): how far object storage is behind the local commits.
void append_mirror(const JobEmitter& e, const job::JobState& state, double now) {
  if (!state.mirrored) return;
  std::vector<const job::CommittedCheckpoint*> usable;
  for (const auto& c : state.checkpoints)
    if (c.status != job::CheckpointStatus::bad) usable.push_back(&c);
  const job::CommittedCheckpoint* durable = nullptr;
  std::size_t first_behind = 0;
  for (std::size_t i = 0; i < usable.size(); ++i)
    if (!usable[i]->durable_at.empty()) {
      durable = usable[i];
      first_behind = i + 1;
    }
  double lag = 0;
  if (first_behind < usable.size())
    if (auto committed = job::parse_journal_time(usable[first_behind]->committed_at))
      lag = std::max(0.0, now - seconds_since_epoch(*committed));
  e.gauge("gpuhost_job_mirror_lag_seconds",
          "0 when the newest committed checkpoint is durable in object storage, else seconds since the "
          "oldest committed checkpoint newer than the newest durable one was committed",
          lag);
  e.gauge("gpuhost_job_mirror_pending_uploads", "Multipart uploads the mirror started and has not finished",
          static_cast<double>(state.pending_uploads.size()));
  if (!durable) return;
  if (durable->step)
    e.gauge("gpuhost_job_mirror_durable_step", "Training step of the newest checkpoint durable in object storage",
            static_cast<double>(*durable->step));
  if (auto at = job::parse_journal_time(durable->durable_at))
    e.gauge("gpuhost_job_mirror_durable_timestamp_seconds",
            "When the newest durable checkpoint's manifest was stored, in seconds since the Unix epoch",
            seconds_since_epoch(*at));
}

void append_training(const JobEmitter& e, const metrics::MetricHistory& history) {
  for (const auto& series : history.series()) {
    if (series.points == 0) continue;
    Labels name{{"name", series.name}};
    e.gauge("gpuhost_train_metric",
            "Newest value of a training scalar the trainer reported (loss, lr, ...), named as the trainer "
            "wrote it in the name label",
            series.last_value, name);
    if (series.last_step)
      e.gauge("gpuhost_train_metric_step", "Training step of the newest value of a training scalar",
              static_cast<double>(*series.last_step), name);
    e.gauge("gpuhost_train_metric_timestamp_seconds",
            "When the newest value of a training scalar was reported, in seconds since the Unix epoch",
            series.last_time, name);
  }
  const metrics::HistoryStats stats = history.stats();
  constexpr std::string_view dropped_help =
      "Training scalar points not stored: reason cardinality (a name beyond the series limit or "
      "unusable), other_source (a name another source reports); counted by the process writing the "
      "history";
  e.counter("gpuhost_train_points_dropped_total", dropped_help,
            static_cast<double>(stats.dropped_over_cardinality), {{"reason", "cardinality"}});
  e.counter("gpuhost_train_points_dropped_total", dropped_help,
            static_cast<double>(stats.dropped_other_source), {{"reason", "other_source"}});
  e.counter("gpuhost_train_history_write_failures_total",
            "Training scalar points that could not be written to the job's metrics folder (disk full, I/O "
            "error); counted by the process writing the history",
            static_cast<double>(stats.write_failures));
}

}  // namespace

void append_job_metrics(std::string_view job_name, const job::JobState& state,
                        const metrics::MetricHistory* history, double now, MetricSet& out) {
  JobEmitter e{out, std::string(job_name)};
  for (auto phase : k_phases)
    e.gauge("gpuhost_job_phase", "1 for the job's current phase, 0 for the others (from its journal)",
            phase == state.phase ? 1 : 0, {{"phase", job::job_phase_name(phase)}});
  e.gauge("gpuhost_job_up", "1 while the job's trainer is running (phase running), else 0",
          state.phase == job::JobPhase::running ? 1 : 0);
  e.counter("gpuhost_job_child_starts_total", "Times the supervisor started the trainer",
            static_cast<double>(state.child_starts));
  e.counter("gpuhost_job_restarts_total", "Restarts the supervisor scheduled after the trainer crashed",
            static_cast<double>(state.restarts));
  e.counter("gpuhost_job_preemptions_total", "Preemption notices (and drills) the supervisor acted on",
            static_cast<double>(state.preemptions));
  if (state.last_step)
    e.gauge("gpuhost_job_step", "Newest training step the journal recorded (progress or checkpoint)",
            static_cast<double>(*state.last_step));
  append_checkpoints(e, state, now);
  append_mirror(e, state, now);
  append_advice(e, state);
  if (history) append_training(e, *history);
}

}  // namespace gpuhost::telemetry
