#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/json.h"
#include "crypt/encryption_key.h"
#include "store/object_store.h"
#include "supervise/remote_checkpoint.h"

namespace gpuhost::supervise {

// What the mirror did, for the supervisor to journal (doc/remote-store.md lists the types):
// mirror_upload_started, mirror_part_uploaded, mirror_durable, mirror_failed,
// mirror_upload_aborted, mirror_removed.
struct MirrorEvent {
  std::string type;
  json::Value fields;
};

struct MirrorOptions {
  std::unique_ptr<store::ObjectStore> store;
  std::optional<crypt::EncryptionKey> key;  // reads encrypted checkpoints; absent: plaintext only
  bool encrypt = true;                      // uploads are encrypted with `key` (when there is one)
  crypt::CipherSuite suite = crypt::CipherSuite::aes_256_gcm;
  store::UploadOptions upload;  // part size, concurrency, threshold (callbacks are the mirror's)
  std::string job;
};

// Uploads committed checkpoints to object storage on its own thread, one checkpoint at a time
// (parts in parallel), so training never waits for it. Failed uploads are retried with backoff,
// resuming their multipart uploads. The journal belongs to the supervisor: the mirror only
// queues events, which the supervisor takes with take_events() and records. All methods are
// thread-safe; the destructor cancels what is in flight (its multipart uploads stay resumable)
// and joins the thread.
class Mirror {
 public:
  explicit Mirror(MirrorOptions options);
  ~Mirror();
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;

  // Cancels what is in flight (its multipart uploads stay resumable) and joins the thread;
  // events up to then can still be taken. Idempotent.
  void stop();

  // Uploads a checkpoint (continuing the multipart uploads in `resume`).
  void enqueue_upload(PushRequest request, std::map<std::string, ResumableUpload> resume);
  // The checkpoint was retired locally: a queued or running upload is dropped and its multipart
  // uploads aborted; a durable copy is deleted when `remote_id` is set.
  void retire(const std::string& checkpoint_id, const std::string& remote_id,
              const std::vector<std::pair<std::string, std::string>>& uploads);
  // Aborts multipart uploads under <job>/ that are not in `keep` (upload ids): left by a crash
  // of a supervisor that never journalled them, or of checkpoints retired since.
  void abort_stale_uploads(std::set<std::string> keep);

  [[nodiscard]] std::vector<MirrorEvent> take_events();
  // Nothing queued or running.
  [[nodiscard]] bool idle() const;
  [[nodiscard]] store::ObjectStore& object_store() { return *m_options.store; }
  [[nodiscard]] const crypt::EncryptionKey* key() const { return m_options.key ? &*m_options.key : nullptr; }
  [[nodiscard]] const std::string& job() const { return m_options.job; }

 private:
  struct Task {
    enum class Kind { upload, remove, abort, abort_stale } kind = Kind::upload;
    PushRequest request;                              // upload
    std::map<std::string, ResumableUpload> resume;    // upload: by object key
    std::string checkpoint_id, remote_id;             // remove
    std::vector<std::pair<std::string, std::string>> uploads;  // abort: (object key, upload id)
    std::set<std::string> keep;                       // abort_stale
  };

  void run();
  void run_upload(Task& task);
  void emit(std::string type, json::Value fields);
  void abort_uploads(const std::string& checkpoint_id, const std::vector<std::pair<std::string, std::string>>& uploads,
                     const std::string& reason);

  MirrorOptions m_options;
  RemoteCrypto m_crypto;

  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  std::deque<Task> m_tasks;            // guarded by m_mutex
  std::vector<MirrorEvent> m_events;   // guarded by m_mutex
  std::string m_active;                // guarded by m_mutex: checkpoint id being uploaded
  bool m_active_retired = false;       // guarded by m_mutex
  bool m_stop = false;                 // guarded by m_mutex
  // Uploaded checkpoint id -> remote id, until retired: a retire() that races the supervisor's
  // taking of the mirror_durable event still deletes the remote copy. Guarded by m_mutex.
  std::map<std::string, std::string> m_durable;
  std::atomic<bool> m_cancel{false};   // the running upload's cancel flag
  std::thread m_thread;                // last: started once everything above exists
};

}  // namespace gpuhost::supervise
