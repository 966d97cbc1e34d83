#include "store/file_store.h"

#include <fstream>

#include <gtest/gtest.h>

#include "platform/files.h"

namespace gpuhost::store {
namespace {

namespace fs = std::filesystem;

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_root =
        fs::temp_directory_path() /
        ("gpuhost-filestore-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(m_root);
  }
  void TearDown() override { fs::remove_all(m_root); }

  fs::path m_root;
};

TEST_F(FileStoreTest, PutGetHeadListRemove) {
  FileStore store(m_root);
  ASSERT_TRUE(store.put("run/step-1/model.pt", Payload::from_memory("weights")));
  ASSERT_TRUE(store.put("run/step-2/model.pt", Payload::from_memory("newer weights")));
  ASSERT_TRUE(store.put("other", Payload::from_memory("x")));
  EXPECT_EQ(platform::read_file(m_root / "run" / "step-1" / "model.pt").value_or(""), "weights");

  EXPECT_EQ(store.get("run/step-2/model.pt", {}, 100).value_or(""), "newer weights");
  ReadOptions range;
  range.range = ByteRange{6, 100};  // clamped to the end, as S3 does
  EXPECT_EQ(store.get("run/step-2/model.pt", range, 100).value_or(""), "weights");

  auto info = store.head("run/step-1/model.pt");
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->size, 7u);
  EXPECT_FALSE(info->etag.empty());

  auto page = store.list("run/", std::nullopt, 1);
  ASSERT_TRUE(page) << page.error().message;
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "run/step-1/model.pt");
  ASSERT_TRUE(page->next);
  page = store.list("run/", page->next, 1);
  ASSERT_TRUE(page);
  ASSERT_EQ(page->objects.size(), 1u);
  EXPECT_EQ(page->objects[0].key, "run/step-2/model.pt");
  EXPECT_FALSE(page->next);

  ASSERT_TRUE(store.remove("run/step-1/model.pt"));
  EXPECT_FALSE(fs::exists(m_root / "run" / "step-1"));  // its empty directory went too
  EXPECT_EQ(store.head("run/step-1/model.pt").error().code, ErrorCode::not_found);
  EXPECT_TRUE(store.remove("run/step-1/model.pt"));  // deleting a missing object succeeds
}

TEST_F(FileStoreTest, PutsAFileRangeAndCopiesToAFileAtAnOffset) {
  fs::create_directories(m_root);
  fs::path source = m_root / "source.bin";
  std::ofstream(source, std::ios::binary) << "0123456789";
  FileStore store(m_root / "store");
  ASSERT_TRUE(store.put("k", Payload::from_file(source, 2, 5)));
  EXPECT_EQ(store.get("k", {}, 100).value_or(""), "23456");

  fs::path target = m_root / "target.bin";
  std::ofstream(target, std::ios::binary) << "..........";
  ReadOptions range;
  range.range = ByteRange{1, 2};
  ASSERT_EQ(store.get_to_file("k", target, 7, range).value_or(0), 2u);
  EXPECT_EQ(platform::read_file(target).value_or(""), ".......34.");
  ASSERT_EQ(store.get_to_file("k", target, 3, {}).value_or(0), 5u);  // whole object: the tail goes
  EXPECT_EQ(platform::read_file(target).value_or(""), "...23456");
}

TEST_F(FileStoreTest, IfMatchRefusesAChangedObject) {
  FileStore store(m_root);
  std::string etag = store.put("k", Payload::from_memory("v1")).value_or("");
  ReadOptions read;
  read.if_match = etag;
  EXPECT_TRUE(store.get("k", read, 100));
  ASSERT_TRUE(store.put("k", Payload::from_memory("version two")));
  EXPECT_FALSE(store.get("k", read, 100));
}

TEST_F(FileStoreTest, RefusesKeysThatEscapeTheRoot) {
  FileStore store(m_root);
  for (const char* key :
       {"", "/abs", "../up", "a/../b", "a//b", "a\\b", "C:x", ".gpuhost-uploads/x", "a/.b.tmp-1"}) {
    auto put = store.put(key, Payload::from_memory("x"));
    EXPECT_FALSE(put) << key;
    if (!put) {
      EXPECT_EQ(put.error().code, ErrorCode::invalid_argument) << key;
    }
  }
}

TEST_F(FileStoreTest, MultipartUploadAssemblesPartsInOrder) {
  FileStore store(m_root);
  auto id = store.create_multipart("ckpt/model.pt");
  ASSERT_TRUE(id) << id.error().message;
  auto uploads = store.list_multipart_uploads("ckpt/");
  ASSERT_TRUE(uploads);
  ASSERT_EQ(uploads->size(), 1u);
  EXPECT_EQ((*uploads)[0].upload_id, *id);
  EXPECT_FALSE((*uploads)[0].initiated.empty());

  auto p2 = store.upload_part("ckpt/model.pt", *id, 2, Payload::from_memory("world"));
  auto p1 = store.upload_part("ckpt/model.pt", *id, 1, Payload::from_memory("hello "));
  ASSERT_TRUE(p1 && p2);
  auto listed = store.list_parts("ckpt/model.pt", *id);
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].etag, p1->etag);
  EXPECT_EQ((*listed)[1].size, 5u);

  EXPECT_FALSE(store.head("ckpt/model.pt"));  // nothing visible before complete
  std::vector<PartInfo> parts = {*p1, *p2};
  ASSERT_TRUE(store.complete_multipart("ckpt/model.pt", *id, parts));
  EXPECT_EQ(store.get("ckpt/model.pt", {}, 100).value_or(""), "hello world");
  EXPECT_TRUE(store.list_multipart_uploads("")->empty());
  auto list = store.list("", std::nullopt, 100);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->objects.size(), 1u);  // no upload or temp files listed
}

TEST_F(FileStoreTest, CompleteRefusesAPartThatChanged) {
  FileStore store(m_root);
  std::string id = store.create_multipart("k").value_or("");
  auto p1 = store.upload_part("k", id, 1, Payload::from_memory("a"));
  ASSERT_TRUE(p1);
  PartInfo stale = *p1;
  stale.etag = "something-else";
  std::vector<PartInfo> parts = {stale};
  auto done = store.complete_multipart("k", id, parts);
  ASSERT_FALSE(done);
  EXPECT_NE(done.error().message.find("InvalidPart"), std::string::npos);
}

TEST_F(FileStoreTest, AbortRemovesTheUploadAndAnUnknownIdIsNotFound) {
  FileStore store(m_root);
  std::string id = store.create_multipart("k").value_or("");
  ASSERT_TRUE(store.upload_part("k", id, 1, Payload::from_memory("a")));
  ASSERT_TRUE(store.abort_multipart("k", id));
  EXPECT_TRUE(store.list_multipart_uploads("")->empty());
  EXPECT_TRUE(store.abort_multipart("k", id));
  auto part = store.upload_part("k", id, 1, Payload::from_memory("a"));
  ASSERT_FALSE(part);
  EXPECT_EQ(part.error().code, ErrorCode::not_found);
  EXPECT_EQ(store.upload_part("k", "../../etc", 1, Payload::from_memory("a")).error().code,
            ErrorCode::not_found);
}

}  // namespace
}  // namespace gpuhost::store
