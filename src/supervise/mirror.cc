#include "supervise/mirror.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "store/transfer.h"

namespace gpuhost::supervise {

Mirror::Mirror(MirrorOptions options) : m_options(std::move(options)) {
  m_crypto.key = m_options.key && m_options.encrypt ? &*m_options.key : nullptr;
  m_crypto.suite = m_options.suite;
  m_thread = std::thread([this] { run(); });
}

Mirror::~Mirror() { stop(); }

void Mirror::stop() {
  if (!m_thread.joinable()) return;
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_cancel = true;
  m_wake.notify_all();
  m_thread.join();
}

void Mirror::enqueue_upload(PushRequest request, std::map<std::string, ResumableUpload> resume) {
  Task task;
  task.kind = Task::Kind::upload;
  task.request = std::move(request);
  task.resume = std::move(resume);
  {
    std::lock_guard lock(m_mutex);
    m_tasks.push_back(std::move(task));
  }
  m_wake.notify_all();
}

void Mirror::retire(const std::string& checkpoint_id, const std::string& remote_id,
                    const std::vector<std::pair<std::string, std::string>>& uploads) {
  {
    std::lock_guard lock(m_mutex);
    // The caller knows no remote copy when the mirror_durable event is not journalled yet: the
    // upload may have finished since.
    std::string remote = remote_id;
    if (auto done = m_durable.find(checkpoint_id); done != m_durable.end()) {
      if (remote.empty()) remote = done->second;
      m_durable.erase(done);
    }
    std::erase_if(m_tasks, [&](const Task& t) {
      return t.kind == Task::Kind::upload && t.request.checkpoint_id == checkpoint_id;
    });
    if (m_active == checkpoint_id) {
      m_active_retired = true;  // run_upload aborts what it started
      m_cancel = true;
    }
    if (!uploads.empty()) {
      Task abort;
      abort.kind = Task::Kind::abort;
      abort.checkpoint_id = checkpoint_id;
      abort.uploads = uploads;
      m_tasks.push_back(std::move(abort));
    }
    if (!remote.empty()) {
      Task remove;
      remove.kind = Task::Kind::remove;
      remove.checkpoint_id = checkpoint_id;
      remove.remote_id = remote;
      m_tasks.push_back(std::move(remove));
    }
  }
  m_wake.notify_all();
}

void Mirror::abort_stale_uploads(std::set<std::string> keep) {
  Task task;
  task.kind = Task::Kind::abort_stale;
  task.keep = std::move(keep);
  {
    std::lock_guard lock(m_mutex);
    m_tasks.push_front(std::move(task));
  }
  m_wake.notify_all();
}

std::vector<MirrorEvent> Mirror::take_events() {
  std::lock_guard lock(m_mutex);
  return std::exchange(m_events, {});
}

bool Mirror::idle() const {
  std::lock_guard lock(m_mutex);
  return m_tasks.empty() && m_active.empty();
}

void Mirror::emit(std::string type, json::Value fields) {
  std::lock_guard lock(m_mutex);
  m_events.push_back(MirrorEvent{std::move(type), std::move(fields)});
}

void Mirror::abort_uploads(const std::string& checkpoint_id,
                           const std::vector<std::pair<std::string, std::string>>& uploads, const std::string& reason) {
  for (const auto& [object, upload_id] : uploads) {
    auto aborted = m_options.store->abort_multipart(object, upload_id);
    json::Value fields = json::Value::object();
    fields["id"] = checkpoint_id;
    fields["object"] = object;
    fields["upload_id"] = upload_id;
    fields["reason"] = aborted ? reason : reason + "; abort failed: " + aborted.error().message;
    emit("mirror_upload_aborted", std::move(fields));
  }
}

void Mirror::run() {
  std::unique_lock lock(m_mutex);
  for (;;) {
    m_wake.wait(lock, [&] { return m_stop || !m_tasks.empty(); });
    if (m_stop) return;
    Task task = std::move(m_tasks.front());
    m_tasks.pop_front();
    m_active = task.kind == Task::Kind::upload ? task.request.checkpoint_id : std::string("\x01housekeeping");
    if (task.kind == Task::Kind::upload) {
      m_active_retired = false;
      m_cancel = false;
    }
    lock.unlock();
    switch (task.kind) {
      case Task::Kind::upload: run_upload(task); break;
      case Task::Kind::abort: abort_uploads(task.checkpoint_id, task.uploads, "the checkpoint was retired"); break;
      case Task::Kind::remove: {
        auto removed = remove_remote_checkpoint(*m_options.store, m_options.job, task.remote_id);
        json::Value fields = json::Value::object();
        fields["id"] = task.checkpoint_id;
        fields["remote_id"] = task.remote_id;
        if (removed) {
          emit("mirror_removed", std::move(fields));
        } else {
          fields["error"] = removed.error().message;
          emit("mirror_failed", std::move(fields));
        }
        break;
      }
      case Task::Kind::abort_stale: {
        auto uploads = m_options.store->list_multipart_uploads(m_options.job + "/");
        if (!uploads) {
          json::Value fields = json::Value::object();
          fields["error"] = "listing unfinished uploads: " + uploads.error().message;
          emit("mirror_failed", std::move(fields));
          break;
        }
        std::vector<std::pair<std::string, std::string>> stale;
        for (const auto& u : *uploads)
          if (!task.keep.contains(u.upload_id)) stale.emplace_back(u.key, u.upload_id);
        abort_uploads("", stale, "stale: no journalled checkpoint continues it");
        break;
      }
    }
    lock.lock();
    m_active.clear();
  }
}

void Mirror::run_upload(Task& task) {
  const std::string& id = task.request.checkpoint_id;
  std::vector<std::pair<std::string, std::string>> started;  // this checkpoint's multipart uploads
  for (const auto& [object, resumable] : task.resume) started.emplace_back(object, resumable.upload_id);
  PushHooks hooks;
  hooks.upload = m_options.upload;
  hooks.upload.cancel = &m_cancel;
  hooks.resume = task.resume;
  std::mutex parts_mutex;
  hooks.on_upload_started = [&](const std::string& object, const std::string& upload_id, std::uint64_t part_size) {
    {
      std::lock_guard parts_lock(parts_mutex);
      if (std::none_of(started.begin(), started.end(), [&](const auto& s) { return s.second == upload_id; }))
        started.emplace_back(object, upload_id);
    }
    json::Value fields = json::Value::object();
    fields["id"] = id;
    fields["remote_id"] = task.request.remote_id;
    fields["object"] = object;
    fields["upload_id"] = upload_id;
    fields["part_size"] = part_size;
    emit("mirror_upload_started", std::move(fields));
  };
  hooks.on_part_done = [&](const std::string&, const std::string& upload_id, const store::PartInfo& part) {
    json::Value fields = json::Value::object();
    fields["upload_id"] = upload_id;
    fields["number"] = part.number;
    fields["etag"] = part.etag;
    fields["size"] = part.size;
    fields["sha256"] = part.sha256;
    emit("mirror_part_uploaded", std::move(fields));
  };

  const auto began = std::chrono::steady_clock::now();
  std::chrono::seconds backoff{2};
  for (;;) {
    auto pushed = push_checkpoint(*m_options.store, task.request, m_crypto, hooks);
    bool retired;
    bool stopping;
    {
      // One lock for both: a retire() either came before (retired is set) or finds the
      // checkpoint in m_durable, so its remote copy is deleted exactly once.
      std::lock_guard lock(m_mutex);
      retired = m_active_retired;
      stopping = m_stop;
      if (pushed && !retired) m_durable[id] = task.request.remote_id;
    }
    if (pushed) {
      json::Value fields = json::Value::object();
      fields["id"] = id;
      fields["remote_id"] = task.request.remote_id;
      fields["step"] = pushed->step ? json::Value(*pushed->step) : json::Value();
      fields["bytes"] = pushed->size_bytes;
      fields["manifest"] = manifest_key(m_options.job, task.request.remote_id);
      fields["encrypted"] = !pushed->suite.empty();
      fields["upload_ms"] =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began).count();
      emit("mirror_durable", std::move(fields));
      if (retired) retire(id, task.request.remote_id, {});  // retired while the manifest went up
      return;
    }
    if (retired) {
      abort_uploads(id, started, "the checkpoint was retired");
      return;
    }
    if (stopping) return;  // the journalled uploads resume with the next supervisor
    json::Value fields = json::Value::object();
    fields["id"] = id;
    fields["remote_id"] = task.request.remote_id;
    fields["error"] = pushed.error().message;
    fields["retry_in_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(backoff).count();
    emit("mirror_failed", std::move(fields));
    // The next attempt continues this attempt's multipart uploads.
    for (const auto& [object, upload_id] : started)
      if (!hooks.resume.contains(object)) hooks.resume[object] = ResumableUpload{upload_id, {}};
    std::unique_lock lock(m_mutex);
    if (m_wake.wait_for(lock, backoff, [&] { return m_stop || m_active_retired; })) {
      if (m_active_retired) {
        lock.unlock();
        abort_uploads(id, started, "the checkpoint was retired");
      }
      return;
    }
    m_cancel = false;
    backoff = std::min<std::chrono::seconds>(backoff * 2, std::chrono::seconds(60));
  }
}

}  // namespace gpuhost::supervise
