#include "job/journal.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "platform/process.h"

namespace gpuhost::job {
namespace {

class JournalFile : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    m_dir = std::filesystem::temp_directory_path() /
            ("gpuhost-journal-test-" + std::to_string(platform::current_process_id()) + "-" +
             std::to_string(counter++));
    std::filesystem::remove_all(m_dir);
    std::filesystem::create_directories(m_dir);
    m_path = m_dir / "journal.jsonl";
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  std::string file_text() const {
    std::ifstream in(m_path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
  }
  void write_text(const std::string& text) const { std::ofstream(m_path, std::ios::binary) << text; }
  void append_text(const std::string& text) const {
    std::ofstream(m_path, std::ios::binary | std::ios::app) << text;
  }

  // Writes `count` records through the journal and closes it.
  void write_records(int count) const {
    auto journal = Journal::open(m_path);
    ASSERT_TRUE(journal) << journal.error().message;
    for (int i = 0; i < count; ++i) {
      json::Value fields;
      fields["n"] = i;
      ASSERT_TRUE(journal->append("tick", fields));
    }
  }

  std::filesystem::path m_dir;
  std::filesystem::path m_path;
};

TEST_F(JournalFile, OpenCreatesAnEmptyJournal) {
  auto journal = Journal::open(m_path);
  ASSERT_TRUE(journal) << journal.error().message;
  EXPECT_TRUE(std::filesystem::exists(m_path));
  EXPECT_TRUE(journal->contents().records.empty());
}

TEST_F(JournalFile, AppendedRecordsReadBackAfterReopen) {
  {
    auto journal = Journal::open(m_path);
    ASSERT_TRUE(journal) << journal.error().message;
    json::Value fields;
    fields["path"] = "/data/ck/checkpoint-300";
    fields["size_bytes"] = 1234567890123LL;
    fields["step"] = 300;
    fields["note"] = "two\nlines";
    auto record = journal->append("checkpoint_committed", fields);
    ASSERT_TRUE(record) << record.error().message;
    EXPECT_EQ((*record)->seq, 1u);
    ASSERT_TRUE(journal->append("supervisor_stopped"));
    EXPECT_EQ(journal->contents().records.size(), 2u);
  }
  auto contents = read_journal(m_path);
  ASSERT_TRUE(contents) << contents.error().message;
  ASSERT_EQ(contents->records.size(), 2u);
  const JournalRecord& first = contents->records[0];
  EXPECT_EQ(first.seq, 1u);
  EXPECT_EQ(first.type, "checkpoint_committed");
  EXPECT_TRUE(parse_journal_time(first.time).has_value()) << first.time;
  EXPECT_EQ(first.fields.get_string("path"), "/data/ck/checkpoint-300");
  EXPECT_EQ(first.fields.get_int("size_bytes"), 1234567890123LL);
  EXPECT_EQ(first.fields.get_string("note"), "two\nlines");
  EXPECT_FALSE(first.fields.contains("seq"));
  EXPECT_EQ(contents->records[1].type, "supervisor_stopped");
  EXPECT_EQ(contents->records[1].seq, 2u);
  EXPECT_EQ(contents->damage.torn_tail_bytes, 0u);
  EXPECT_TRUE(contents->damage.corrupt_lines.empty());
  // A newline inside a field is escaped: one record, one line.
  std::string text = file_text();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2);
}

TEST_F(JournalFile, WritesAndReadsTheDocumentedFraming) {
  // Framed by hand: length 78, CRC-32 computed independently (Python zlib.crc32).
  write_text(
      "78 e4124c6a "
      "{\"seq\":1,\"time\":\"2026-11-30T20:13:14.123Z\",\"type\":\"job_created\",\"name\":\"demo\"}\n");
  auto contents = read_journal(m_path);
  ASSERT_TRUE(contents) << contents.error().message;
  ASSERT_EQ(contents->records.size(), 1u);
  EXPECT_EQ(contents->records[0].fields.get_string("name"), "demo");

  {
    auto journal = Journal::open(m_path);
    ASSERT_TRUE(journal);
    ASSERT_TRUE(journal->append("gave_up", json::Value::Object{{"reason", "x"}}));
  }
  std::string text = file_text();
  std::string second = text.substr(text.find('\n') + 1);
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(second.back(), '\n');
  std::size_t space1 = second.find(' ');
  std::string json_text = second.substr(space1 + 10, second.size() - space1 - 11);
  EXPECT_EQ(second.substr(0, space1), std::to_string(json_text.size()));
  EXPECT_EQ(second[space1 + 9], ' ');
  EXPECT_EQ(json_text.rfind("{\"seq\":2,\"time\":\"", 0), 0u) << json_text;
  EXPECT_NE(json_text.find("\"type\":\"gave_up\",\"reason\":\"x\"}"), std::string::npos) << json_text;
}

TEST_F(JournalFile, TornTailIsReportedByReadAndCutOffByOpen) {
  write_records(2);
  const std::string whole = file_text();
  append_text("97 0badf00d {\"seq\":3,\"time\":\"2026-");  // the writer died mid-append

  auto contents = read_journal(m_path);
  ASSERT_TRUE(contents) << contents.error().message;
  EXPECT_EQ(contents->records.size(), 2u);
  EXPECT_EQ(contents->damage.torn_tail_bytes, 34u);
  EXPECT_TRUE(contents->damage.corrupt_lines.empty());
  EXPECT_EQ(file_text().size(), whole.size() + 34) << "reading must not change the file";

  {
    auto journal = Journal::open(m_path);
    ASSERT_TRUE(journal) << journal.error().message;
    EXPECT_EQ(journal->contents().damage.torn_tail_bytes, 34u);
    EXPECT_EQ(file_text(), whole);
    ASSERT_TRUE(journal->append("tick"));
  }
  auto after = read_journal(m_path);
  ASSERT_TRUE(after);
  ASSERT_EQ(after->records.size(), 3u);
  EXPECT_EQ(after->records[2].seq, 3u);
  EXPECT_EQ(after->damage.torn_tail_bytes, 0u);
  EXPECT_TRUE(after->damage.corrupt_lines.empty());
}

TEST_F(JournalFile, BadLastLineWithNewlineIsATornTail) {
  write_records(2);
  std::string text = file_text();
  std::size_t last_start = text.rfind('\n', text.size() - 2) + 1;
  text[text.size() - 3] ^= 0x01;  // inside the last record's JSON
  write_text(text);
  auto contents = read_journal(m_path);
  ASSERT_TRUE(contents);
  EXPECT_EQ(contents->records.size(), 1u);
  EXPECT_EQ(contents->damage.torn_tail_bytes, text.size() - last_start);
  EXPECT_TRUE(contents->damage.corrupt_lines.empty());
}

TEST_F(JournalFile, CorruptRecordInTheMiddleIsSkippedAndReported) {
  write_records(3);
  std::string text = file_text();
  std::size_t second = text.find('\n') + 1;
  std::size_t n_value = text.find("\"n\":1", second);
  ASSERT_NE(n_value, std::string::npos);
  text[n_value + 4] = '7';  // same length, different bytes: the CRC no longer matches
  write_text(text);

  auto contents = read_journal(m_path);
  ASSERT_TRUE(contents);
  ASSERT_EQ(contents->records.size(), 2u);
  EXPECT_EQ(contents->records[0].seq, 1u);
  EXPECT_EQ(contents->records[1].seq, 3u);
  EXPECT_EQ(contents->damage.corrupt_lines, std::vector<std::uint64_t>{2});
  EXPECT_EQ(contents->damage.torn_tail_bytes, 0u);

  // Opening keeps the damaged record (it is evidence, not a torn tail) and appends after it.
  auto journal = Journal::open(m_path);
  ASSERT_TRUE(journal);
  EXPECT_EQ(file_text(), text);
  auto record = journal->append("tick");
  ASSERT_TRUE(record);
  EXPECT_EQ((*record)->seq, 4u);
}

TEST_F(JournalFile, ChecksumLengthAndJsonMismatchesAreDetected) {
  write_records(1);
  const std::string good = file_text();
  std::size_t space1 = good.find(' ');
  std::string json_text = good.substr(space1 + 10, good.size() - space1 - 11);
  std::string crc = good.substr(space1 + 1, 8);
  std::string wrong_crc = crc;
  wrong_crc[0] = wrong_crc[0] == '0' ? '1' : '0';
  const std::string tail = good;  // a valid last line, so the damaged ones are "in the middle"

  const std::vector<std::string> damaged = {
      std::to_string(json_text.size()) + " " + wrong_crc + " " + json_text + "\n",       // checksum
      std::to_string(json_text.size() + 1) + " " + crc + " " + json_text + "\n",         // length
      std::to_string(json_text.size()) + " " + crc + "  " + json_text.substr(1) + "\n",  // framing
      "2 a3a6bf43 {}\n",                           // checksum fine (zlib.crc32), no seq/time/type
      "3 4c2f32b8 [1]\n",                          // checksum fine, not an object
      "20 d94a525a {\"seq\":1,\"time\":\"t\"}\n",  // checksum fine, no type
      "\n",                                        // empty line
  };
  for (const std::string& line : damaged) {
    write_text(line + tail);
    auto contents = read_journal(m_path);
    ASSERT_TRUE(contents);
    EXPECT_EQ(contents->records.size(), 1u) << line;
    EXPECT_EQ(contents->damage.corrupt_lines, std::vector<std::uint64_t>{1}) << line;
  }
}

TEST_F(JournalFile, FieldsMustBeAnObjectWithoutReservedNames) {
  auto journal = Journal::open(m_path);
  ASSERT_TRUE(journal);
  auto number = journal->append("tick", json::Value(3));
  ASSERT_FALSE(number);
  EXPECT_EQ(number.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(number.error().message.find("must be an object"), std::string::npos) << number.error().message;
  EXPECT_FALSE(journal->append("tick", json::Value::array()));
  EXPECT_FALSE(journal->append("tick", json::Value("text")));
  json::Value reserved;
  reserved["seq"] = 99;
  EXPECT_FALSE(journal->append("tick", reserved));
  EXPECT_FALSE(journal->append("", {}));
  EXPECT_TRUE(journal->contents().records.empty());
  EXPECT_EQ(file_text(), "");
  EXPECT_TRUE(journal->append("tick", nullptr));
}

TEST_F(JournalFile, BytesThatAreNotUtf8AreWrittenAsReplacementCharactersAndReadBack) {
  {
    auto journal = Journal::open(m_path);
    ASSERT_TRUE(journal);
    json::Value fields;
    fields["line"] = std::string("loss \xff\xfe 0.5");
    ASSERT_TRUE(journal->append("tick", fields));
  }
  auto journal = Journal::open(m_path);
  ASSERT_TRUE(journal);
  EXPECT_TRUE(journal->contents().damage.corrupt_lines.empty());
  ASSERT_EQ(journal->contents().records.size(), 1u);
  EXPECT_EQ(journal->contents().records[0].fields.get_string("line"), "loss \xEF\xBF\xBD\xEF\xBF\xBD 0.5");
}

TEST_F(JournalFile, SeqContinuesAfterReopen) {
  write_records(3);
  auto journal = Journal::open(m_path);
  ASSERT_TRUE(journal);
  EXPECT_EQ(journal->contents().records.size(), 3u);
  auto record = journal->append("tick");
  ASSERT_TRUE(record);
  EXPECT_EQ((*record)->seq, 4u);
  EXPECT_EQ(journal->contents().records.back().seq, 4u);
}

TEST_F(JournalFile, ReadingAMissingJournalIsNotFound) {
  auto contents = read_journal(m_dir / "absent.jsonl");
  ASSERT_FALSE(contents);
  EXPECT_EQ(contents.error().code, ErrorCode::not_found);
}

TEST(JournalTime, FormatsMillisecondsUtcAndParsesBack) {
  using namespace std::chrono;
  auto t = sys_days(year(2026) / November / day(30)) + hours(20) + minutes(13) + seconds(14) +
           microseconds(123456);
  auto point = time_point_cast<system_clock::duration>(t);
  EXPECT_EQ(journal_time(point), "2026-11-30T20:13:14.123Z");
  auto parsed = parse_journal_time("2026-11-30T20:13:14.123Z");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(*parsed, time_point_cast<system_clock::duration>(floor<milliseconds>(t)));
  EXPECT_EQ(journal_time(*parsed), "2026-11-30T20:13:14.123Z");
  EXPECT_EQ(journal_time(sys_days(year(1999) / January / day(2)) + hours(3)), "1999-01-02T03:00:00.000Z");
}

TEST(JournalTime, ParsesPlainRfc3339) {
  using namespace std::chrono;
  auto whole = parse_journal_time("2026-11-30T20:13:14Z");
  ASSERT_TRUE(whole);
  EXPECT_EQ(journal_time(*whole), "2026-11-30T20:13:14.000Z");
  auto offset = parse_journal_time("2026-11-30T22:13:14.5+02:00");
  ASSERT_TRUE(offset);
  EXPECT_EQ(journal_time(*offset), "2026-11-30T20:13:14.500Z");
  auto west = parse_journal_time("2026-11-30T15:43:14-04:30");
  ASSERT_TRUE(west);
  EXPECT_EQ(journal_time(*west), "2026-11-30T20:13:14.000Z");
}

TEST(JournalTime, RejectsMalformedTimes) {
  for (const char* text : {"", "2026-11-30", "2026-11-30T20:13:14", "2026-11-30T20:13:14.Z",
                           "2026-02-30T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T20:13:14Zjunk",
                           "26-11-30T20:13:14Z", "2026-11-30T20:13:14+0200"}) {
    EXPECT_FALSE(parse_journal_time(text).has_value()) << text;
  }
}

}  // namespace
}  // namespace gpuhost::job
