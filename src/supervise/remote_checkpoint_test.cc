#include "supervise/remote_checkpoint.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "crypt/encryption_key.h"
#include "store/store.h"
#include "supervise/checkpoint.h"
#include "supervise/checkpoint_fixtures.h"
#include "supervise/mirror.h"

namespace gpuhost::supervise {
namespace {

namespace fs = std::filesystem;
using fixtures::ScratchDir;

crypt::EncryptionKey test_key(char digit) {
  std::string hex(64, digit);
  hex[0] = '1';
  return *crypt::EncryptionKey::from_hex(hex, "test");
}

class RemoteCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(m_dir.path() / "bucket");
    std::string root = (m_dir.path() / "bucket").generic_string();
    if (!root.starts_with('/')) root = "/" + root;  // file:///C:/... on Windows
    auto store = store::open_store("file://" + root);
    ASSERT_TRUE(store) << store.error().message;
    m_store = std::move(*store);
    m_source = m_dir.path() / "ck" / "step_000300.pt";
    fs::create_directories(m_source.parent_path());
    fixtures::write_bytes(m_source, fixtures::make_torch_zip("archive", {}, 100000));
  }

  // Pushes the fixture checkpoint; returns its manifest.
  CheckpointManifest push(const crypt::EncryptionKey* key) {
    auto verdict = validate_checkpoint(m_source, ValidationDepth::full);
    EXPECT_TRUE(verdict && verdict->valid);
    PushRequest request;
    request.job = "job";
    request.remote_id = remote_checkpoint_id(verdict->step, verdict->content_hash);
    request.checkpoint_id = "ck-1";
    request.source = m_source;
    request.name = m_source.filename().string();
    request.format = checkpoint_format_name(verdict->format);
    request.step = verdict->step;
    request.content_hash = verdict->content_hash;
    request.staging = m_dir.path() / "staging";
    RemoteCrypto crypto;
    crypto.key = key;
    crypto.chunk_bytes = 4096;
    auto pushed = push_checkpoint(*m_store, request, crypto, {});
    EXPECT_TRUE(pushed) << pushed.error().message;
    return *pushed;
  }

  fs::path object_path(const CheckpointManifest& m) {
    return m_dir.path() / "bucket" / fs::path(object_key(m.job, m.remote_id, m.files[0].path));
  }

  ScratchDir m_dir{"remote-checkpoint-test"};
  std::unique_ptr<store::ObjectStore> m_store;
  fs::path m_source;
};

TEST_F(RemoteCheckpoint, ManifestRoundTripsThroughItsJson) {
  CheckpointManifest m = push(nullptr);
  auto parsed = parse_manifest(manifest_json(m));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(manifest_canonical_json(*parsed), manifest_canonical_json(m));
  EXPECT_EQ(parsed->step, 300);
  EXPECT_EQ(m.remote_id.substr(0, 18), "step-000000000300-");
}

TEST_F(RemoteCheckpoint, PlainPushThenPullGivesTheSameBytes) {
  CheckpointManifest m = push(nullptr);
  auto listed = list_remote_checkpoints(*m_store, "job", nullptr);
  ASSERT_TRUE(listed && listed->size() == 1 && (*listed)[0].manifest);
  auto pulled = pull_checkpoint(*m_store, *(*listed)[0].manifest, nullptr, m_dir.path() / "restored" / m.name);
  ASSERT_TRUE(pulled) << pulled.error().message;
  EXPECT_EQ(fixtures::read_bytes(*pulled), fixtures::read_bytes(m_source));
}

TEST_F(RemoteCheckpoint, EncryptedPushStoresCiphertextAndPullsThePlaintext) {
  auto key = test_key('7');
  CheckpointManifest m = push(&key);
  EXPECT_EQ(m.suite, "aes-256-gcm");
  EXPECT_NE(fixtures::read_bytes(object_path(m)), fixtures::read_bytes(m_source));
  auto read = read_manifest(*m_store, "job", m.remote_id, &key);
  ASSERT_TRUE(read) << read.error().message;
  auto pulled = pull_checkpoint(*m_store, *read, &key, m_dir.path() / "restored" / m.name);
  ASSERT_TRUE(pulled) << pulled.error().message;
  EXPECT_EQ(fixtures::read_bytes(*pulled), fixtures::read_bytes(m_source));
}

TEST_F(RemoteCheckpoint, FlippedBitIsRefusedAndLeavesNothingBehind) {
  CheckpointManifest m = push(nullptr);
  std::string bytes = fixtures::read_bytes(object_path(m));
  bytes[bytes.size() / 2] ^= 1;
  fixtures::write_bytes(object_path(m), bytes);
  const fs::path destination = m_dir.path() / "restored" / m.name;
  auto pulled = pull_checkpoint(*m_store, m, nullptr, destination);
  ASSERT_FALSE(pulled);
  EXPECT_NE(pulled.error().message.find("changed after upload"), std::string::npos) << pulled.error().message;
  EXPECT_FALSE(fs::exists(destination));
  EXPECT_TRUE(fs::is_empty(destination.parent_path()));
}

TEST_F(RemoteCheckpoint, EditedEncryptedManifestFailsAuthentication) {
  auto key = test_key('7');
  CheckpointManifest m = push(&key);
  m.step = 999;
  auto checked = authenticate_manifest(m, &key);
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().message.find("manifest authentication failed"), std::string::npos)
      << checked.error().message;
}

TEST_F(RemoteCheckpoint, WrongKeyIsNamedAsSuch) {
  auto key = test_key('7');
  auto other = test_key('8');
  CheckpointManifest m = push(&key);
  auto checked = authenticate_manifest(m, &other);
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().message.find("not with this key"), std::string::npos) << checked.error().message;
  auto keyless = authenticate_manifest(m, nullptr);
  ASSERT_FALSE(keyless);
  EXPECT_NE(keyless.error().message.find("--encryption-key-file"), std::string::npos);
}

TEST_F(RemoteCheckpoint, ExistingDestinationIsNeverOverwritten) {
  CheckpointManifest m = push(nullptr);
  const fs::path destination = m_dir.path() / "restored" / m.name;
  fs::create_directories(destination.parent_path());
  fixtures::write_bytes(destination, "previous");
  ASSERT_FALSE(pull_checkpoint(*m_store, m, nullptr, destination));
  EXPECT_EQ(fixtures::read_bytes(destination), "previous");
}

TEST_F(RemoteCheckpoint, ManifestWithEscapingPathIsRejected) {
  CheckpointManifest m = push(nullptr);
  m.name = "../../etc/evil.pt";
  EXPECT_FALSE(parse_manifest(manifest_json(m)));
}

TEST_F(RemoteCheckpoint, RemoveDeletesManifestAndObjects) {
  CheckpointManifest m = push(nullptr);
  ASSERT_TRUE(remove_remote_checkpoint(*m_store, "job", m.remote_id));
  auto listed = list_remote_checkpoints(*m_store, "job", nullptr);
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->empty());
  EXPECT_FALSE(fs::exists(object_path(m)));
}

// Events until the mirror is idle (a FileStore answers at once; the loop only waits for the thread).
std::vector<MirrorEvent> drain(Mirror& mirror) {
  std::vector<MirrorEvent> events;
  for (int i = 0; i < 2000; ++i) {
    bool idle = mirror.idle();
    for (auto& e : mirror.take_events()) events.push_back(std::move(e));
    if (idle) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return events;
}

TEST_F(RemoteCheckpoint, MirrorUploadsInTheBackgroundThenRetirementDeletesTheRemoteCopy) {
  MirrorOptions options;
  options.job = "job";
  std::string root = (m_dir.path() / "bucket").generic_string();
  if (!root.starts_with('/')) root = "/" + root;
  options.store = std::move(*store::open_store("file://" + root));
  Mirror mirror(std::move(options));
  auto verdict = validate_checkpoint(m_source, ValidationDepth::full);
  ASSERT_TRUE(verdict && verdict->valid);
  PushRequest request;
  request.job = "job";
  request.remote_id = remote_checkpoint_id(verdict->step, verdict->content_hash);
  request.checkpoint_id = "ck-3";
  request.source = m_source;
  request.name = m_source.filename().string();
  request.content_hash = verdict->content_hash;
  request.staging = m_dir.path() / "staging";
  mirror.enqueue_upload(request, {});
  auto events = drain(mirror);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, "mirror_durable");
  EXPECT_EQ(events.back().fields.get_string("id"), "ck-3");
  ASSERT_TRUE(read_manifest(mirror.object_store(), "job", request.remote_id, nullptr));

  mirror.retire("ck-3", request.remote_id, {});
  events = drain(mirror);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, "mirror_removed");
  EXPECT_FALSE(read_manifest(mirror.object_store(), "job", request.remote_id, nullptr));
}

// Retention can retire a checkpoint after its upload finished but before the supervisor took
// the mirror_durable event, so it passes no remote id: the copy must still go.
TEST_F(RemoteCheckpoint, MirrorDeletesACopyRetiredBeforeItsDurableEventWasTaken) {
  MirrorOptions options;
  options.job = "job";
  std::string root = (m_dir.path() / "bucket").generic_string();
  if (!root.starts_with('/')) root = "/" + root;
  options.store = std::move(*store::open_store("file://" + root));
  Mirror mirror(std::move(options));
  auto verdict = validate_checkpoint(m_source, ValidationDepth::full);
  ASSERT_TRUE(verdict && verdict->valid);
  PushRequest request;
  request.job = "job";
  request.remote_id = remote_checkpoint_id(verdict->step, verdict->content_hash);
  request.checkpoint_id = "ck-3";
  request.source = m_source;
  request.name = m_source.filename().string();
  request.content_hash = verdict->content_hash;
  request.staging = m_dir.path() / "staging";
  mirror.enqueue_upload(request, {});
  for (int i = 0; i < 6000 && !mirror.idle(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(mirror.idle());
  ASSERT_TRUE(read_manifest(mirror.object_store(), "job", request.remote_id, nullptr));

  mirror.retire("ck-3", "", {});
  auto events = drain(mirror);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, "mirror_durable");
  EXPECT_EQ(events[1].type, "mirror_removed");
  EXPECT_EQ(events[1].fields.get_string("remote_id"), request.remote_id);
  EXPECT_FALSE(read_manifest(mirror.object_store(), "job", request.remote_id, nullptr));
}

}  // namespace
}  // namespace gpuhost::supervise
