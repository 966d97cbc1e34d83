#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "crypt/cipher_suite.h"
#include "crypt/encryption_key.h"
#include "store/object_store.h"
#include "store/transfer.h"

namespace gpuhost::supervise {

// A checkpoint in object storage (format: doc/remote-store.md). Under the store's prefix:
//
//   <job>/<remote id>/files/<file>   one object per checkpoint file (encrypted: doc/encryption.md)
//   <job>/<remote id>/manifest.json  written last, after every object is complete: the remote
//                                    commit marker. No manifest, no checkpoint.

inline constexpr int k_manifest_format_version = 1;

struct ManifestFile {
  std::string path;                 // "/"-separated, relative to the checkpoint; a single file: its name
  std::uint64_t size = 0;           // plaintext bytes
  std::uint64_t stored_size = 0;    // bytes of the object (encrypted: header and chunk frames)
  std::string sha256;               // hex SHA-256 of the object as stored
  std::uint64_t part_size = 0;      // the size each part_sha256 covers (the last may be shorter)
  std::vector<std::string> part_sha256;
};

struct CheckpointManifest {
  int format_version = k_manifest_format_version;
  std::string job;
  std::string remote_id;      // the folder under <job>/
  std::string checkpoint_id;  // the id the committing host's journal gave it ("ck-12")
  std::string name;           // where it goes in the checkpoint location ("ckpt-000020.pt", "checkpoint-20")
  bool directory = false;     // a checkpoint directory (files below `name`) or a single file
  std::string format;         // checkpoint_format_name()
  std::optional<std::int64_t> step;
  std::uint64_t size_bytes = 0;
  std::string content_hash;   // "xxh3-128:..." of the plaintext checkpoint, as validation computes it
  std::string created_at;     // journal time of the upload's end
  std::vector<ManifestFile> files;
  // Encryption: empty suite when the objects are plaintext.
  std::string suite;
  std::string key_id;
  std::uint32_t chunk_bytes = 0;
  std::string mac;  // manifest_mac over the canonical bytes (everything but "mac"); empty unencrypted
};

// The canonical JSON (what the MAC covers: every field but "mac", in a fixed order) and the
// document stored (canonical plus "mac").
[[nodiscard]] std::string manifest_canonical_json(const CheckpointManifest& manifest);
[[nodiscard]] std::string manifest_json(const CheckpointManifest& manifest);
// Parses a manifest document; parse_error naming the field. Does not check the MAC.
[[nodiscard]] Result<CheckpointManifest> parse_manifest(std::string_view text);

// Checks that `key` can read the manifest: the suite is known and available, the key id matches,
// the MAC verifies. An unencrypted manifest needs no key; an encrypted one without a key is
// invalid_argument naming the key id and how to pass a key.
[[nodiscard]] Result<void> authenticate_manifest(const CheckpointManifest& manifest, const crypt::EncryptionKey* key);

[[nodiscard]] std::string manifest_key(std::string_view job, std::string_view remote_id);
// The key prefix ("scope", used as `job` above) of node `node`'s copies of a multi-node job with
// node-local checkpoint folders: <job>/node-<K> (doc/remote-store.md).
[[nodiscard]] std::string node_mirror_scope(std::string_view job, int node);
[[nodiscard]] std::string object_key(std::string_view job, std::string_view remote_id, std::string_view file);

// A stable name for a checkpoint in the remote: "step-<12-digit step>-<16 hex of its content
// hash>" (or "nostep-..."), so two hosts that commit the same bytes agree and different bytes
// never collide.
[[nodiscard]] std::string remote_checkpoint_id(std::optional<std::int64_t> step, std::string_view content_hash);

// Encryption for uploads; null key: plaintext.
struct RemoteCrypto {
  const crypt::EncryptionKey* key = nullptr;
  crypt::CipherSuite suite = crypt::CipherSuite::aes_256_gcm;
  std::uint32_t chunk_bytes = 4u << 20;
};

// What to upload: a committed checkpoint.
struct PushRequest {
  std::string job;
  std::string remote_id;
  std::string checkpoint_id;
  std::filesystem::path source;  // the file or directory to read (a snapshot when one was taken)
  std::string name;              // manifest name (see CheckpointManifest::name)
  std::string format;
  std::optional<std::int64_t> step;
  std::string content_hash;
  // Where encrypted copies are written before upload; kept until the manifest is stored, so a
  // resumed multipart upload sends the same bytes as the first attempt.
  std::filesystem::path staging;
};

// Multipart uploads a push may continue: object key -> (upload id, parts journalled).
struct ResumableUpload {
  std::string upload_id;
  std::vector<store::PartInfo> parts;
};

struct PushHooks {
  store::UploadOptions upload;  // tuning (part size, concurrency, threshold) and cancel
  std::map<std::string, ResumableUpload> resume;  // by object key
  // Called (from the pushing thread or transfer workers, one call at a time per object) as
  // multipart uploads start and parts finish, so the caller can journal them.
  std::function<void(const std::string& object, const std::string& upload_id, std::uint64_t part_size)> on_upload_started;
  std::function<void(const std::string& object, const std::string& upload_id, const store::PartInfo& part)> on_part_done;
};

// Uploads every file of the checkpoint (encrypting first when crypto.key is set), then the
// manifest. Returns the manifest once it is stored: only then is the checkpoint durable remotely.
[[nodiscard]] Result<CheckpointManifest> push_checkpoint(store::ObjectStore& store, const PushRequest& request,
                                                         const RemoteCrypto& crypto, const PushHooks& hooks);

// A manifest found under <job>/, or why it cannot be used.
struct RemoteEntry {
  std::string key;  // of the manifest
  std::optional<CheckpointManifest> manifest;
  std::string problem;  // when manifest is absent or does not authenticate
};

// Every <job>/<id>/manifest.json, newest first (step, then created_at; unreadable ones last).
// With `key`, encrypted manifests are authenticated (problem set when they do not).
[[nodiscard]] Result<std::vector<RemoteEntry>> list_remote_checkpoints(store::ObjectStore& store, std::string_view job,
                                                                       const crypt::EncryptionKey* key);

// Reads and authenticates one manifest.
[[nodiscard]] Result<CheckpointManifest> read_manifest(store::ObjectStore& store, std::string_view job,
                                                       std::string_view remote_id, const crypt::EncryptionKey* key);

// Downloads the checkpoint with parallel ranged GETs into a staging folder beside `destination`,
// checks every object's size, SHA-256 and part hashes, decrypts (which authenticates every
// chunk), validates the checkpoint and compares its content hash with the manifest's; only then
// renames it to `destination`, which must not exist. On any error nothing is left behind and
// whatever was at the destination is untouched. Returns the destination.
[[nodiscard]] Result<std::filesystem::path> pull_checkpoint(store::ObjectStore& store, const CheckpointManifest& manifest,
                                                            const crypt::EncryptionKey* key,
                                                            const std::filesystem::path& destination,
                                                            const store::DownloadOptions& download = {});

// Deletes a checkpoint from the store: the manifest first (so it stops being a checkpoint at
// once), then its objects.
[[nodiscard]] Result<void> remove_remote_checkpoint(store::ObjectStore& store, std::string_view job,
                                                    std::string_view remote_id);

}  // namespace gpuhost::supervise
