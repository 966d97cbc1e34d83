#include "telemetry/job_catalog.h"

#include <cmath>
#include <limits>
#include <system_error>

#include "job/job_paths.h"
#include "job/journal.h"

namespace gpuhost::telemetry {
namespace {

std::shared_ptr<const JobJournalView> make_view(const job::JobState& state, std::uint64_t records,
                                                std::uint64_t corrupt_records) {
  auto view = std::make_shared<JobJournalView>();
  view->state = state;
  view->records = records;
  view->corrupt_records = corrupt_records;
  for (const auto& event : view->state.events) view->event_times.push_back(journal_epoch_seconds(event.time));
  for (const auto& checkpoint : view->state.checkpoints)
    view->checkpoint_times.push_back(journal_epoch_seconds(checkpoint.committed_at));
  return view;
}

bool has_ended(const JobJournalView& view) {
  using job::JobPhase;
  const JobPhase phase = view.state.phase;
  return phase == JobPhase::finished || phase == JobPhase::failed || phase == JobPhase::stopped;
}

std::shared_ptr<metrics::MetricHistory> open_history(const std::filesystem::path& dir) {
  // Opened only once the supervisor made the folder: a reader must not create it in a job
  // directory (it may not even be allowed to).
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return nullptr;
  auto opened = metrics::MetricHistory::open(dir, /*writable=*/false);
  if (!opened) return nullptr;
  return std::shared_ptr<metrics::MetricHistory>(std::move(*opened));
}

}  // namespace

// Where the reader of one journal stands, and the state folded from everything before it: new
// records are parsed and folded once.
struct JobCatalog::JournalFollower {
  job::JournalPosition position;
  job::JobState state;
  std::uint64_t records = 0;
  std::uint64_t corrupt_records = 0;
};

double journal_epoch_seconds(std::string_view journal_time) {
  auto parsed = job::parse_journal_time(journal_time);
  if (!parsed) return std::numeric_limits<double>::quiet_NaN();
  return std::chrono::duration<double>(parsed->time_since_epoch()).count();
}

JobCatalog::JobCatalog(JobCatalogOptions options) : m_options(std::move(options)) {}

JobCatalog::Entry JobCatalog::load(const std::string& name, const Entry* previous) const {
  const job::JobPaths paths = job::job_paths(m_options.root, name);
  Entry entry;
  entry.job.name = name;
  if (previous) entry = *previous;

  std::error_code ec;
  const auto size = std::filesystem::file_size(paths.journal(), ec);
  const std::optional<std::uintmax_t> journal_size = ec ? std::nullopt : std::optional(size);
  const auto mtime = journal_size ? std::filesystem::last_write_time(paths.journal(), ec)
                                  : std::filesystem::file_time_type{};
  if (!previous || journal_size != previous->journal_size || mtime != previous->journal_mtime) {
    entry.journal_size = journal_size;
    entry.journal_mtime = mtime;
    if (!journal_size) {
      entry.job.journal = std::make_shared<JobJournalView>();  // a job.json without a journal yet
      entry.follower.reset();
    } else {
      if (!entry.follower) entry.follower = std::make_shared<JournalFollower>();
      JournalFollower& follower = *entry.follower;
      if (auto increment = job::read_journal_from(paths.journal(), follower.position)) {
        if (increment->restarted) follower = JournalFollower{};
        const bool grew =
            !increment->contents.records.empty() || !increment->contents.damage.corrupt_lines.empty();
        job::fold_more(follower.state, increment->contents.records);
        follower.records += increment->contents.records.size();
        follower.corrupt_records += increment->contents.damage.corrupt_lines.size();
        follower.position = increment->next;
        // Only a torn record came (or the time changed): the view as it was stays right.
        if (grew || increment->restarted || !entry.job.journal || !entry.job.journal->read_error.empty())
          entry.job.journal = make_view(follower.state, follower.records, follower.corrupt_records);
      } else {
        auto view = std::make_shared<JobJournalView>();
        view->read_error = increment.error().message;
        entry.job.journal = std::move(view);
        entry.follower.reset();  // read whole next time
      }
    }
  }

  if (entry.job.history)
    entry.job.history->refresh();
  else if (!has_ended(*entry.job.journal))
    entry.job.history = open_history(paths.metrics());
  return entry;
}

void JobCatalog::refresh() {
  std::unique_lock refreshing(m_refresh_mutex, std::try_to_lock);
  if (!refreshing) return;
  const auto now = std::chrono::steady_clock::now();
  if (m_last_refresh && now - *m_last_refresh < m_options.min_refresh_interval) return;
  m_last_refresh = now;
  if (m_options.root.empty()) return;

  std::vector<std::string> names;
  if (m_options.only_job) {
    names.push_back(*m_options.only_job);
  } else if (auto listed = job::list_jobs(m_options.root)) {
    names = std::move(*listed);
  }
  std::map<std::string, Entry, std::less<>> previous;
  {
    std::lock_guard lock(m_mutex);
    previous = m_entries;
  }
  // The slow part (reading files) runs without m_mutex, so readers are never held up by it.
  std::map<std::string, Entry, std::less<>> next;
  for (const auto& name : names) {
    auto it = previous.find(name);
    next.emplace(name, load(name, it == previous.end() ? nullptr : &it->second));
  }
  std::lock_guard lock(m_mutex);
  // A history job() loaded meanwhile is kept.
  for (auto& [name, entry] : next) {
    auto it = m_entries.find(name);
    if (!entry.job.history && it != m_entries.end() && it->second.job.history)
      entry.job.history = it->second.job.history;
  }
  m_entries = std::move(next);
}

std::vector<CatalogJob> JobCatalog::jobs() const {
  std::lock_guard lock(m_mutex);
  std::vector<CatalogJob> out;
  out.reserve(m_entries.size());
  for (const auto& [name, entry] : m_entries) out.push_back(entry.job);
  return out;
}

std::optional<CatalogJob> JobCatalog::job(std::string_view name, HistoryNeed need) {
  {
    std::lock_guard lock(m_mutex);
    auto it = m_entries.find(name);
    if (it == m_entries.end()) return std::nullopt;
    if (it->second.job.history || need == HistoryNeed::if_loaded) return it->second.job;
  }
  // Loading reads the whole history: not under m_mutex.
  auto history = open_history(job::job_paths(m_options.root, std::string(name)).metrics());
  std::lock_guard lock(m_mutex);
  auto it = m_entries.find(name);
  if (it == m_entries.end()) return std::nullopt;
  if (!it->second.job.history) it->second.job.history = std::move(history);
  return it->second.job;
}

}  // namespace gpuhost::telemetry
