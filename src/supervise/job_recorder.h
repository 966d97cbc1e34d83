#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/json.h"
#include "job/job_state.h"
#include "job/journal.h"

namespace gpuhost::supervise {

// The job's journal and the state folded from it, shared by the pieces of `gpuhost run` that
// record what happens (checkpoint ledger, mirror, supervisor loop), so the state they act on is
// always exactly what is durable. Each record is folded on its own (fold_more): appending costs
// the same for the 10th record and the 10,000th. Not thread-safe: the supervisor's thread owns it.
class JobRecorder {
 public:
  struct Callbacks {
    // Every record as it is appended (for the console).
    std::function<void(const job::JournalRecord&)> on_record;
    // One-line messages that are not records ("waiting 2 s before restart 3/10").
    std::function<void(std::string_view)> on_message;
  };

  JobRecorder(job::Journal journal, Callbacks callbacks);

  // Appends a record and folds it. False (said once, until an append succeeds again) when the
  // journal cannot be written: supervision goes on, but nothing unrecorded is ever treated as
  // committed.
  bool record(std::string_view type, json::Value fields);
  void message(std::string_view text) const;

  [[nodiscard]] const job::JobState& state() const { return m_state; }
  [[nodiscard]] const job::JournalContents& contents() const { return m_journal.contents(); }

 private:
  job::Journal m_journal;
  Callbacks m_callbacks;
  job::JobState m_state;
  bool m_failed = false;
};

}  // namespace gpuhost::supervise
