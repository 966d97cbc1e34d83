#include "supervise/job_recorder.h"

#include <span>
#include <utility>

namespace gpuhost::supervise {

JobRecorder::JobRecorder(job::Journal journal, Callbacks callbacks)
    : m_journal(std::move(journal)), m_callbacks(std::move(callbacks)) {
  m_state = job::fold_journal(m_journal.contents().records);
}

bool JobRecorder::record(std::string_view type, json::Value fields) {
  auto appended = m_journal.append(type, std::move(fields));
  if (!appended) {
    if (!m_failed) message("cannot write the job journal: " + appended.error().message);
    m_failed = true;
    return false;
  }
  m_failed = false;
  job::fold_more(m_state, std::span<const job::JournalRecord>(*appended, 1));
  if (m_callbacks.on_record) m_callbacks.on_record(**appended);
  return true;
}

void JobRecorder::message(std::string_view text) const {
  if (m_callbacks.on_message) m_callbacks.on_message(text);
}

}  // namespace gpuhost::supervise
