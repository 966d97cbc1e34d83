#include "supervise/remote_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <system_error>

#include "base/json.h"
#include "base/json_fields.h"
#include "crypt/encrypted_file.h"
#include "crypt/manifest_mac.h"
#include "job/journal.h"
#include "platform/crypto.h"
#include "platform/files.h"
#include "supervise/checkpoint.h"
#include "supervise/checkpoint_internal.h"

namespace gpuhost::supervise {
namespace {

namespace fs = std::filesystem;

json::Value canonical_value(const CheckpointManifest& m) {
  json::Value doc = json::Value::object();
  doc["format_version"] = m.format_version;
  doc["job"] = m.job;
  doc["remote_id"] = m.remote_id;
  doc["checkpoint_id"] = m.checkpoint_id;
  doc["name"] = m.name;
  doc["directory"] = m.directory;
  doc["format"] = m.format;
  doc["step"] = m.step ? json::Value(*m.step) : json::Value();
  doc["size_bytes"] = m.size_bytes;
  doc["content_hash"] = m.content_hash;
  doc["created_at"] = m.created_at;
  json::Value encryption = json::Value::object();
  encryption["suite"] = m.suite;
  encryption["key_id"] = m.key_id;
  encryption["chunk_bytes"] = m.chunk_bytes;
  doc["encryption"] = std::move(encryption);
  json::Value files = json::Value::array();
  for (const auto& f : m.files) {
    json::Value file = json::Value::object();
    file["path"] = f.path;
    file["size"] = f.size;
    file["stored_size"] = f.stored_size;
    file["sha256"] = f.sha256;
    file["part_size"] = f.part_size;
    json::Value parts = json::Value::array();
    for (const auto& p : f.part_sha256) parts.push_back(p);
    file["part_sha256"] = std::move(parts);
    files.push_back(std::move(file));
  }
  doc["files"] = std::move(files);
  return doc;
}

struct FileDigest {
  std::string sha256;
  std::vector<std::string> parts;
  std::uint64_t size = 0;
};

// SHA-256 of the whole file and of each part_size slice, in one pass.
Result<FileDigest> digest_file(const fs::path& path, std::uint64_t part_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::io_error, "reading " + path.string() + ": cannot open it");
  platform::Sha256 whole;
  std::optional<platform::Sha256> part;
  std::uint64_t in_part = 0;
  FileDigest digest;
  std::vector<char> buffer(1 << 20);
  for (;;) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    std::size_t got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    whole.update(buffer.data(), got);
    digest.size += got;
    std::size_t at = 0;
    while (at < got) {
      if (!part) {
        part.emplace();
        in_part = 0;
      }
      std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(got - at, part_size - in_part));
      part->update(buffer.data() + at, take);
      at += take;
      in_part += take;
      if (in_part == part_size) {
        digest.parts.push_back(platform::to_hex(part->finish()));
        part.reset();
      }
    }
  }
  if (in.bad()) return make_error(ErrorCode::io_error, "reading " + path.string() + ": read failed");
  if (part) digest.parts.push_back(platform::to_hex(part->finish()));
  digest.sha256 = platform::to_hex(whole.finish());
  return digest;
}

std::string hex_of_hash(std::string_view content_hash) {
  auto colon = content_hash.find(':');
  std::string_view hex = colon == std::string_view::npos ? content_hash : content_hash.substr(colon + 1);
  return std::string(hex.substr(0, 16));
}

void remove_quietly(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

// Bytes a restore writes at its peak: every plaintext file, plus (encrypted) the largest object,
// which is downloaded whole before it is decrypted and removed. Each file is rounded up to 4 KiB,
// the block most file systems (tmpfs pages, ext4, NTFS clusters) allocate in.
std::uint64_t restore_bytes_needed(const CheckpointManifest& manifest) {
  auto blocks = [](std::uint64_t n) { return (n + 4095) / 4096 * 4096; };
  std::uint64_t plain = 0, largest_object = 0;
  for (const ManifestFile& file : manifest.files) {
    plain += blocks(file.size);
    largest_object = std::max(largest_object, blocks(file.stored_size));
  }
  return plain + (manifest.suite.empty() ? 0 : largest_object);
}

// Refuses a restore that cannot fit before anything is written, so a full disk costs nothing.
Result<void> check_restore_space(const CheckpointManifest& manifest, const fs::path& folder) {
  std::error_code ec;
  fs::path existing = folder;
  while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.parent_path())
    existing = existing.parent_path();
  if (existing.empty()) existing = ".";
  auto space = platform::disk_space(existing);
  if (!space) return {};  // unknown: the download itself finds out, and cleans up
  const std::uint64_t needed = restore_bytes_needed(manifest);
  if (space->available_bytes >= needed) return {};
  return make_error(ErrorCode::io_error, "not enough free space on " + existing.string() + ": it needs " +
                                             std::to_string(needed) + " bytes, " +
                                             std::to_string(space->available_bytes) +
                                             " are free (free some space, or restore it elsewhere with "
                                             "gpuhost ckpt pull --to DIR)");
}

}  // namespace

std::string manifest_canonical_json(const CheckpointManifest& manifest) {
  return json::dump(canonical_value(manifest));
}

std::string manifest_json(const CheckpointManifest& manifest) {
  json::Value doc = canonical_value(manifest);
  doc["mac"] = manifest.mac;
  return json::dump(doc, 2) + "\n";
}

Result<CheckpointManifest> parse_manifest(std::string_view text) {
  auto doc = json::parse(text);
  if (!doc) return make_error(ErrorCode::parse_error, "reading a checkpoint manifest: " + doc.error().message);
  CheckpointManifest m;
  json::FieldReader r(*doc, "manifest");
  r.read("format_version", m.format_version);
  r.read("job", m.job);
  r.read("remote_id", m.remote_id);
  r.read("checkpoint_id", m.checkpoint_id);
  r.read("name", m.name);
  r.read("directory", m.directory);
  r.read("format", m.format);
  if (const json::Value* step = doc->find("step"); step && step->is_integer()) m.step = step->as_int();
  r.read("size_bytes", m.size_bytes);
  r.read("content_hash", m.content_hash);
  r.read("created_at", m.created_at);
  r.read("mac", m.mac);
  if (const json::Value* enc = r.object("encryption")) {
    json::FieldReader e(*enc, "manifest.encryption");
    e.read("suite", m.suite);
    e.read("key_id", m.key_id);
    e.read("chunk_bytes", m.chunk_bytes);
    if (!e.ok()) r.fail(e.error());
  }
  if (const json::Value* files = r.array("files")) {
    for (std::size_t i = 0; i < files->items().size(); ++i) {
      json::FieldReader f(files->items()[i], "manifest.files[" + std::to_string(i) + "]");
      ManifestFile file;
      f.read("path", file.path);
      f.read("size", file.size);
      f.read("stored_size", file.stored_size);
      f.read("sha256", file.sha256);
      f.read("part_size", file.part_size);
      f.read("part_sha256", file.part_sha256);
      if (!f.ok()) r.fail(f.error());
      m.files.push_back(std::move(file));
    }
  }
  if (!r.ok()) return std::unexpected(r.error());
  if (m.format_version != k_manifest_format_version)
    return make_error(ErrorCode::unsupported, "reading a checkpoint manifest: format version " +
                                                  std::to_string(m.format_version) + " is not " +
                                                  std::to_string(k_manifest_format_version) +
                                                  " (written by another gpuhost version)");
  if (m.remote_id.empty() || !detail::safe_relative_path(m.name) || m.files.empty() || m.content_hash.empty())
    return make_error(ErrorCode::parse_error,
                      "reading a checkpoint manifest: remote_id, name, content_hash and files are required "
                      "(name must be a relative path without '..')");
  for (const auto& f : m.files) {
    if (!detail::safe_relative_path(f.path) || f.sha256.size() != 64 || f.part_size == 0 ||
        f.part_sha256.size() != std::max<std::uint64_t>(1, (f.stored_size + f.part_size - 1) / f.part_size))
      return make_error(ErrorCode::parse_error, "reading a checkpoint manifest: file '" + f.path +
                                                    "' has a bad path, hash or part list");
  }
  return m;
}

Result<void> authenticate_manifest(const CheckpointManifest& manifest, const crypt::EncryptionKey* key) {
  const std::string what = "checkpoint " + manifest.remote_id;
  if (manifest.suite.empty()) {
    if (!manifest.mac.empty())
      return make_error(ErrorCode::parse_error, what + ": the manifest has a MAC but names no cipher suite (edited?)");
    return {};
  }
  auto suite = crypt::parse_suite_name(manifest.suite);
  if (!suite) return make_error(ErrorCode::parse_error, what + ": " + suite.error().message);
  if (!key)
    return make_error(ErrorCode::invalid_argument,
                      what + ": it is encrypted (" + manifest.suite + ", key id " + manifest.key_id +
                          "): give the key with --encryption-key-file FILE, GPUHOST_ENCRYPTION_KEY_FILE or "
                          "GPUHOST_ENCRYPTION_KEY");
  if (key->id() != manifest.key_id)
    return make_error(ErrorCode::invalid_argument, what + ": it was encrypted with key " + manifest.key_id +
                                                       ", not with this key (" + key->id() + ")");
  if (auto available = crypt::suite_available(*suite); !available) return std::unexpected(available.error());
  auto verified = crypt::verify_manifest_mac(*key, *suite, manifest_canonical_json(manifest), manifest.mac);
  if (!verified) return std::unexpected(with_context(verified.error(), what));
  return {};
}

std::string node_mirror_scope(std::string_view job, int node) { return std::string(job) + "/node-" + std::to_string(node); }

std::string manifest_key(std::string_view job, std::string_view remote_id) {
  return std::string(job) + "/" + std::string(remote_id) + "/manifest.json";
}

std::string object_key(std::string_view job, std::string_view remote_id, std::string_view file) {
  return std::string(job) + "/" + std::string(remote_id) + "/files/" + std::string(file);
}

std::string remote_checkpoint_id(std::optional<std::int64_t> step, std::string_view content_hash) {
  char prefix[40];
  if (step) {
    std::snprintf(prefix, sizeof prefix, "step-%012lld-", static_cast<long long>(*step));
  } else {
    std::snprintf(prefix, sizeof prefix, "nostep-");
  }
  return prefix + hex_of_hash(content_hash);
}

Result<CheckpointManifest> push_checkpoint(store::ObjectStore& store, const PushRequest& request,
                                           const RemoteCrypto& crypto, const PushHooks& hooks) {
  const std::string what = "uploading checkpoint " + request.source.string() + " to " + store.describe();
  auto verdict = validate_checkpoint(request.source, ValidationDepth::structure);
  if (!verdict) return std::unexpected(with_context(verdict.error(), what));
  if (!verdict->valid) return make_error(ErrorCode::parse_error, what + ": " + verdict->problem);

  CheckpointManifest manifest;
  manifest.job = request.job;
  manifest.remote_id = request.remote_id;
  manifest.checkpoint_id = request.checkpoint_id;
  manifest.name = request.name;
  manifest.format = request.format;
  manifest.step = request.step;
  manifest.content_hash = request.content_hash;
  manifest.size_bytes = verdict->size_bytes;
  std::error_code ec;
  manifest.directory = fs::is_directory(request.source, ec);
  if (crypto.key) {
    manifest.suite = crypt::suite_name(crypto.suite);
    manifest.key_id = crypto.key->id();
    manifest.chunk_bytes = crypto.chunk_bytes;
  }

  for (std::size_t i = 0; i < verdict->files.size(); ++i) {
    const CheckpointFile& file = verdict->files[i];
    ManifestFile entry;
    entry.path = file.relative_path.empty() ? request.source.filename().string() : file.relative_path;
    entry.size = file.size;
    const fs::path plain = file.relative_path.empty() ? request.source : request.source / fs::path(file.relative_path);
    const std::string key = object_key(request.job, request.remote_id, entry.path);
    fs::path upload = plain;
    auto resumed = hooks.resume.find(key);
    if (crypto.key) {
      upload = request.staging / (std::to_string(i) + ".enc");
      // A resumed multipart upload must get the same ciphertext as before: the staged copy is
      // reused; without an upload to resume it is made afresh.
      if (resumed == hooks.resume.end() || !fs::exists(upload, ec)) {
        fs::create_directories(request.staging, ec);
        crypt::EncryptOptions options;
        options.suite = crypto.suite;
        options.chunk_bytes = crypto.chunk_bytes;
        auto encrypted = crypt::encrypt_file(*crypto.key, options, plain, upload);
        if (!encrypted) return std::unexpected(with_context(encrypted.error(), what));
        resumed = hooks.resume.end();
      }
    }
    const std::uint64_t stored_size = fs::file_size(upload, ec);
    if (ec) return make_error(ErrorCode::io_error, what + ": " + upload.string() + ": " + ec.message());
    store::UploadOptions options = hooks.upload;
    const std::uint64_t part_size = store::choose_part_size(stored_size, options.part_size);
    options.part_size = part_size;
    if (resumed != hooks.resume.end()) {
      options.resume_upload_id = resumed->second.upload_id;
      options.known_parts = resumed->second.parts;
    }
    std::string upload_id;
    options.on_started = [&](const std::string& id) {
      upload_id = id;
      if (hooks.on_upload_started) hooks.on_upload_started(key, id, part_size);
    };
    options.on_part_done = [&](const store::PartInfo& part) {
      if (hooks.on_part_done) hooks.on_part_done(key, upload_id, part);
    };
    auto uploaded = store::upload_file(store, key, upload, options);
    if (!uploaded && uploaded.error().code == ErrorCode::not_found && !options.resume_upload_id.empty()) {
      // The upload to continue is gone (aborted, or expired by a lifecycle rule): start afresh.
      options.resume_upload_id.clear();
      options.known_parts.clear();
      uploaded = store::upload_file(store, key, upload, options);
    }
    if (!uploaded) return std::unexpected(with_context(uploaded.error(), what));
    // The digest is of the file as uploaded; it was not rewritten meanwhile (the checkpoint is
    // committed and the staged copy is ours), and pull checks the bytes against it.
    auto digest = digest_file(upload, part_size);
    if (!digest) return std::unexpected(with_context(digest.error(), what));
    if (digest->size != stored_size)
      return make_error(ErrorCode::io_error, what + ": " + upload.string() + " changed size while it was uploaded");
    entry.stored_size = stored_size;
    entry.sha256 = digest->sha256;
    entry.part_size = part_size;
    entry.part_sha256 = digest->parts;
    if (entry.part_sha256.empty()) entry.part_sha256.push_back(platform::to_hex(platform::sha256("")));
    manifest.files.push_back(std::move(entry));
  }

  manifest.created_at = job::journal_time(std::chrono::system_clock::now());
  if (crypto.key) manifest.mac = GPUHOST_TRY(crypt::manifest_mac(*crypto.key, crypto.suite, manifest_canonical_json(manifest)));
  const std::string document = manifest_json(manifest);
  auto put = store.put(manifest_key(request.job, request.remote_id), store::Payload::from_memory(document));
  if (!put) return std::unexpected(with_context(put.error(), what + ": storing the manifest"));
  if (crypto.key) remove_quietly(request.staging);
  return manifest;
}

Result<CheckpointManifest> read_manifest(store::ObjectStore& store, std::string_view job, std::string_view remote_id,
                                         const crypt::EncryptionKey* key) {
  const std::string mkey = manifest_key(job, remote_id);
  auto text = store.get(mkey, {}, 16u << 20);
  if (!text) return std::unexpected(text.error());
  auto manifest = parse_manifest(*text);
  if (!manifest) return std::unexpected(with_context(manifest.error(), mkey));
  if (manifest->remote_id != remote_id || manifest->job != job)
    return make_error(ErrorCode::parse_error, mkey + ": names checkpoint " + manifest->job + "/" +
                                                  manifest->remote_id + " (copied or edited?)");
  if (auto authentic = authenticate_manifest(*manifest, key); !authentic) return std::unexpected(authentic.error());
  return manifest;
}

Result<std::vector<RemoteEntry>> list_remote_checkpoints(store::ObjectStore& store, std::string_view job,
                                                         const crypt::EncryptionKey* key) {
  const std::string prefix = std::string(job) + "/";
  std::vector<RemoteEntry> entries;
  std::optional<std::string> after;
  do {
    auto page = store.list(prefix, after);
    if (!page) return std::unexpected(page.error());
    for (const auto& object : page->objects) {
      std::string_view rest = std::string_view(object.key).substr(std::min(prefix.size(), object.key.size()));
      auto slash = rest.find('/');
      if (slash == std::string_view::npos || rest.substr(slash) != "/manifest.json") continue;
      RemoteEntry entry;
      entry.key = object.key;
      auto manifest = read_manifest(store, job, rest.substr(0, slash), key);
      if (manifest) {
        entry.manifest = std::move(*manifest);
      } else {
        entry.problem = manifest.error().message;
      }
      entries.push_back(std::move(entry));
    }
    after = page->next;
  } while (after);
  std::stable_sort(entries.begin(), entries.end(), [](const RemoteEntry& a, const RemoteEntry& b) {
    if (a.manifest.has_value() != b.manifest.has_value()) return a.manifest.has_value();
    if (!a.manifest) return false;
    if (a.manifest->step != b.manifest->step) return a.manifest->step > b.manifest->step;
    return a.manifest->created_at > b.manifest->created_at;
  });
  return entries;
}

Result<fs::path> pull_checkpoint(store::ObjectStore& store, const CheckpointManifest& manifest,
                                 const crypt::EncryptionKey* key, const fs::path& destination,
                                 const store::DownloadOptions& download) {
  const std::string what = "restoring checkpoint " + manifest.remote_id + " into " + destination.string();
  std::error_code ec;
  if (fs::exists(destination, ec))
    return make_error(ErrorCode::invalid_argument, what + ": the destination exists (move it away or pick another)");
  if (auto authentic = authenticate_manifest(manifest, key); !authentic) return std::unexpected(authentic.error());
  const bool encrypted = !manifest.suite.empty();

  // Staged beside the destination, so the final rename stays on one file system.
  const fs::path staging = destination.parent_path() / (".gpuhost-restore-" + manifest.remote_id);
  remove_quietly(staging);
  if (auto room = check_restore_space(manifest, staging.parent_path()); !room)
    return std::unexpected(with_context(room.error(), what));
  fs::create_directories(staging / "out", ec);
  if (ec) return make_error(ErrorCode::io_error, what + ": creating " + staging.string() + ": " + ec.message());
  auto fail = [&](Error error) -> Result<fs::path> {
    remove_quietly(staging);
    return std::unexpected(with_context(std::move(error), what));
  };

  const fs::path out = staging / "out" / fs::path(manifest.name);
  for (std::size_t i = 0; i < manifest.files.size(); ++i) {
    const ManifestFile& file = manifest.files[i];
    const std::string okey = object_key(manifest.job, manifest.remote_id, file.path);
    const fs::path plain = manifest.directory ? out / fs::path(file.path) : out;
    fs::create_directories(plain.parent_path(), ec);
    const fs::path fetched = encrypted ? staging / (std::to_string(i) + ".enc") : plain;
    auto got = store::download_file(store, okey, fetched, download);
    if (!got) return fail(got.error());
    if (*got != file.stored_size)
      return fail(Error{ErrorCode::parse_error, okey + ": is " + std::to_string(*got) + " bytes, the manifest says " +
                                                    std::to_string(file.stored_size) + " (truncated or replaced)"});
    auto digest = digest_file(fetched, file.part_size);
    if (!digest) return fail(digest.error());
    for (std::size_t p = 0; p < digest->parts.size() && p < file.part_sha256.size(); ++p)
      if (digest->parts[p] != file.part_sha256[p])
        return fail(Error{ErrorCode::parse_error, okey + ": part " + std::to_string(p + 1) +
                                                      " does not match its SHA-256 in the manifest (changed after upload)"});
    if (digest->sha256 != file.sha256)
      return fail(Error{ErrorCode::parse_error, okey + ": SHA-256 " + digest->sha256 + " does not match the manifest's " +
                                                    file.sha256 + " (changed after upload)"});
    if (encrypted) {
      crypt::DecryptOptions options;
      options.input_bytes = *got;
      auto decrypted = crypt::decrypt_file(*key, options, fetched, plain);
      if (!decrypted) return fail(decrypted.error());
      fs::remove(fetched, ec);
    }
  }

  auto verdict = validate_checkpoint(out, ValidationDepth::full);
  if (!verdict) return fail(verdict.error());
  if (!verdict->valid) return fail(Error{ErrorCode::parse_error, "the restored checkpoint is invalid: " + verdict->problem});
  if (verdict->content_hash != manifest.content_hash)
    return fail(Error{ErrorCode::parse_error, "the restored checkpoint's content hash " + verdict->content_hash +
                                                  " is not the manifest's " + manifest.content_hash});
  fs::create_directories(destination.parent_path(), ec);
  fs::rename(out, destination, ec);
  if (ec) return fail(Error{ErrorCode::io_error, "moving it into place: " + ec.message()});
  (void)platform::sync_directory(destination.parent_path());
  remove_quietly(staging);
  return destination;
}

Result<void> remove_remote_checkpoint(store::ObjectStore& store, std::string_view job, std::string_view remote_id) {
  if (auto removed = store.remove(manifest_key(job, remote_id)); !removed) return removed;
  const std::string prefix = std::string(job) + "/" + std::string(remote_id) + "/";
  std::optional<std::string> after;
  do {
    auto page = store.list(prefix, after);
    if (!page) return std::unexpected(page.error());
    for (const auto& object : page->objects)
      if (auto removed = store.remove(object.key); !removed) return removed;
    after = page->next;
  } while (after);
  return {};
}

}  // namespace gpuhost::supervise
