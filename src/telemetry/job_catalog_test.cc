#include "telemetry/job_catalog.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "base/checksum.h"
#include "base/json.h"
#include "job/job_paths.h"
#include "job/journal.h"
#include "platform/files.h"
#include "platform/process.h"

namespace gpuhost::telemetry {
namespace {

// A line as doc/journal.md frames it: "<length> <crc32> <json>\n".
std::string framed(std::uint64_t seq, std::string_view type, std::string_view more_json = "") {
  std::string json = "{\"seq\":" + std::to_string(seq) +
                     ",\"time\":\"2026-11-30T20:13:14.123Z\",\"type\":\"" + std::string(type) + "\"";
  if (!more_json.empty()) json += "," + std::string(more_json);
  json += "}";
  char crc[9];
  std::snprintf(crc, sizeof crc, "%08x", static_cast<unsigned>(crc32(json)));
  return std::to_string(json.size()) + " " + crc + " " + json + "\n";
}

std::string checkpoint_json(int step) {
  return "\"path\":\"/ck/step-" + std::to_string(step) +
         ".pt\",\"format\":\"torch_zip\",\"size_bytes\":100,\"step\":" + std::to_string(step);
}

class JobCatalogJournal : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    m_root = std::filesystem::temp_directory_path() /
             ("gpuhost-job-catalog-test-" + std::to_string(platform::current_process_id()) + "-" +
              std::to_string(counter++));
    std::filesystem::remove_all(m_root);
    m_paths = job::job_paths(m_root, "train1");
    std::filesystem::create_directories(m_paths.dir);
    m_catalog = std::make_unique<JobCatalog>(JobCatalogOptions{m_root, {}, std::chrono::milliseconds(0)});
  }
  void TearDown() override {
    m_catalog.reset();
    std::filesystem::remove_all(m_root);
  }

  // Appends raw bytes to the journal, as a writer (or a crash) leaves them.
  void append_bytes(const std::filesystem::path& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good());
  }
  // job_created, supervisor_started, then a checkpoint for each step.
  std::string journal_text(std::string_view name, std::vector<int> steps) {
    std::string text = framed(1, "job_created", "\"name\":\"" + std::string(name) + "\"");
    text += framed(2, "supervisor_started", "\"pid\":10,\"cloud\":\"none\"");
    std::uint64_t seq = 3;
    for (int step : steps) text += framed(seq++, "checkpoint_committed", checkpoint_json(step));
    return text;
  }
  std::shared_ptr<const JobJournalView> view() {
    m_catalog->refresh();
    auto job = m_catalog->job("train1");
    EXPECT_TRUE(job);
    return job ? job->journal : std::make_shared<JobJournalView>();
  }

  std::filesystem::path m_root;
  job::JobPaths m_paths;
  std::unique_ptr<JobCatalog> m_catalog;
};

TEST_F(JobCatalogJournal, ReadsOnlyWhatWasAppended) {
  append_bytes(m_paths.journal(), journal_text("train1", {100, 200}));
  auto first = view();
  ASSERT_EQ(first->records, 4u);
  ASSERT_EQ(first->state.checkpoints.size(), 2u);

  // Spoil the first record on disk (same length), then append: a reader that went back to the
  // start would now skip the first record as corrupt.
  {
    std::fstream file(m_paths.journal(), std::ios::binary | std::ios::in | std::ios::out);
    file.seekp(30);
    file.put('#');
    ASSERT_TRUE(file.good());
  }
  append_bytes(m_paths.journal(), framed(5, "checkpoint_committed", checkpoint_json(300)));
  auto second = view();
  EXPECT_EQ(second->records, 5u);
  EXPECT_EQ(second->corrupt_records, 0u);
  ASSERT_EQ(second->state.checkpoints.size(), 3u);
  EXPECT_EQ(second->state.checkpoints[2].step, 300);
  EXPECT_EQ(second->state.events.front().summary, "job train1 created");  // the folded start kept
  ASSERT_EQ(second->checkpoint_times.size(), 3u);

  // The file really is spoilt: a catalog reading it afresh skips that record.
  JobCatalog fresh(JobCatalogOptions{m_root, {}, std::chrono::milliseconds(0)});
  fresh.refresh();
  EXPECT_EQ(fresh.job("train1")->journal->corrupt_records, 1u);
  EXPECT_EQ(fresh.job("train1")->journal->records, 4u);
}

TEST_F(JobCatalogJournal, ATornLastRecordIsReadOnceWhole) {
  append_bytes(m_paths.journal(), journal_text("train1", {100}));
  ASSERT_EQ(view()->records, 3u);
  const std::string next = framed(4, "checkpoint_committed", checkpoint_json(200));
  append_bytes(m_paths.journal(), next.substr(0, next.size() / 2));  // the writer is mid-append
  auto torn = view();
  EXPECT_EQ(torn->records, 3u);
  EXPECT_EQ(torn->corrupt_records, 0u);
  append_bytes(m_paths.journal(), next.substr(next.size() / 2));
  auto whole = view();
  EXPECT_EQ(whole->records, 4u);
  EXPECT_EQ(whole->corrupt_records, 0u);
  ASSERT_EQ(whole->state.checkpoints.size(), 2u);
  EXPECT_EQ(whole->state.checkpoints[1].step, 200);
}

TEST_F(JobCatalogJournal, CountsACorruptRecordInWhatWasAppended) {
  append_bytes(m_paths.journal(), journal_text("train1", {100}));
  ASSERT_EQ(view()->records, 3u);
  std::string spoilt = framed(4, "checkpoint_committed", checkpoint_json(200));
  spoilt[spoilt.size() - 3] = '#';
  append_bytes(m_paths.journal(), spoilt + framed(5, "checkpoint_committed", checkpoint_json(300)));
  auto after = view();
  EXPECT_EQ(after->records, 4u);
  EXPECT_EQ(after->corrupt_records, 1u);
  ASSERT_EQ(after->state.checkpoints.size(), 2u);
  EXPECT_EQ(after->state.checkpoints[1].step, 300);
}

TEST_F(JobCatalogJournal, RereadsAJournalThatShrankWhole) {
  append_bytes(m_paths.journal(), journal_text("train1", {100, 200, 300}));
  ASSERT_EQ(view()->records, 5u);
  std::filesystem::remove(m_paths.journal());
  append_bytes(m_paths.journal(), journal_text("again", {}));
  auto after = view();
  EXPECT_EQ(after->records, 2u);
  EXPECT_TRUE(after->state.checkpoints.empty());
  EXPECT_EQ(after->state.events.front().summary, "job again created");
}

TEST_F(JobCatalogJournal, RereadsAJournalReplacedByALongerOneWhole) {
  append_bytes(m_paths.journal(), journal_text("train1", {100}));
  ASSERT_EQ(view()->records, 3u);
  // Another journal, longer than the first, renamed into its place.
  ASSERT_TRUE(platform::write_file_atomic(m_paths.journal(), journal_text("other", {7, 8, 9, 10})));
  auto after = view();
  EXPECT_EQ(after->records, 6u);
  EXPECT_EQ(after->corrupt_records, 0u);
  EXPECT_EQ(after->state.events.front().summary, "job other created");
  ASSERT_EQ(after->state.checkpoints.size(), 4u);
  EXPECT_EQ(after->state.checkpoints[0].step, 7);
}

TEST(ReadJournalFrom, NumbersCorruptLinesFromTheStartOfTheFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("gpuhost-journal-from-" + std::to_string(platform::current_process_id()) + ".jsonl");
  std::filesystem::remove(path);
  {
    std::ofstream out(path, std::ios::binary);
    out << framed(1, "job_created") << framed(2, "notice");
  }
  auto first = job::read_journal_from(path, {});
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_FALSE(first->restarted);
  EXPECT_EQ(first->contents.records.size(), 2u);
  EXPECT_EQ(first->next.lines, 2u);
  EXPECT_EQ(first->next.offset, std::filesystem::file_size(path));
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out << "garbage\n" << framed(3, "notice") << "12 half";
  }
  auto second = job::read_journal_from(path, first->next);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_FALSE(second->restarted);
  ASSERT_EQ(second->contents.records.size(), 1u);
  EXPECT_EQ(second->contents.records[0].seq, 3u);
  EXPECT_EQ(second->contents.damage.corrupt_lines, std::vector<std::uint64_t>{3});
  EXPECT_EQ(second->next.lines, 4u);
  EXPECT_EQ(second->next.offset, std::filesystem::file_size(path) - 7);  // "12 half" waits
  auto missing = job::read_journal_from(path.string() + ".absent", {});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::not_found);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gpuhost::telemetry
