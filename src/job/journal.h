#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"

namespace gpuhost::job {

// One event in a job's history. Format on disk: doc/journal.md.
struct JournalRecord {
  std::uint64_t seq = 0;  // 1, 2, 3 ... in file order
  std::string time;       // RFC 3339 UTC with milliseconds, "2026-11-30T20:13:14.123Z"
  std::string type;       // "job_started", "checkpoint_committed", ... (doc/journal.md lists them)
  json::Value fields;     // the record's other members, an object
};

// What reading a journal found besides the records.
struct JournalDamage {
  // A torn last record (the writer died mid-append): its bytes, dropped. Normal after a crash.
  std::uint64_t torn_tail_bytes = 0;
  // Records whose checksum or framing failed before the end: each is skipped, counted here, and
  // its line number kept for the message. Not normal: the file was edited or the disk lied.
  std::vector<std::uint64_t> corrupt_lines;
};

struct JournalContents {
  std::vector<JournalRecord> records;
  JournalDamage damage;
};

// Reads a journal without changing it (for `gpuhost status`). not_found when absent.
[[nodiscard]] Result<JournalContents> read_journal(const std::filesystem::path& path);

// Where a reader following a journal that another process appends to stands (read_journal_from).
struct JournalPosition {
  std::uint64_t offset = 0;  // bytes of whole lines consumed
  std::uint64_t lines = 0;   // lines consumed (corrupt_lines go on counting from here)
  // CRC-32 of the last check_bytes bytes before `offset` (the end of the last line consumed): a
  // journal replaced by another at least as long differs there.
  std::uint64_t check_bytes = 0;
  std::uint32_t check_crc = 0;
};

// What read_journal_from found after a position.
struct JournalIncrement {
  JournalContents contents;  // the records after the position; damage counts there only
  JournalPosition next;      // where the next call starts
  bool restarted = false;    // the journal shrank or was replaced: `contents` is all of it
};

// Reads what was appended to a journal since `from` (a position an earlier call returned; {}
// reads from the start) without changing it, so that a reader in another process (gpuhost serve)
// parses each record once. A torn last line is not consumed: `next` stops before it and a later
// call reads it again, whole by then. A journal now shorter than `from.offset`, or whose bytes
// before it differ from those read then, is read from its start with `restarted` set.
// not_found when absent.
[[nodiscard]] Result<JournalIncrement> read_journal_from(const std::filesystem::path& path,
                                                         const JournalPosition& from);

// The append side, owned by the one supervisor that holds the job's lock. Each append writes one
// framed record and fsyncs before returning, so a record that append() returned for survives a
// crash or power loss. Opening truncates a torn tail left by a crash. Move-only; not
// thread-safe (the supervisor appends from its main loop only).
class Journal {
 public:
  // Creates the file (and fsyncs its directory) when absent.
  [[nodiscard]] static Result<Journal> open(const std::filesystem::path& path);

  Journal(Journal&& other) noexcept;
  Journal& operator=(Journal&& other) noexcept;
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;
  ~Journal();

  // What was in the file when it was opened, plus everything appended since.
  [[nodiscard]] const JournalContents& contents() const;

  // Appends {seq, time, type, ...fields}. `fields` must be an object (or null) without the names
  // seq, time and type, and must serialise to valid JSON (strings in UTF-8): else invalid_argument.
  // Errors: io_error with the OS reason and the free space on the journal's disk; a failed append
  // is cut off again, so the file stays whole. The pointer is valid until the next append.
  [[nodiscard]] Result<const JournalRecord*> append(std::string_view type, json::Value fields = {});

 private:
  struct State;
  explicit Journal(std::unique_ptr<State> state);
  std::unique_ptr<State> m_state;
};

// The time format journal records use.
[[nodiscard]] std::string journal_time(std::chrono::system_clock::time_point t);
// Parses journal_time() output (and plain RFC 3339 UTC); nullopt when malformed.
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> parse_journal_time(std::string_view text);

}  // namespace gpuhost::job
