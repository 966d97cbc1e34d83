#include "store/transfer.h"

#include <atomic>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "platform/files.h"
#include "store/file_store.h"

namespace gpuhost::store {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A FileStore that can fail chosen parts and records how many parts were in flight at once.
class RecordingStore final : public ObjectStore {
 public:
  explicit RecordingStore(fs::path root) : m_inner(std::move(root)) {}

  std::string describe() const override { return m_inner.describe(); }
  Result<std::string> put(std::string_view key, const Payload& payload) override {
    ++puts;
    return m_inner.put(key, payload);
  }
  Result<std::string> get(std::string_view key, const ReadOptions& o, std::uint64_t max) override {
    return m_inner.get(key, o, max);
  }
  Result<std::uint64_t> get_to_file(std::string_view key, const fs::path& f, std::uint64_t off,
                                    const ReadOptions& o) override {
    {
      std::lock_guard lock(m_mutex);
      if (o.range) ranges.insert(o.range->offset);
      if (!o.if_match.empty()) if_match_seen = true;
    }
    return m_inner.get_to_file(key, f, off, o);
  }
  Result<ObjectInfo> head(std::string_view key) override { return m_inner.head(key); }
  Result<ListPage> list(std::string_view p, const std::optional<std::string>& a, int m) override {
    return m_inner.list(p, a, m);
  }
  Result<void> remove(std::string_view key) override { return m_inner.remove(key); }
  Result<std::string> create_multipart(std::string_view key) override {
    return m_inner.create_multipart(key);
  }
  Result<PartInfo> upload_part(std::string_view key, std::string_view id, int number,
                               const Payload& payload) override {
    int now = ++m_in_flight;
    int seen = max_in_flight.load();
    while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(20ms);  // long enough for the other workers to start theirs
    Result<PartInfo> result =
        make_error(ErrorCode::io_error, "injected failure of part " + std::to_string(number));
    if (!fail_parts.contains(number)) result = m_inner.upload_part(key, id, number, payload);
    {
      std::lock_guard lock(m_mutex);
      uploaded_parts.push_back(number);
    }
    --m_in_flight;
    return result;
  }
  Result<std::vector<PartInfo>> list_parts(std::string_view key, std::string_view id) override {
    return m_inner.list_parts(key, id);
  }
  Result<std::string> complete_multipart(std::string_view key, std::string_view id,
                                         std::span<const PartInfo> parts) override {
    return m_inner.complete_multipart(key, id, parts);
  }
  Result<void> abort_multipart(std::string_view key, std::string_view id) override {
    return m_inner.abort_multipart(key, id);
  }
  Result<std::vector<UploadInfo>> list_multipart_uploads(std::string_view prefix) override {
    return m_inner.list_multipart_uploads(prefix);
  }

  std::set<int> fail_parts;
  std::vector<int> uploaded_parts;
  std::set<std::uint64_t> ranges;
  bool if_match_seen = false;
  std::atomic<int> max_in_flight{0};
  std::atomic<int> puts{0};

 private:
  FileStore m_inner;
  std::mutex m_mutex;
  std::atomic<int> m_in_flight{0};
};

class TransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir =
        fs::temp_directory_path() /
        ("gpuhost-transfer-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(m_dir);
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  // A file of `size` bytes whose content depends on the position, so misplaced parts show.
  fs::path make_file(const std::string& name, std::size_t size) {
    std::string data(size, '\0');
    for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<char>((i * 131 + i / 4093) & 0xFF);
    std::ofstream(m_dir / name, std::ios::binary).write(data.data(), static_cast<std::streamsize>(size));
    m_data = data;
    return m_dir / name;
  }

  fs::path m_dir;
  std::string m_data;
};

constexpr std::uint64_t k_mib = 1ull << 20;

TEST(ChoosePartSize, ClampsToS3LimitsAndFitsTenThousandParts) {
  EXPECT_EQ(choose_part_size(100 * k_mib, 1 * k_mib), 5 * k_mib);
  EXPECT_EQ(choose_part_size(100 * k_mib, 64 * k_mib), 64 * k_mib);
  EXPECT_EQ(choose_part_size(1ull << 40, 8 * k_mib), 105 * k_mib);  // 1 TiB / 10,000, rounded up to MiB
  EXPECT_LE((1ull << 40) / choose_part_size(1ull << 40, 8 * k_mib), 10000u);
  EXPECT_EQ(choose_part_size(1, 64ull << 30), 5ull << 30);
}

TEST_F(TransferTest, SmallFilesGoInOnePut) {
  RecordingStore store(m_dir / "store");
  fs::path file = make_file("small.bin", 1000);
  auto result = upload_file(store, "small.bin", file);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_TRUE(result->upload_id.empty());
  EXPECT_EQ(store.puts, 1);
  EXPECT_EQ(store.get("small.bin", {}, 1u << 20).value_or(""), m_data);
}

TEST_F(TransferTest, LargeFilesGoInParallelParts) {
  RecordingStore store(m_dir / "store");
  fs::path file = make_file("big.bin", 5 * k_mib * 3 + 12345);
  UploadOptions options;
  options.multipart_threshold = 5 * k_mib;
  options.part_size = 5 * k_mib;
  options.concurrency = 3;
  std::string started;
  std::vector<int> done;
  options.on_started = [&](const std::string& id) { started = id; };
  options.on_part_done = [&](const PartInfo& p) { done.push_back(p.number); };
  auto result = upload_file(store, "ckpt/big.bin", file, options);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(result->parts, 4);
  EXPECT_EQ(result->upload_id, started);
  EXPECT_EQ(done.size(), 4u);
  EXPECT_GE(store.max_in_flight.load(), 2);
  EXPECT_LE(store.max_in_flight.load(), 3);
  EXPECT_EQ(store.get("ckpt/big.bin", {}, 64 * k_mib).value_or(""), m_data);
  EXPECT_TRUE(store.list_multipart_uploads("")->empty());
}

TEST_F(TransferTest, AFailedUploadResumesWithTheFinishedParts) {
  RecordingStore store(m_dir / "store");
  fs::path file = make_file("big.bin", 5 * k_mib * 4);
  UploadOptions options;
  options.multipart_threshold = 5 * k_mib;
  options.part_size = 5 * k_mib;
  options.concurrency = 1;  // parts in order: 1 and 2 land, 3 fails, 4 is never tried
  store.fail_parts = {3};
  std::vector<PartInfo> journal;
  std::string upload_id;
  options.on_started = [&](const std::string& id) { upload_id = id; };
  options.on_part_done = [&](const PartInfo& p) { journal.push_back(p); };
  auto failed = upload_file(store, "k", file, options);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message.find("can be resumed"), std::string::npos) << failed.error().message;
  EXPECT_NE(failed.error().message.find("injected failure of part 3"), std::string::npos);
  ASSERT_EQ(journal.size(), 2u);

  store.fail_parts.clear();
  store.uploaded_parts.clear();
  options.resume_upload_id = upload_id;
  options.known_parts = journal;
  auto resumed = upload_file(store, "k", file, options);
  ASSERT_TRUE(resumed) << resumed.error().message;
  EXPECT_EQ(resumed->parts_reused, 2);
  EXPECT_EQ(store.uploaded_parts, (std::vector<int>{3, 4}));
  EXPECT_EQ(store.get("k", {}, 64 * k_mib).value_or(""), m_data);
}

TEST_F(TransferTest, ResumeDoesNotTrustAPartWhoseEtagDiffersFromTheJournal) {
  RecordingStore store(m_dir / "store");
  fs::path file = make_file("big.bin", 5 * k_mib * 2);
  std::string id = store.create_multipart("k").value_or("");
  ASSERT_TRUE(store.upload_part("k", id, 1, Payload::from_file(file, 0, 5 * k_mib)));
  store.uploaded_parts.clear();
  UploadOptions options;
  options.part_size = 5 * k_mib;
  options.resume_upload_id = id;
  options.known_parts = {{1, "not-the-server-etag", 5 * k_mib, ""}};
  auto resumed = upload_file(store, "k", file, options);
  ASSERT_TRUE(resumed) << resumed.error().message;
  EXPECT_EQ(resumed->parts_reused, 0);
  EXPECT_EQ(store.uploaded_parts.size(), 2u);
}

TEST_F(TransferTest, DownloadsWithParallelRangesPinnedToTheEtag) {
  RecordingStore store(m_dir / "store");
  fs::path file = make_file("src.bin", 3 * k_mib + 7);
  ASSERT_TRUE(store.put("obj", Payload::from_file(file, 0, m_data.size())));
  DownloadOptions options;
  options.range_size = k_mib;
  options.concurrency = 3;
  fs::path out = m_dir / "out.bin";
  auto size = download_file(store, "obj", out, options);
  ASSERT_TRUE(size) << size.error().message;
  EXPECT_EQ(*size, m_data.size());
  EXPECT_EQ(platform::read_file(out).value_or(""), m_data);
  EXPECT_EQ(store.ranges.size(), 4u);
  EXPECT_TRUE(store.if_match_seen);
  EXPECT_FALSE(fs::exists(m_dir / "out.bin.partial"));
}

TEST_F(TransferTest, AbortsOnlyStaleUploads) {
  RecordingStore store(m_dir / "store");
  ASSERT_TRUE(store.create_multipart("a"));
  ASSERT_TRUE(store.create_multipart("b"));
  auto now = std::chrono::system_clock::now();
  EXPECT_EQ(abort_stale_uploads(store, "", std::chrono::hours(1), now).value_or(-1), 0);
  EXPECT_EQ(store.list_multipart_uploads("")->size(), 2u);
  EXPECT_EQ(abort_stale_uploads(store, "a", std::chrono::hours(1), now + std::chrono::hours(2)).value_or(-1),
            1);
  auto left = store.list_multipart_uploads("");
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].key, "b");
}

}  // namespace
}  // namespace gpuhost::store
