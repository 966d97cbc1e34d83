#include "cli/top_job.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <system_error>

#include "base/strings.h"
#include "job/journal.h"
#include "supervise/job.h"

namespace gpuhost::cli {
namespace {

// How often the newest running job is chosen again (a job started later shows up this late).
constexpr double k_rechoose_seconds = 5;
// The window the derived steps/s is computed over, before the newest point.
constexpr double k_rate_window_seconds = 60;

template <typename Score>
std::optional<std::size_t> best_series(const std::vector<metrics::SeriesInfo>& series, Score score) {
  std::optional<std::size_t> best;
  int best_score = -1;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const int s = score(to_lower(series[i].name));
    if (s < 0) continue;
    if (!best || s > best_score || (s == best_score && series[i].last_time > series[*best].last_time)) {
      best = i;
      best_score = s;
    }
  }
  return best;
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

std::optional<double> unix_seconds(std::string_view journal_time) {
  auto t = job::parse_journal_time(journal_time);
  if (!t) return std::nullopt;
  return std::chrono::duration<double>(t->time_since_epoch()).count();
}

bool is_running(job::JobPhase phase) {
  return phase == job::JobPhase::running || phase == job::JobPhase::waiting_restart;
}

}  // namespace

std::optional<std::size_t> choose_loss_series(const std::vector<metrics::SeriesInfo>& series) {
  return best_series(series, [](const std::string& name) {
    if (name == "loss") return 3;
    if (!contains(name, "loss")) return -1;
    if (contains(name, "train")) return 2;
    if (contains(name, "val") || contains(name, "eval") || contains(name, "test")) return 0;
    return 1;
  });
}

std::optional<std::size_t> choose_rate_series(const std::vector<metrics::SeriesInfo>& series) {
  return best_series(series, [](const std::string& name) {
    const bool rate = contains(name, "per_second") || contains(name, "per_sec") || contains(name, "persec") ||
                      contains(name, "per_s_") || name.ends_with("per_s") || name.ends_with("/s") ||
                      contains(name, "/s/") || contains(name, "throughput");
    if (!rate) return -1;
    if (contains(name, "tok")) return 2;
    if (contains(name, "sample")) return 1;
    return 0;
  });
}

std::optional<double> step_rate(const metrics::SeriesData& data) {
  std::optional<std::size_t> first;
  std::optional<std::size_t> last;
  const std::size_t n = std::min(data.time.size(), data.step.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(data.step[i]) || !std::isfinite(data.time[i])) continue;
    if (!first || (last && data.step[i] < data.step[*last])) first = i;  // a restart: count from here
    last = i;
  }
  if (!first || !last) return std::nullopt;
  const double steps = data.step[*last] - data.step[*first];
  const double seconds = data.time[*last] - data.time[*first];
  if (steps <= 0 || seconds <= 0) return std::nullopt;
  return steps / seconds;
}

JobWatcher::JobWatcher(std::filesystem::path root, std::optional<std::string> name)
    : m_root(std::move(root)), m_pinned(std::move(name)) {}

JobWatcher::~JobWatcher() = default;

Result<void> JobWatcher::choose(double now) {
  if (m_pinned) {
    m_current = *m_pinned;
    m_chosen_at = now;
    return {};
  }
  if (m_chosen_at >= 0 && now - m_chosen_at < k_rechoose_seconds) return {};
  m_chosen_at = now;
  auto names = job::list_jobs(m_root);
  if (!names) return std::unexpected(names.error());

  // Newest first by the start of the latest supervisor; running jobs before all others.
  std::string best;
  std::string best_started;
  bool best_running = false;
  for (const auto& name : *names) {
    auto journal = job::read_journal(job::job_paths(m_root, name).journal());
    if (!journal || journal->records.empty()) continue;
    const bool running = is_running(job::fold_journal(journal->records).phase);
    std::string started = journal->records.front().time;
    for (const auto& r : journal->records)
      if (r.type == "supervisor_started") started = r.time;
    // RFC 3339 UTC times of one format order as strings.
    if (best.empty() || (running && !best_running) || (running == best_running && started > best_started)) {
      best = name;
      best_started = started;
      best_running = running;
    }
  }
  if (best != m_current) {
    m_current = best;
    m_history.reset();
    m_history_error.clear();
    m_journal_size = 0;
    m_journal_mtime = {};
    m_state = {};
  }
  return {};
}

Result<void> JobWatcher::reload_journal() {
  const auto path = job::job_paths(m_root, m_current).journal();
  std::error_code size_error;
  std::error_code time_error;
  const auto size = std::filesystem::file_size(path, size_error);
  const auto mtime = std::filesystem::last_write_time(path, time_error);
  if (!size_error && !time_error && size == m_journal_size && mtime == m_journal_mtime) return {};
  auto journal = job::read_journal(path);
  if (!journal) {
    if (journal.error().code == ErrorCode::not_found && m_pinned) {
      std::string message = "no job '" + m_current + "' in " + m_root.string();
      if (auto names = job::list_jobs(m_root))
        if (auto close = closest_match(m_current, *names)) message += " (did you mean '" + *close + "'?)";
      return make_error(ErrorCode::invalid_argument, message);
    }
    return std::unexpected(journal.error());
  }
  m_state = job::fold_journal(journal->records);
  m_journal_size = size_error ? 0 : size;
  m_journal_mtime = time_error ? std::filesystem::file_time_type{} : mtime;
  return {};
}

void JobWatcher::read_metrics(JobView& view) {
  if (!m_history) {
    const auto dir = job::job_paths(m_root, m_current).metrics();
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      view.metrics_note = "no training scalars yet";
      return;
    }
    auto history = metrics::MetricHistory::open(dir, false);
    if (!history) {
      view.metrics_note = "cannot read the metric history: " + history.error().message;
      return;
    }
    m_history = std::move(*history);
  }
  m_history->refresh();
  const auto series = m_history->series();
  for (const auto& s : series)
    if (s.last_step && (!view.step || *s.last_step > *view.step)) view.step = s.last_step;

  if (auto i = choose_loss_series(series)) {
    const auto& s = series[*i];
    view.loss = ScalarReading{s.name, s.last_value, s.last_step, s.last_time};
  } else {
    view.metrics_note = series.empty() ? "no training scalars yet" : "no series named like a loss";
  }

  if (auto i = choose_rate_series(series)) {
    view.throughput = RateReading{series[*i].name, series[*i].last_value, false};
    return;
  }
  // Steps per second from the series with the newest step (the loss's when it has steps).
  std::optional<std::size_t> stepped;
  if (auto i = choose_loss_series(series); i && series[*i].last_step) stepped = i;
  for (std::size_t i = 0; i < series.size() && !stepped; ++i)
    if (series[i].last_step) stepped = i;
  if (!stepped) return;
  const auto& s = series[*stepped];
  if (auto data = m_history->read_since(s.name, s.last_time - k_rate_window_seconds))
    if (auto rate = step_rate(*data)) view.throughput = RateReading{"steps/s", *rate, true};
}

Result<std::optional<JobView>> JobWatcher::poll(double now) {
  if (auto chosen = choose(now); !chosen) return std::unexpected(chosen.error());
  if (m_current.empty()) return std::optional<JobView>();
  if (auto loaded = reload_journal(); !loaded) return std::unexpected(loaded.error());

  JobView view;
  view.name = m_current;
  view.state = m_state;
  view.step = m_state.last_step;
  for (auto it = m_state.checkpoints.rbegin(); it != m_state.checkpoints.rend(); ++it) {
    if (it->status != job::CheckpointStatus::committed) continue;
    view.checkpoint = *it;
    if (auto t = unix_seconds(it->committed_at)) view.checkpoint_age_seconds = std::max(0.0, now - *t);
    break;
  }
  read_metrics(view);
  return std::optional<JobView>(std::move(view));
}

}  // namespace gpuhost::cli
