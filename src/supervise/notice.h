#pragma once

#include <atomic>
#include <deque>
#include <mutex>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "net/http_client.h"

namespace gpuhost::supervise {

// Where a preemption notice comes from.
// `peer`: another node of a multi-node job had a notice (peer_channel.h); its deadline is that
// node's.
enum class NoticeSource { aws, azure, gcp, alibaba, tencent, volcengine, signal, drill, peer };

[[nodiscard]] const char* notice_source_name(NoticeSource source);  // "aws", ..., "signal", "drill", "peer"

enum class NoticeKind {
  preemption,  // the machine (or the job) will be taken away at `deadline`: save, then stop
  advisory,    // AWS rebalance recommendation: save now, keep running
};

struct PreemptionNotice {
  NoticeSource source = NoticeSource::drill;
  NoticeKind kind = NoticeKind::preemption;
  // When the machine goes away. Clouds that give a time (AWS, Azure NotBefore, Alibaba, Tencent,
  // Volcengine) set it from the response; GCP and signals get now + the documented lead time.
  // Advisories: the earliest the machine could go (AWS rebalance: its noticeTime + the 2 min an
  // interruption notice gives; Azure Reboot/Redeploy: NotBefore).
  std::chrono::system_clock::time_point deadline;
  std::string detail;  // what was seen, for the journal: `spot/instance-action {"action":"terminate",...}`
  // Azure EventId of a Preempt/Terminate event, to acknowledge; empty elsewhere (also for Azure
  // advisories: acknowledging a Reboot/Redeploy would start it early).
  std::string event_id;
  // When the notice was first seen, if not just now: a peer's notice carries the moment the node
  // that got it saw it, so a checkpoint the ranks wrote for it before the relay arrived still
  // counts as the save (the ranks agree on one save step; a second request would make another).
  std::optional<std::chrono::system_clock::time_point> noticed;
};

// Parsers of the exact bodies each cloud returns (research/02 §1.1), pure and unit-tested.
// nullopt = "no notice" (including malformed bodies: garbage is never a false notice).
[[nodiscard]] std::optional<PreemptionNotice> parse_aws_instance_action(std::string_view body);
[[nodiscard]] std::optional<PreemptionNotice> parse_aws_rebalance(std::string_view body);
// Preempt (and Terminate) events among Azure Scheduled Events; `now` fills a missing NotBefore.
// Reboot and Redeploy events (the VM restarts, the job dies) are advisories; Freeze (a pause of
// seconds, memory kept) is ignored. A Preempt/Terminate beats an advisory; the earliest wins.
// `vm_name`, when non-empty, skips events whose Resources do not list it: VMs of an availability
// set or scale set see each other's events (Microsoft's sample checks `this_host in Resources`).
[[nodiscard]] std::optional<PreemptionNotice> parse_azure_scheduled_events(
    std::string_view body, std::chrono::system_clock::time_point now, std::string_view vm_name = {});
[[nodiscard]] std::optional<PreemptionNotice> parse_gcp_preempted(std::string_view body,
                                                                  std::chrono::system_clock::time_point now);
[[nodiscard]] std::optional<PreemptionNotice> parse_alibaba_termination_time(std::string_view body);
// Tencent's "2018-08-18 12:05:33" is the guest's local time; `utc_offset` is the host's offset
// from UTC at that moment (platform time zone), passed in so tests can pin it.
[[nodiscard]] std::optional<PreemptionNotice> parse_tencent_termination_time(std::string_view body,
                                                                             std::chrono::seconds utc_offset);
[[nodiscard]] std::optional<PreemptionNotice> parse_volcengine_termination_time(
    std::string_view body, std::chrono::seconds utc_offset);

struct WatcherOptions {
  NoticeSource cloud = NoticeSource::aws;  // one of the six clouds
  // Replaces the scheme://host[:port] of the cloud's metadata service (tests point it at
  // 127.0.0.1). Paths stay as the cloud defines them.
  std::optional<std::string> endpoint;
  std::chrono::milliseconds poll_interval{std::chrono::seconds(5)};  // AWS recommends 5 s
  std::chrono::milliseconds request_timeout{std::chrono::seconds(2)};
};

// Reports a notice (called from the watcher's thread, at most once per distinct notice) and
// transport trouble (once per change between "reachable" and "unreachable", not per poll: the
// first failure, then "answers again" when it recovers). A 200 with a malformed body counts as
// trouble, never as a notice. Both are called from the watcher's thread only, never after the
// destructor returns.
struct WatcherCallbacks {
  std::function<void(const PreemptionNotice&)> on_notice;
  std::function<void(std::string_view message)> on_trouble;
};

// A background thread that polls one cloud's metadata service (research/02 §1.1): AWS with an
// IMDSv2 token (IMDSv1 when the token API is absent) plus the rebalance advisory, Azure
// Scheduled Events from the start (the service switches off after 24 h unqueried), GCP's
// hanging GET, Alibaba with a hardened-mode token, Tencent and Volcengine. Endpoint errors, 5xx,
// hangs and garbage never produce a notice; they back off (doubling, capped at 30 s or the poll
// interval if longer) and are reported through on_trouble.
// Owns its thread: the destructor stops and joins it (a request in flight is cancelled within
// ~100 ms; only a connect attempt can hold it, for at most request_timeout).
class NoticeWatcher {
 public:
  NoticeWatcher(WatcherOptions options, WatcherCallbacks callbacks);
  NoticeWatcher(const NoticeWatcher&) = delete;
  NoticeWatcher& operator=(const NoticeWatcher&) = delete;
  ~NoticeWatcher();

  // Azure: POST StartRequests for the event so the platform proceeds now instead of waiting
  // out NotBefore (call once the checkpoint is durable). Other clouds, or a notice without an
  // event_id: no-op success. Thread-safe; blocks for up to request_timeout.
  [[nodiscard]] Result<void> acknowledge(const PreemptionNotice& notice);

  // Asks the metadata service now instead of at the next interval: a SIGTERM may be the
  // preemption (Kubernetes drains a spot node's pods), and the cloud's notice holds the real
  // deadline. Thread-safe; returns at once.
  void poll_now();

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

// The documented lead time of each source (AWS 2 min, Azure/GCP 30 s, Alibaba 5 min, Tencent
// unknown → 30 s assumed, Volcengine 5 min); used when a notice carries no time of its own.
[[nodiscard]] std::chrono::seconds default_lead_time(NoticeSource source);

// Which metadata service to watch for the job's `cloud` setting: none for "none", the named
// cloud, or for "auto" the one this host's DMI data names (its evidence in `detected_evidence`).
// nullopt also for a cloud without an in-guest notice (Huawei).
[[nodiscard]] std::optional<NoticeSource> watched_cloud(std::string_view cloud_setting, std::string& detected_evidence);

// Notices arrive on watcher threads; the supervisor loop takes them.
class NoticeInbox {
 public:
  void push(PreemptionNotice notice) {
    std::lock_guard lock(m_mutex);
    m_notices.push_back(std::move(notice));
  }
  std::optional<PreemptionNotice> pop() {
    std::lock_guard lock(m_mutex);
    if (m_notices.empty()) return std::nullopt;
    PreemptionNotice notice = std::move(m_notices.front());
    m_notices.pop_front();
    return notice;
  }

 private:
  std::mutex m_mutex;
  std::deque<PreemptionNotice> m_notices;  // guarded by m_mutex
};

}  // namespace gpuhost::supervise
