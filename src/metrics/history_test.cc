#include "metrics/history.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <thread>

#include <gtest/gtest.h>

#include "base/checksum.h"
#include "metrics/test_points.h"
#include "platform/process.h"

namespace gpuhost::metrics {
namespace {

using testing::k_inf;
using testing::k_nan;

Point point(std::string name, double value, std::optional<std::int64_t> step, double time) {
  return Point{std::move(name), value, step, time};
}

class History : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    m_dir = std::filesystem::temp_directory_path() /
            ("gpuhost-history-test-" + std::to_string(platform::current_process_id()) + "-" +
             std::to_string(counter++));
    std::filesystem::remove_all(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  std::unique_ptr<MetricHistory> open(bool writable, HistoryOptions options = {}) {
    auto history = MetricHistory::open(m_dir, writable, options);
    EXPECT_TRUE(history) << history.error().message;
    return history ? std::move(*history) : nullptr;
  }
  std::string contents(const std::string& name) const {
    std::ifstream in(m_dir / name, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void write(const std::string& name, std::string_view bytes,
             std::ios::openmode mode = std::ios::trunc) const {
    std::ofstream out(m_dir / name, std::ios::binary | std::ios::out | mode);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  std::filesystem::path m_dir;
};

TEST_F(History, RoundTripsPointsIncludingNanInfAndMissingSteps) {
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    EXPECT_TRUE(writer->append(point("loss", 2.5, 10, 1000.0), "stdout"));
    EXPECT_TRUE(writer->append(point("lr", 1e-4, std::nullopt, 1000.5), "stdout"));
    EXPECT_TRUE(writer->append(point("loss", k_nan, 20, 1001.0), "stdout"));
    EXPECT_TRUE(writer->append(point("loss", -k_inf, 30, 1002.0), "stdout"));
  }  // the destructor flushes
  auto reader = open(false);
  ASSERT_TRUE(reader);
  auto loss = reader->read("loss");
  ASSERT_TRUE(loss);
  ASSERT_EQ(loss->value.size(), 3u);
  EXPECT_EQ(loss->time, (std::vector<double>{1000.0, 1001.0, 1002.0}));
  EXPECT_EQ(loss->step, (std::vector<double>{10, 20, 30}));
  EXPECT_EQ(loss->value[0], 2.5);
  EXPECT_TRUE(std::isnan(loss->value[1]));
  EXPECT_EQ(loss->value[2], -k_inf);
  auto lr = reader->read("lr");
  ASSERT_TRUE(lr);
  ASSERT_EQ(lr->step.size(), 1u);
  EXPECT_TRUE(std::isnan(lr->step[0]));
  EXPECT_FALSE(reader->read("accuracy"));

  auto series = reader->series();
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0].id, 0u);
  EXPECT_EQ(series[0].name, "loss");
  EXPECT_EQ(series[0].source, "stdout");
  EXPECT_EQ(series[0].points, 3u);
  EXPECT_EQ(series[0].last_value, -k_inf);
  EXPECT_EQ(series[0].last_time, 1002.0);
  EXPECT_EQ(series[0].last_step, 30);
  EXPECT_EQ(series[1].name, "lr");
  EXPECT_FALSE(series[1].last_step);
  EXPECT_EQ(reader->stats().points, 4u);
  EXPECT_EQ(reader->stats().corrupt_records_skipped, 0u);
  EXPECT_EQ(reader->version(), 4u);
}

TEST_F(History, WritesTheDocumentedFormat) {
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    writer->append(point("loss", 0.5, 7, 1700000000.25), "jsonl");
  }
  EXPECT_EQ(contents("series.jsonl"), "{\"id\":0,\"name\":\"loss\",\"source\":\"jsonl\"}\n");
  std::string bin = contents("points.bin");
  ASSERT_EQ(bin.size(), 32u);
  std::uint32_t id, crc;
  double time, step, value;
  std::memcpy(&id, bin.data(), 4);
  std::memcpy(&crc, bin.data() + 4, 4);
  std::memcpy(&time, bin.data() + 8, 8);
  std::memcpy(&step, bin.data() + 16, 8);
  std::memcpy(&value, bin.data() + 24, 8);
  EXPECT_EQ(id, 0u);
  EXPECT_EQ(crc, crc32(bin.substr(0, 4) + bin.substr(8)));
  EXPECT_EQ(time, 1700000000.25);
  EXPECT_EQ(step, 7.0);
  EXPECT_EQ(value, 0.5);
}

TEST_F(History, GivesPointsWithoutATimeTheCurrentTime) {
  auto writer = open(true);
  ASSERT_TRUE(writer);
  writer->append(point("loss", 1, 1, 0), "stdout");
  auto loss = writer->read("loss");
  ASSERT_TRUE(loss);
  EXPECT_GT(loss->time[0], 1.6e9);  // after 2020: the clock, not 0
}

TEST_F(History, ContinuesAfterTheWriterReopens) {
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    writer->append(point("loss", 3, 1, 100), "stdout");
    writer->append(point("acc", 0.1, 1, 100), "stdout");
  }
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    EXPECT_EQ(writer->stats().points, 2u);
    EXPECT_TRUE(writer->append(point("loss", 2, 2, 101), "stdout"));
    EXPECT_TRUE(writer->append(point("grad_norm", 9, 2, 101), "stdout"));
    EXPECT_FALSE(writer->append(point("acc", 0.2, 2, 101), "tfevents"));  // still stdout's
  }
  auto reader = open(false);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->read("loss")->value, (std::vector<double>{3, 2}));
  EXPECT_EQ(reader->read("acc")->value, (std::vector<double>{0.1}));
  auto series = reader->series();
  ASSERT_EQ(series.size(), 3u);
  EXPECT_EQ(series[2].name, "grad_norm");
  EXPECT_EQ(series[2].id, 2u);  // a new id, not one of the earlier series'
  EXPECT_EQ(reader->stats().corrupt_records_skipped, 0u);
}

TEST_F(History, CutsATornTailWhenAWriterOpens) {
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    for (int i = 0; i < 3; ++i) writer->append(point("loss", i, i, 100 + i), "stdout");
  }
  // A writer killed in the middle of a record and of a series line.
  write("points.bin", std::string(13, '\x7f'), std::ios::app);
  write("series.jsonl", "{\"id\":1,\"na", std::ios::app);
  {
    auto reader = open(false);
    ASSERT_TRUE(reader);
    EXPECT_EQ(reader->read("loss")->value.size(), 3u);
    EXPECT_EQ(reader->stats().torn_tail_bytes, 13u);  // pending, not cut: a reader changes nothing
    EXPECT_EQ(contents("points.bin").size(), 3u * 32 + 13);
  }
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    EXPECT_EQ(writer->stats().torn_tail_bytes, 13u + 11u);
    EXPECT_EQ(contents("points.bin").size(), 3u * 32);
    writer->append(point("loss", 3, 3, 103), "stdout");
    writer->append(point("lr", 0.1, 3, 103), "stdout");
  }
  auto reader = open(false);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->read("loss")->value, (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(reader->read("lr")->value, (std::vector<double>{0.1}));
  EXPECT_EQ(reader->stats().corrupt_records_skipped, 0u);
  EXPECT_EQ(reader->stats().torn_tail_bytes, 0u);
}

TEST_F(History, SkipsAndCountsACorruptRecordInTheMiddle) {
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    for (int i = 0; i < 4; ++i) writer->append(point("loss", i, i, 100 + i), "stdout");
  }
  std::string bin = contents("points.bin");
  bin[2 * 32 + 27] ^= 0x10;  // a bit of the third record's value
  write("points.bin", bin);
  auto reader = open(false);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->read("loss")->value, (std::vector<double>{0, 1, 3}));
  EXPECT_EQ(reader->stats().corrupt_records_skipped, 1u);
  auto writer = open(true);  // a writer skips it too, and keeps it: appends go after it
  ASSERT_TRUE(writer);
  EXPECT_EQ(writer->stats().corrupt_records_skipped, 1u);
  writer->append(point("loss", 4, 4, 104), "stdout");
  EXPECT_EQ(writer->read("loss")->value, (std::vector<double>{0, 1, 3, 4}));
}

TEST_F(History, SkipsUnreadableSeriesLinesAndTheirPoints) {
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    writer->append(point("loss", 1, 1, 100), "stdout");
    writer->append(point("acc", 2, 1, 100), "stdout");
  }
  std::string lines = contents("series.jsonl");
  lines.replace(lines.find("\"acc\""), 5, "\"ac\x01");  // no longer JSON
  write("series.jsonl", lines);
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    EXPECT_EQ(writer->stats().corrupt_records_skipped, 2u);  // the line and acc's point
    writer->append(point("lr", 3, 1, 100), "stdout");
  }
  auto reader = open(false);
  ASSERT_TRUE(reader);
  auto series = reader->series();
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[1].name, "lr");
  EXPECT_EQ(series[1].id, 2u);  // not 1: acc's orphaned point must not become lr's
  EXPECT_EQ(reader->read("lr")->value, (std::vector<double>{3}));
}

TEST_F(History, AReaderSeesTheWritersAppendsThroughRefresh) {
  auto reader = open(false);  // before the writer created anything
  ASSERT_TRUE(reader);
  EXPECT_FALSE(std::filesystem::exists(m_dir));  // a reader creates nothing
  EXPECT_EQ(reader->refresh(), 0u);

  auto writer = open(true);
  ASSERT_TRUE(writer);
  writer->append(point("loss", 5, 1, 100), "stdout");
  EXPECT_EQ(reader->refresh(), 0u);  // buffered, not written yet
  writer->flush();
  EXPECT_EQ(reader->refresh(), 1u);
  EXPECT_EQ(reader->version(), 1u);
  EXPECT_EQ(reader->refresh(), 0u);

  writer->append(point("loss", 4, 2, 101), "stdout");
  writer->append(point("lr", 0.1, 2, 101), "stdout");
  writer->flush();
  EXPECT_EQ(reader->refresh(), 2u);
  EXPECT_EQ(reader->read("loss")->value, (std::vector<double>{5, 4}));
  EXPECT_EQ(reader->read("lr")->value, (std::vector<double>{0.1}));
  EXPECT_EQ(reader->version(), 3u);
  EXPECT_FALSE(reader->append(point("loss", 1, 3, 102), "stdout"));  // read-only
}

TEST_F(History, AReaderLeavesAPartialRecordForTheNextRefresh) {
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    for (int i = 0; i < 3; ++i) writer->append(point("loss", i, i, 100 + i), "stdout");
  }
  std::string bin = contents("points.bin");
  write("points.bin", bin.substr(0, 32 + 10));  // the writer is in the middle of record 2
  auto reader = open(false);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->read("loss")->value, (std::vector<double>{0}));
  EXPECT_EQ(reader->stats().torn_tail_bytes, 10u);
  write("points.bin", bin.substr(32 + 10), std::ios::app);
  EXPECT_EQ(reader->refresh(), 2u);
  EXPECT_EQ(reader->read("loss")->value, (std::vector<double>{0, 1, 2}));
  EXPECT_EQ(reader->stats().corrupt_records_skipped, 0u);
  EXPECT_EQ(reader->stats().torn_tail_bytes, 0u);
}

TEST_F(History, AReaderWaitsOneRefreshBeforeCountingABadLastRecord) {
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    for (int i = 0; i < 3; ++i) writer->append(point("loss", i, i, 100 + i), "stdout");
  }
  std::string bin = contents("points.bin");
  // Some file systems show a growing file's new size before its bytes: zeros, for now.
  write("points.bin", bin.substr(0, 64) + std::string(32, '\0'));
  auto reader = open(false);
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->read("loss")->value.size(), 2u);
  EXPECT_EQ(reader->stats().corrupt_records_skipped, 0u);
  write("points.bin", bin);  // the bytes arrived
  EXPECT_EQ(reader->refresh(), 1u);
  EXPECT_EQ(reader->stats().corrupt_records_skipped, 0u);

  write("points.bin", bin + std::string(32, '\0'));  // and this one stays bad
  EXPECT_EQ(reader->refresh(), 0u);
  EXPECT_EQ(reader->stats().corrupt_records_skipped, 0u);
  EXPECT_EQ(reader->refresh(), 0u);
  EXPECT_EQ(reader->stats().corrupt_records_skipped, 1u);
}

TEST_F(History, AReaderStartsOverWhenTheFilesAreReplaced) {
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    for (int i = 0; i < 3; ++i) writer->append(point("loss", i, i, 100 + i), "stdout");
  }
  auto reader = open(false);
  ASSERT_TRUE(reader);
  std::filesystem::remove_all(m_dir);
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    writer->append(point("acc", 7, 1, 200), "stdout");
  }
  reader->refresh();
  EXPECT_FALSE(reader->read("loss"));
  EXPECT_EQ(reader->read("acc")->value, (std::vector<double>{7}));
}

TEST_F(History, FlushesByItselfWhenTheBufferPasses64KiB) {
  auto writer = open(true);
  ASSERT_TRUE(writer);
  auto reader = open(false);
  ASSERT_TRUE(reader);
  // 3000 records are 96,000 bytes: at least one automatic flush of 64 KiB (2048 records).
  for (int i = 0; i < 3000; ++i) writer->append(point("loss", i, i, 1000 + i), "stdout");
  EXPECT_GE(reader->refresh(), 2048u);
}

TEST_F(History, CapsTheNumberOfSeriesAndTheNameLength) {
  HistoryOptions options;
  options.max_series = 2;
  options.max_name_bytes = 8;
  auto writer = open(true, options);
  ASSERT_TRUE(writer);
  EXPECT_TRUE(writer->append(point("loss", 1, 1, 100), "stdout"));
  EXPECT_FALSE(writer->append(point("a_very_long_name", 1, 1, 100), "stdout"));
  EXPECT_FALSE(writer->append(point("", 1, 1, 100), "stdout"));
  EXPECT_FALSE(writer->append(point("bad\xff", 1, 1, 100), "stdout"));  // not UTF-8
  EXPECT_TRUE(writer->append(point("lr", 1, 1, 100), "stdout"));
  EXPECT_FALSE(writer->append(point("step_1", 1, 1, 100), "stdout"));
  EXPECT_FALSE(writer->append(point("step_2", 1, 1, 100), "stdout"));
  EXPECT_TRUE(writer->append(point("loss", 2, 2, 101), "stdout"));  // known names still count
  EXPECT_EQ(writer->series().size(), 2u);
  EXPECT_EQ(writer->stats().dropped_over_cardinality, 5u);
  EXPECT_EQ(writer->stats().points, 3u);
}

TEST_F(History, ANameBelongsToTheFirstSourceThatReportedIt) {
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    EXPECT_TRUE(writer->append(point("loss", 1, 1, 100), "tfevents"));
    EXPECT_FALSE(writer->append(point("loss", 1, 1, 100), "stdout"));
    EXPECT_TRUE(writer->append(point("loss", 0.9, 2, 101), "tfevents"));
    EXPECT_EQ(writer->stats().dropped_other_source, 1u);
  }
  auto writer = open(true);  // ownership is on disk
  ASSERT_TRUE(writer);
  EXPECT_FALSE(writer->append(point("loss", 0.8, 3, 102), "stdout"));
  EXPECT_EQ(writer->read("loss")->value, (std::vector<double>{1, 0.9}));
  EXPECT_EQ(writer->series()[0].source, "tfevents");
}

// Hugging Face prints `{'loss': 0.5, 'epoch': 0.1}` (no step) before trainer_state.json logs
// the same loss by step: the stepped source takes the name over, on disk too.
TEST_F(History, ASourceWithStepsTakesOverANameThatHadNone) {
  {
    auto writer = open(true);
    ASSERT_TRUE(writer);
    EXPECT_TRUE(writer->append(point("loss", 0.7, std::nullopt, 100), "stdout"));
    EXPECT_FALSE(writer->append(point("loss", 0.7, std::nullopt, 100), "trainer_state"));  // no step: no claim
    EXPECT_TRUE(writer->append(point("loss", 0.6, 10, 101), "trainer_state"));
    EXPECT_FALSE(writer->append(point("loss", 0.5, std::nullopt, 102), "stdout"));  // stdout's no more
    EXPECT_EQ(writer->stats().source_handovers, 1u);
    EXPECT_EQ(writer->series()[0].source, "trainer_state");
  }
  auto reader = open(false);
  ASSERT_TRUE(reader);
  ASSERT_EQ(reader->series().size(), 1u);
  EXPECT_EQ(reader->series()[0].source, "trainer_state");
  EXPECT_EQ(reader->read("loss")->value, (std::vector<double>{0.7, 0.6}));
  EXPECT_EQ(reader->stats().corrupt_records_skipped, 0u);
  auto writer = open(true);  // a stepped owner keeps the name
  ASSERT_TRUE(writer);
  EXPECT_FALSE(writer->append(point("loss", 0.4, 20, 103), "stdout"));
}

TEST_F(History, ReadSinceReturnsThePointsAfterATime) {
  auto writer = open(true);
  ASSERT_TRUE(writer);
  for (int i = 0; i < 2000; ++i) writer->append(point("loss", i, i, 1000 + i), "stdout");
  auto since = writer->read_since("loss", 2997.0);  // times 1000 ... 2999
  ASSERT_TRUE(since);
  EXPECT_EQ(since->time, (std::vector<double>{2998, 2999}));
  EXPECT_EQ(since->value, (std::vector<double>{1998, 1999}));
  EXPECT_EQ(writer->read_since("loss", 1511.5)->value.front(), 512);  // across a chunk boundary
  EXPECT_EQ(writer->read_since("loss", 0)->value.size(), 2000u);
  EXPECT_TRUE(writer->read_since("loss", 5000)->value.empty());

  // Times out of order (a source with its own clock): every later time is still found.
  writer->append(point("acc", 1, 1, 50), "stdout");
  writer->append(point("acc", 2, 2, 30), "stdout");
  writer->append(point("acc", 3, 3, 60), "stdout");
  EXPECT_EQ(writer->read_since("acc", 40)->value, (std::vector<double>{1, 3}));
}

TEST_F(History, ServesReadsWhileOtherThreadsAppend) {
  auto writer = open(true);
  ASSERT_TRUE(writer);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i)
        writer->append(point("series" + std::to_string(t), i, i, 1000 + i), "stdout");
    });
  std::size_t seen = 0;
  for (int i = 0; i < 200; ++i)
    if (auto data = writer->read("series0")) seen = std::max(seen, data->value.size());
  for (auto& thread : threads) thread.join();
  writer->flush();
  EXPECT_EQ(writer->stats().points, 8000u);
  auto reader = open(false);
  ASSERT_TRUE(reader);
  for (int t = 0; t < 4; ++t) EXPECT_EQ(reader->read("series" + std::to_string(t))->value.size(), 2000u);
  EXPECT_LE(seen, 2000u);
}

TEST_F(History, OpeningFailsWhenTheFolderCannotBeCreated) {
  std::ofstream(m_dir) << "not a folder";
  auto history = MetricHistory::open(m_dir / "metrics", true);
  ASSERT_FALSE(history);
  EXPECT_NE(history.error().message.find("creating the metrics folder"), std::string::npos);
}

TEST_F(History, CountsWriteFailuresAndKeepsThePointsInMemory) {
  // A full disk, where the OS offers one: /dev/full fails every write with ENOSPC.
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this OS";
  std::filesystem::create_directories(m_dir);
  std::filesystem::create_symlink("/dev/full", m_dir / "points.bin");
  auto writer = open(true);
  ASSERT_TRUE(writer);
  EXPECT_TRUE(writer->append(point("loss", 1, 1, 100), "stdout"));
  EXPECT_TRUE(writer->append(point("loss", 2, 2, 101), "stdout"));
  writer->flush();
  EXPECT_EQ(writer->stats().write_failures, 2u);
  EXPECT_EQ(writer->read("loss")->value, (std::vector<double>{1, 2}));
  EXPECT_TRUE(writer->append(point("loss", 3, 3, 102), "stdout"));
  writer->flush();
  EXPECT_EQ(writer->stats().write_failures, 3u);
  // The series line did reach series.jsonl; the records never did.
  EXPECT_EQ(contents("series.jsonl"), "{\"id\":0,\"name\":\"loss\",\"source\":\"stdout\"}\n");
}

TEST_F(History, RetriesASeriesLineThatCouldNotBeWritten) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this OS";
  std::filesystem::create_directories(m_dir);
  std::filesystem::create_symlink("/dev/full", m_dir / "series.jsonl");
  auto writer = open(true);
  ASSERT_TRUE(writer);
  writer->append(point("loss", 1, 1, 100), "stdout");
  writer->flush();
  EXPECT_EQ(writer->stats().write_failures, 1u);
  EXPECT_EQ(contents("points.bin"), "");  // no record before its series' line
}

}  // namespace
}  // namespace gpuhost::metrics
