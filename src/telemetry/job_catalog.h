#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "job/job_state.h"
#include "metrics/history.h"

namespace gpuhost::telemetry {

// A job's journal as monitors show it: the folded state, and the Unix times of its events and
// checkpoints (journal times are text). Immutable once built.
struct JobJournalView {
  job::JobState state;
  std::vector<double> event_times;       // seconds since the epoch of state.events[i]; NaN if unparsable
  std::vector<double> checkpoint_times;  // the same for state.checkpoints[i].committed_at
  std::uint64_t records = 0;
  std::uint64_t corrupt_records = 0;  // skipped: checksum or framing failed (doc/journal.md)
  std::string read_error;             // set when the journal could not be read at all
};

// One job as the catalog holds it. Both pointers stay valid after the catalog moves on.
struct CatalogJob {
  std::string name;
  std::shared_ptr<const JobJournalView> journal;  // never null
  // Read-only; null until JOBDIR/metrics exists, and for a job that has ended until someone asks
  // for it (JobCatalog::job with HistoryNeed::load).
  std::shared_ptr<metrics::MetricHistory> history;
};

// Whether JobCatalog::job loads a history that is not loaded yet.
enum class HistoryNeed { if_loaded, load };

struct JobCatalogOptions {
  std::filesystem::path root;           // the jobs root (job::jobs_root()); empty: no jobs
  std::optional<std::string> only_job;  // watch this job alone (`gpuhost run --dashboard`)
  // refresh() calls closer together than this reuse what the last one found.
  std::chrono::milliseconds min_refresh_interval{250};
};

// The supervised jobs under a jobs root, kept up to date for `gpuhost serve` (job metrics on
// /metrics, the dashboard) by readers in another process than the supervisors writing them.
// A journal is looked at again only when its size or modification time changed, and then only
// what was appended since is read and parsed (all of it again when it shrank or was replaced;
// a torn last record is read again once whole); each history is opened once read-only and
// refresh()ed, which reads only what was appended. A history is held in memory whole (24 bytes
// a point), so one of a job that has ended (finished, failed, stopped) is opened only when the
// dashboard asks for that job. Thread-safe.
class JobCatalog {
 public:
  explicit JobCatalog(JobCatalogOptions options);

  // Brings the catalog up to date with the disk: lists the root, re-reads changed journals,
  // picks up appended metric points. Never fails: a journal that cannot be read shows as such
  // in its view. Returns at once when another thread is refreshing or the last refresh was
  // less than min_refresh_interval ago.
  void refresh();

  [[nodiscard]] std::vector<CatalogJob> jobs() const;  // sorted by name
  [[nodiscard]] std::optional<CatalogJob> job(std::string_view name,
                                              HistoryNeed need = HistoryNeed::if_loaded);

 private:
  struct JournalFollower;  // what has been read of a journal, and its records
  struct Entry {
    CatalogJob job;
    std::optional<std::uintmax_t> journal_size;
    std::filesystem::file_time_type journal_mtime{};
    // Shared by the copies of an entry that refresh() makes, and used only by refresh() (one at
    // a time, under m_refresh_mutex); null until the journal was read.
    std::shared_ptr<JournalFollower> follower;
  };
  Entry load(const std::string& name, const Entry* previous) const;

  // Fixed after construction.
  const JobCatalogOptions m_options;

  std::mutex m_refresh_mutex;  // held by the one refresh() at work
  // Guarded by m_refresh_mutex.
  std::optional<std::chrono::steady_clock::time_point> m_last_refresh;

  mutable std::mutex m_mutex;
  // Guarded by m_mutex.
  std::map<std::string, Entry, std::less<>> m_entries;
};

// The Unix time of a journal time ("2026-11-30T20:13:14.123Z"); NaN when it does not parse.
[[nodiscard]] double journal_epoch_seconds(std::string_view journal_time);

}  // namespace gpuhost::telemetry
