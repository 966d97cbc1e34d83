#include "job/journal.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <system_error>

#include "base/checksum.h"
#include "base/strings.h"
#include "base/time_format.h"
#include "platform/files.h"

namespace gpuhost::job {
namespace {

// A journal holds one small record per event; a gigabyte means something else is wrong.
constexpr std::size_t k_max_journal_bytes = std::size_t{1} << 30;

std::string crc_hex(std::string_view bytes) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(crc32(bytes)));
  return buf;
}

// "<length> <crc32> <json>\n" (doc/journal.md).
std::string frame(std::string_view json) {
  std::string line = std::to_string(json.size());
  line += ' ';
  line += crc_hex(json);
  line += ' ';
  line += json;
  line += '\n';
  return line;
}

bool is_lower_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// One line without its newline; nullopt when the framing, the checksum or the JSON fails.
std::optional<JournalRecord> parse_line(std::string_view line) {
  std::size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space > 10) return std::nullopt;
  std::uint64_t length = 0;
  auto [end, ec] = std::from_chars(line.data(), line.data() + space, length);
  if (ec != std::errc() || end != line.data() + space) return std::nullopt;
  std::string_view rest = line.substr(space + 1);
  if (rest.size() < 10 || rest[8] != ' ') return std::nullopt;
  std::string_view crc = rest.substr(0, 8);
  for (char c : crc)
    if (!is_lower_hex(c)) return std::nullopt;
  std::string_view json_text = rest.substr(9);
  if (json_text.size() != length || crc_hex(json_text) != crc) return std::nullopt;

  auto value = json::parse(json_text);
  if (!value || !value->is_object()) return std::nullopt;
  JournalRecord record;
  record.fields = json::Value::object();
  bool have_seq = false, have_time = false, have_type = false;
  for (auto& [key, member] : value->members()) {
    if (key == "seq") {
      if (!member.is_integer() || member.as_int() < 1) return std::nullopt;
      record.seq = static_cast<std::uint64_t>(member.as_int());
      have_seq = true;
    } else if (key == "time") {
      if (!member.is_string()) return std::nullopt;
      record.time = member.as_string();
      have_time = true;
    } else if (key == "type") {
      if (!member.is_string() || member.as_string().empty()) return std::nullopt;
      record.type = member.as_string();
      have_type = true;
    } else {
      record.fields.members().emplace_back(key, std::move(member));
    }
  }
  if (!have_seq || !have_time || !have_type) return std::nullopt;
  return record;
}

struct ParsedJournal {
  JournalContents contents;
  std::uint64_t kept_bytes = 0;  // the file's length without its torn tail
};

ParsedJournal parse_journal(std::string_view text) {
  ParsedJournal parsed;
  std::size_t pos = 0;
  std::uint64_t line_number = 0;
  while (pos < text.size()) {
    ++line_number;
    std::size_t newline = text.find('\n', pos);
    if (newline == std::string_view::npos) {
      // The writer died before the newline: the record never finished.
      parsed.contents.damage.torn_tail_bytes = text.size() - pos;
      break;
    }
    auto record = parse_line(text.substr(pos, newline - pos));
    std::size_t next = newline + 1;
    if (record) {
      parsed.contents.records.push_back(std::move(*record));
    } else if (next == text.size()) {
      // A bad last line is what a crash leaves when the blocks of one append reached the disk
      // out of order; nothing after it depended on it.
      parsed.contents.damage.torn_tail_bytes = text.size() - pos;
      break;
    } else {
      parsed.contents.damage.corrupt_lines.push_back(line_number);
    }
    pos = next;
  }
  parsed.kept_bytes = text.size() - parsed.contents.damage.torn_tail_bytes;
  return parsed;
}

Result<ParsedJournal> read_parsed(const std::filesystem::path& path) {
  auto text = platform::read_file(path, k_max_journal_bytes);
  if (!text) return std::unexpected(text.error());
  return parse_journal(*text);
}

// Reads exactly `digits` decimal digits at `pos`.
std::optional<int> read_digits(std::string_view text, std::size_t& pos, std::size_t digits) {
  if (pos + digits > text.size()) return std::nullopt;
  int value = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    char c = text[pos + i];
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  pos += digits;
  return value;
}

bool expect(std::string_view text, std::size_t& pos, std::string_view any_of) {
  if (pos >= text.size() || any_of.find(text[pos]) == std::string_view::npos) return false;
  ++pos;
  return true;
}

}  // namespace

Result<JournalContents> read_journal(const std::filesystem::path& path) {
  auto parsed = read_parsed(path);
  if (!parsed) return std::unexpected(with_context(parsed.error(), "reading the journal"));
  return std::move(parsed->contents);
}

namespace {

// The bytes of the file in [offset, offset + bytes).
Result<std::string> read_span(std::ifstream& in, const std::string& what, std::uint64_t offset,
                              std::uint64_t bytes) {
  std::string out(static_cast<std::size_t>(bytes), '\0');
  in.clear();
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(out.data(), static_cast<std::streamsize>(bytes));
  if (!in || static_cast<std::uint64_t>(in.gcount()) != bytes)
    return make_error(ErrorCode::io_error, what + ": read failed");
  return out;
}

// At most this much of the last line consumed is kept as a check: enough to tell two journals
// apart (the line holds its seq, its time to the millisecond and a CRC).
constexpr std::uint64_t k_max_check_bytes = 4096;

}  // namespace

Result<JournalIncrement> read_journal_from(const std::filesystem::path& path, const JournalPosition& from) {
  const std::u8string name = path.u8string();
  const std::string what = "reading the journal: reading " + std::string(name.begin(), name.end());
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec) && !ec)
      return make_error(ErrorCode::not_found, what + ": no such file");
    return make_error(ErrorCode::io_error, what + ": cannot open it");
  }
  // The size from the open file, not a second look at the path: what a writer appends after
  // this is left for the next call.
  in.seekg(0, std::ios::end);
  const std::streamoff end = in.tellg();
  if (end < 0) return make_error(ErrorCode::io_error, what + ": cannot find its size");
  const auto size = static_cast<std::uint64_t>(end);
  if (size > k_max_journal_bytes)
    return make_error(ErrorCode::io_error,
                      what + ": larger than " + std::to_string(k_max_journal_bytes) + " bytes");

  JournalIncrement increment;
  JournalPosition start = from;
  bool same_file = size >= from.offset && from.check_bytes <= from.offset;
  if (same_file && from.check_bytes > 0) {
    auto check = read_span(in, what, from.offset - from.check_bytes, from.check_bytes);
    if (!check) return std::unexpected(check.error());
    same_file = crc32(*check) == from.check_crc;
  }
  if (!same_file) {
    start = JournalPosition{};
    increment.restarted = true;
  }

  auto text = read_span(in, what, start.offset, size - start.offset);
  if (!text) return std::unexpected(text.error());
  ParsedJournal parsed = parse_journal(*text);
  const std::string_view kept =
      std::string_view(*text).substr(0, static_cast<std::size_t>(parsed.kept_bytes));
  for (auto& line : parsed.contents.damage.corrupt_lines) line += start.lines;
  increment.contents = std::move(parsed.contents);
  increment.next = start;
  if (!kept.empty()) {
    // kept ends with a newline; the last line starts after the one before it.
    const std::size_t previous =
        kept.size() >= 2 ? kept.rfind('\n', kept.size() - 2) : std::string_view::npos;
    const std::string_view last_line = kept.substr(previous == std::string_view::npos ? 0 : previous + 1);
    const std::string_view check =
        last_line.substr(last_line.size() - static_cast<std::size_t>(std::min<std::uint64_t>(
                                                last_line.size(), k_max_check_bytes)));
    increment.next.offset = start.offset + kept.size();
    increment.next.lines =
        start.lines + static_cast<std::uint64_t>(std::count(kept.begin(), kept.end(), '\n'));
    increment.next.check_bytes = check.size();
    increment.next.check_crc = crc32(check);
  }
  return increment;
}

struct Journal::State {
  platform::AppendFile file;
  JournalContents contents;
  std::uint64_t size = 0;  // bytes of whole records in the file
  std::uint64_t next_seq = 1;
};

Journal::Journal(std::unique_ptr<State> state) : m_state(std::move(state)) {}
Journal::Journal(Journal&& other) noexcept = default;
Journal& Journal::operator=(Journal&& other) noexcept = default;
Journal::~Journal() = default;

Result<Journal> Journal::open(const std::filesystem::path& path) {
  ParsedJournal parsed;
  bool created = false;
  if (auto existing = read_parsed(path)) {
    parsed = std::move(*existing);
  } else if (existing.error().code == ErrorCode::not_found) {
    created = true;
  } else {
    return std::unexpected(with_context(existing.error(), "opening the journal"));
  }
  auto file = platform::AppendFile::open(path);
  if (!file) return std::unexpected(file.error());
  if (created) {
    if (auto synced = platform::sync_directory(path.parent_path()); !synced)
      return std::unexpected(synced.error());
  }
  if (parsed.contents.damage.torn_tail_bytes > 0) {
    if (auto cut = file->truncate(parsed.kept_bytes); !cut)
      return std::unexpected(with_context(cut.error(), "dropping the torn last record of the journal"));
  }
  auto state =
      std::make_unique<State>(State{std::move(*file), std::move(parsed.contents), parsed.kept_bytes, 1});
  for (const auto& record : state->contents.records)
    state->next_seq = std::max(state->next_seq, record.seq + 1);
  return Journal(std::move(state));
}

const JournalContents& Journal::contents() const {
  return m_state->contents;
}

Result<const JournalRecord*> Journal::append(std::string_view type, json::Value fields) {
  if (type.empty())
    return make_error(ErrorCode::invalid_argument, "appending to the journal: empty record type");
  if (!fields.is_null() && !fields.is_object())
    return make_error(ErrorCode::invalid_argument,
                      "appending a " + std::string(type) +
                          " record to the journal: fields must be an object, not " +
                          json::type_name(fields.type()));
  if (fields.is_null()) fields = json::Value::object();
  for (const auto& [key, value] : fields.members()) {
    if (key == "seq" || key == "time" || key == "type")
      return make_error(ErrorCode::invalid_argument, "appending a " + std::string(type) +
                                                         " record to the journal: the field name \"" + key +
                                                         "\" is reserved");
  }

  JournalRecord record;
  record.seq = m_state->next_seq;
  record.time = journal_time(std::chrono::system_clock::now());
  record.type = std::string(type);
  json::Value object = json::Value::object();
  object["seq"] = record.seq;
  object["time"] = record.time;
  object["type"] = record.type;
  for (const auto& member : fields.members()) object.members().push_back(member);
  // dump() writes bytes that are not UTF-8 as U+FFFD, so every record parses back; a field that
  // must survive byte for byte (a checkpoint's path) is checked by whoever records it.
  std::string json_text = json::dump(object);
  record.fields = std::move(fields);

  const std::string line = frame(json_text);
  auto fail = [&](Error error) -> Result<const JournalRecord*> {
    // Leave no half record behind for the next append to follow.
    (void)m_state->file.truncate(m_state->size);
    if (auto space = platform::disk_space(m_state->file.path().parent_path()))
      error.message += " (" + format_bytes(static_cast<double>(space->available_bytes)) + " available there)";
    return std::unexpected(std::move(error));
  };
  if (auto written = m_state->file.append(line); !written) return fail(written.error());
  if (auto synced = m_state->file.sync(); !synced) return fail(synced.error());

  m_state->size += line.size();
  ++m_state->next_seq;
  m_state->contents.records.push_back(std::move(record));
  return &m_state->contents.records.back();
}

std::string journal_time(std::chrono::system_clock::time_point t) {
  return format_rfc3339_utc_millis(t);
}

std::optional<std::chrono::system_clock::time_point> parse_journal_time(std::string_view text) {
  using namespace std::chrono;
  // RFC 3339 section 5.6: full-date "T" full-time, with time-offset "Z" or +hh:mm / -hh:mm.
  std::size_t pos = 0;
  auto year = read_digits(text, pos, 4);
  if (!year || !expect(text, pos, "-")) return std::nullopt;
  auto month = read_digits(text, pos, 2);
  if (!month || !expect(text, pos, "-")) return std::nullopt;
  auto day = read_digits(text, pos, 2);
  if (!day || !expect(text, pos, "Tt ")) return std::nullopt;
  auto hour = read_digits(text, pos, 2);
  if (!hour || !expect(text, pos, ":")) return std::nullopt;
  auto minute = read_digits(text, pos, 2);
  if (!minute || !expect(text, pos, ":")) return std::nullopt;
  auto second = read_digits(text, pos, 2);
  if (!second) return std::nullopt;
  year_month_day ymd{std::chrono::year(*year), std::chrono::month(static_cast<unsigned>(*month)),
                     std::chrono::day(static_cast<unsigned>(*day))};
  if (!ymd.ok() || *hour > 23 || *minute > 59 || *second > 60) return std::nullopt;

  nanoseconds fraction{0};
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    std::size_t digits = 0;
    std::int64_t value = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 9) {
        value = value * 10 + (text[pos] - '0');
        ++digits;
      }
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (std::size_t i = digits; i < 9; ++i) value *= 10;
    fraction = nanoseconds(value);
  }

  minutes offset{0};
  if (expect(text, pos, "Zz")) {
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    auto offset_hours = read_digits(text, pos, 2);
    if (!offset_hours || !expect(text, pos, ":")) return std::nullopt;
    auto offset_minutes = read_digits(text, pos, 2);
    if (!offset_minutes || *offset_hours > 23 || *offset_minutes > 59) return std::nullopt;
    offset = minutes(sign * (*offset_hours * 60 + *offset_minutes));
  } else {
    return std::nullopt;
  }
  if (pos != text.size()) return std::nullopt;

  auto local = sys_days(ymd) + hours(*hour) + minutes(*minute) + seconds(*second) + fraction;
  return time_point_cast<system_clock::duration>(local - offset);
}

}  // namespace gpuhost::job
