// NoticeWatcher: one thread polling one cloud's metadata service (research/02 §1.1–1.7).
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "base/json.h"
#include "base/strings.h"
#include "platform/local_time.h"
#include "platform/system_info.h"
#include "supervise/notice.h"
#include "supervise/notice_body.h"

namespace gpuhost::supervise {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;

constexpr milliseconds k_backoff_cap = seconds(30);
constexpr std::size_t k_max_body = 64 * 1024;  // every notice body is a line or a small JSON document

// IMDSv2 (AWS) and hardened mode (Alibaba): a session token from PUT /latest/api/token.
// Src: AWS WindowsGuide instancedata-data-retrieval.html; Alibaba "Best practices for
// preemptible instances" (research/02 §1.1).
struct TokenScheme {
  std::string_view ttl_header;    // sent with the PUT
  std::string_view token_header;  // sent with every GET
};
constexpr TokenScheme k_aws_token{"X-aws-ec2-metadata-token-ttl-seconds", "X-aws-ec2-metadata-token"};
constexpr TokenScheme k_alibaba_token{"X-aliyun-ecs-metadata-token-ttl-seconds",
                                      "X-aliyun-ecs-metadata-token"};
constexpr seconds k_token_ttl{21600};   // the maximum both clouds accept, as in their samples
constexpr seconds k_token_margin{300};  // renewed this long before it would expire

// Azure: the first query switches Scheduled Events on and can take up to 2 min (azure-docs
// scheduled-events.md), so the first request may wait that long.
constexpr milliseconds k_azure_first_query = seconds(120);
constexpr std::string_view k_azure_events = "/metadata/scheduledevents?api-version=2019-08-01";
// The VM's own name, to skip events for other VMs of the same availability set or scale set.
// Src: learn.microsoft.com azure/virtual-machines/instance-metadata-service (compute/name).
constexpr std::string_view k_azure_vm_name =
    "/metadata/instance/compute/name?api-version=2017-08-01&format=text";

// GCP: a hanging GET returns when the value changes. The client gives up after 5 min and asks
// again; last_etag makes the server answer at once if the value changed in between. Src:
// research/02 §1.4; cloud.google.com/compute/docs/metadata/querying-metadata (wait_for_change,
// ETags).
constexpr milliseconds k_gcp_hanging_get = std::chrono::minutes(5);
constexpr std::string_view k_gcp_preempted = "/computeMetadata/v1/instance/preempted";

std::string default_host(NoticeSource cloud) {
  switch (cloud) {
    case NoticeSource::aws:
    case NoticeSource::azure: return "http://169.254.169.254";
    // metadata.google.internal is the same server, but resolving it off GCP can take seconds;
    // Google's own client (npm gcp-metadata HOST_ADDRESS) uses the address first.
    case NoticeSource::gcp: return "http://169.254.169.254";
    case NoticeSource::alibaba: return "http://100.100.100.200";
    // research/02 documents only the name for Tencent.
    case NoticeSource::tencent: return "http://metadata.tencentyun.com";
    case NoticeSource::volcengine: return "http://100.96.0.96";
    case NoticeSource::signal:
    case NoticeSource::drill:
    case NoticeSource::peer: break;
  }
  return {};
}

bool is_cloud(NoticeSource source) {
  return !default_host(source).empty();
}

Error http_status_error(std::string_view what, const net::HttpResponse& response) {
  return Error{ErrorCode::io_error, std::string(what) + ": HTTP " + std::to_string(response.status) +
                                        (response.reason.empty() ? "" : " " + response.reason)};
}

// What identifies a notice across polls: the same event seen again is not reported again.
std::string notice_key(const PreemptionNotice& notice) {
  std::string key = std::string(notice_source_name(notice.source)) + "|" +
                    (notice.kind == NoticeKind::advisory ? "advisory|" : "preemption|");
  // Azure's detail is "scheduledevents <type> EventId=<id> EventStatus=..."; the status and
  // NotBefore change as the event starts, the event does not.
  std::size_t status = notice.detail.find(" EventStatus=");
  return key + (notice.source == NoticeSource::azure ? notice.detail.substr(0, status) : notice.detail);
}

}  // namespace

struct NoticeWatcher::State {
  State(WatcherOptions o, WatcherCallbacks c) : options(std::move(o)), callbacks(std::move(c)) {
    base = options.endpoint.value_or(default_host(options.cloud));
    while (!base.empty() && base.back() == '/') base.pop_back();
  }

  void run();
  Result<std::vector<PreemptionNotice>> poll();
  Result<std::vector<PreemptionNotice>> poll_aws();
  Result<std::vector<PreemptionNotice>> poll_azure();
  Result<std::vector<PreemptionNotice>> poll_gcp();
  Result<std::vector<PreemptionNotice>> poll_alibaba();
  Result<std::vector<PreemptionNotice>> poll_simple(std::string_view path,
                                                    NoticeRead (*read)(std::string_view, seconds));
  Result<net::HttpResponse> fetch(std::string method, std::string_view path, net::HttpHeaders headers,
                                  milliseconds timeout, std::string body = {}) const;
  Result<net::HttpHeaders> token_headers(const TokenScheme& scheme, bool renew);
  Result<net::HttpResponse> get_with_token(const TokenScheme& scheme, std::string_view path);
  void report(const Result<std::vector<PreemptionNotice>>& polled);
  milliseconds next_delay(bool ok, SteadyClock::duration took);

  // Fixed after construction.
  const WatcherOptions options;
  const WatcherCallbacks callbacks;
  std::string base;  // scheme://host[:port] of the metadata service

  std::atomic<bool> stopping{false};  // also cancels the request in flight
  bool poll_soon = false;             // guarded by mutex: poll_now() was asked
  std::mutex mutex;
  std::condition_variable wake;  // with `mutex`: the destructor interrupts the sleep between polls
  std::thread thread;

  // Used by the watcher thread only.
  std::set<std::string> reported;
  bool troubled = false;
  int failures = 0;
  std::string token;  // empty: none yet, or IMDSv1 / normal mode
  bool token_unsupported = false;
  SteadyClock::time_point token_expiry{};
  bool azure_answered = false;
  std::optional<std::string> azure_vm_name;  // set (maybe empty) once IMDS answered
  std::string gcp_etag;
};

Result<net::HttpResponse> NoticeWatcher::State::fetch(std::string method, std::string_view path,
                                                      net::HttpHeaders headers, milliseconds timeout,
                                                      std::string body) const {
  net::HttpRequest request;
  request.method = std::move(method);
  request.url = base + std::string(path);
  request.headers = std::move(headers);
  request.body = std::move(body);
  request.timeout = timeout;
  request.connect_timeout = options.request_timeout;
  request.max_body_bytes = k_max_body;
  request.cancel = &stopping;
  return net::http_request(request);
}

Result<net::HttpHeaders> NoticeWatcher::State::token_headers(const TokenScheme& scheme, bool renew) {
  if (renew) {
    token.clear();
    token_unsupported = false;
  }
  if (token_unsupported) return net::HttpHeaders{};
  if (token.empty() || SteadyClock::now() >= token_expiry) {
    auto response = GPUHOST_TRY(fetch("PUT", "/latest/api/token",
                                      {{std::string(scheme.ttl_header), std::to_string(k_token_ttl.count())}},
                                      options.request_timeout));
    // No token API: an IMDSv1-only service (older or EC2-compatible metadata servers, proxies
    // that refuse PUT) answers 404 or 405, a service with tokens switched off 403. Plain GETs
    // still work wherever tokens are optional; where they are required the GET gets 401 and the
    // token is asked for again. A PUT that times out (container hop limit, research/02 §1.2) is
    // trouble, not a reason to drop tokens.
    if (response.status == 403 || response.status == 404 || response.status == 405) {
      token_unsupported = true;
      return net::HttpHeaders{};
    }
    std::string_view value = trim(response.body);
    if (response.status != 200)
      return std::unexpected(http_status_error("getting a metadata token", response));
    if (value.empty() || value.size() > 1024 || value.find_first_of("\r\n\t ") != std::string_view::npos)
      return make_error(ErrorCode::parse_error, "getting a metadata token: an unusable token");
    token = std::string(value);
    token_expiry = SteadyClock::now() + k_token_ttl - k_token_margin;
  }
  return net::HttpHeaders{{std::string(scheme.token_header), token}};
}

Result<net::HttpResponse> NoticeWatcher::State::get_with_token(const TokenScheme& scheme,
                                                               std::string_view path) {
  auto headers = GPUHOST_TRY(token_headers(scheme, false));
  auto response = GPUHOST_TRY(fetch("GET", path, std::move(headers), options.request_timeout));
  if (response.status == 401) {  // expired, revoked, or tokens became required: once more with a new one
    headers = GPUHOST_TRY(token_headers(scheme, true));
    response = GPUHOST_TRY(fetch("GET", path, std::move(headers), options.request_timeout));
  }
  return response;
}

Result<std::vector<PreemptionNotice>> NoticeWatcher::State::poll_aws() {
  // 200 = pending, 404 = nothing: AWS EC2 UG spot-instance-termination-notices,
  // rebalance-recommendations.
  std::vector<PreemptionNotice> found;
  struct Path {
    std::string_view path;
    NoticeRead (*read)(std::string_view);
  };
  for (Path p : {Path{"/latest/meta-data/spot/instance-action", &read_aws_instance_action},
                 Path{"/latest/meta-data/events/recommendations/rebalance", &read_aws_rebalance}}) {
    auto response = GPUHOST_TRY(get_with_token(k_aws_token, p.path));
    if (response.status == 404) continue;
    if (response.status != 200) return std::unexpected(http_status_error(p.path, response));
    if (auto notice = GPUHOST_TRY(p.read(response.body))) found.push_back(std::move(*notice));
  }
  return found;
}

Result<std::vector<PreemptionNotice>> NoticeWatcher::State::poll_alibaba() {
  auto response =
      GPUHOST_TRY(get_with_token(k_alibaba_token, "/latest/meta-data/instance/spot/termination-time"));
  std::vector<PreemptionNotice> found;
  if (response.status == 404) return found;
  if (response.status != 200) return std::unexpected(http_status_error("spot/termination-time", response));
  if (auto notice = GPUHOST_TRY(read_alibaba_termination_time(response.body)))
    found.push_back(std::move(*notice));
  return found;
}

Result<std::vector<PreemptionNotice>> NoticeWatcher::State::poll_simple(std::string_view path,
                                                                        NoticeRead (*read)(std::string_view,
                                                                                           seconds)) {
  auto response = GPUHOST_TRY(fetch("GET", path, {}, options.request_timeout));
  std::vector<PreemptionNotice> found;
  if (response.status == 404) return found;
  if (response.status != 200) return std::unexpected(http_status_error(path, response));
  seconds offset = platform::local_utc_offset(SystemClock::now());
  if (auto notice = GPUHOST_TRY(read(response.body, offset))) found.push_back(std::move(*notice));
  return found;
}

Result<std::vector<PreemptionNotice>> NoticeWatcher::State::poll_azure() {
  const net::HttpHeaders metadata{{"Metadata", "true"}};  // mandatory: azure-docs scheduled-events.md
  if (!azure_vm_name) {
    auto response = GPUHOST_TRY(fetch("GET", k_azure_vm_name, metadata, options.request_timeout));
    // Without a name every event counts as ours: a spurious save beats a missed preemption.
    azure_vm_name = response.status == 200 ? std::string(trim(response.body)) : std::string();
  }
  auto timeout =
      azure_answered ? options.request_timeout : std::max(options.request_timeout, k_azure_first_query);
  auto response = GPUHOST_TRY(fetch("GET", k_azure_events, metadata, timeout));
  if (response.status != 200) return std::unexpected(http_status_error("scheduledevents", response));
  azure_answered = true;
  std::vector<PreemptionNotice> found;
  if (auto notice =
          GPUHOST_TRY(read_azure_scheduled_events(response.body, SystemClock::now(), *azure_vm_name)))
    found.push_back(std::move(*notice));
  return found;
}

Result<std::vector<PreemptionNotice>> NoticeWatcher::State::poll_gcp() {
  const net::HttpHeaders flavor{{"Metadata-Flavor", "Google"}};  // mandatory: research/02 §1.1
  std::vector<PreemptionNotice> found;
  auto read = [&](const net::HttpResponse& response) -> Result<bool> {
    if (response.status != 200) return std::unexpected(http_status_error("instance/preempted", response));
    gcp_etag = response.header("ETag").value_or("");
    auto notice = GPUHOST_TRY(read_gcp_preempted(response.body, SystemClock::now()));
    if (notice) found.push_back(std::move(*notice));
    return notice.has_value();
  };
  // A plain GET first, so a value that is already TRUE (or turned TRUE while no hanging GET was
  // waiting) is seen at once.
  auto current = GPUHOST_TRY(fetch("GET", k_gcp_preempted, flavor, options.request_timeout));
  if (GPUHOST_TRY(read(current))) return found;
  std::string target = std::string(k_gcp_preempted) + "?wait_for_change=true";
  bool etag_is_safe = !gcp_etag.empty() && gcp_etag.find_first_of("&#% ") == std::string::npos;
  if (etag_is_safe) target += "&last_etag=" + gcp_etag;
  auto waited = fetch("GET", target, flavor, std::max(options.request_timeout, k_gcp_hanging_get));
  if (!waited && waited.error().code == ErrorCode::timeout) return found;  // nothing changed; ask again
  if (!waited) return std::unexpected(std::move(waited).error());
  if (auto changed = read(*waited); !changed) return std::unexpected(std::move(changed).error());
  return found;
}

Result<std::vector<PreemptionNotice>> NoticeWatcher::State::poll() {
  switch (options.cloud) {
    case NoticeSource::aws: return poll_aws();
    case NoticeSource::azure: return poll_azure();
    case NoticeSource::gcp: return poll_gcp();
    case NoticeSource::alibaba: return poll_alibaba();
    case NoticeSource::tencent:
      return poll_simple("/latest/meta-data/spot/termination-time", &read_tencent_termination_time);
    case NoticeSource::volcengine:
      return poll_simple("/latest/spot_instance_termination_time", &read_volcengine_termination_time);
    case NoticeSource::signal:
    case NoticeSource::drill:
    case NoticeSource::peer: break;
  }
  return std::vector<PreemptionNotice>{};
}

void NoticeWatcher::State::report(const Result<std::vector<PreemptionNotice>>& polled) {
  const char* cloud = notice_source_name(options.cloud);
  if (!polled) {
    if (!troubled && callbacks.on_trouble)
      callbacks.on_trouble(std::string(cloud) + " metadata service at " + base + ": " +
                           polled.error().message);
    troubled = true;
    return;
  }
  if (troubled && callbacks.on_trouble)
    callbacks.on_trouble(std::string(cloud) + " metadata service at " + base + " answers again");
  troubled = false;
  for (const PreemptionNotice& notice : *polled)
    if (reported.insert(notice_key(notice)).second && callbacks.on_notice) callbacks.on_notice(notice);
}

milliseconds NoticeWatcher::State::next_delay(bool ok, SteadyClock::duration took) {
  if (ok) {
    failures = 0;
    // A GCP hanging GET that waited is itself the pause; anything else waits out the interval.
    auto left = options.poll_interval - std::chrono::duration_cast<milliseconds>(took);
    return options.cloud == NoticeSource::gcp ? std::max(left, milliseconds(0)) : options.poll_interval;
  }
  milliseconds cap = std::max(k_backoff_cap, options.poll_interval);
  milliseconds delay = std::max(options.poll_interval, milliseconds(1));
  for (int i = 0; i < failures && delay < cap; ++i) delay *= 2;
  ++failures;
  return std::min(delay, cap);
}

void NoticeWatcher::State::run() {
  while (!stopping) {
    auto started = SteadyClock::now();
    auto polled = poll();
    if (stopping) break;  // a cancelled request is not trouble
    report(polled);
    milliseconds delay = next_delay(polled.has_value(), SteadyClock::now() - started);
    std::unique_lock lock(mutex);
    wake.wait_for(lock, delay, [&] { return stopping.load() || poll_soon; });
    poll_soon = false;
  }
}

NoticeWatcher::NoticeWatcher(WatcherOptions options, WatcherCallbacks callbacks)
    : m_state(std::make_unique<State>(std::move(options), std::move(callbacks))) {
  if (is_cloud(m_state->options.cloud))
    m_state->thread = std::thread([state = m_state.get()] { state->run(); });
}

NoticeWatcher::~NoticeWatcher() {
  {
    std::lock_guard lock(m_state->mutex);
    m_state->stopping = true;
  }
  m_state->wake.notify_all();
  if (m_state->thread.joinable()) m_state->thread.join();
}

void NoticeWatcher::poll_now() {
  {
    std::lock_guard lock(m_state->mutex);
    m_state->poll_soon = true;
  }
  m_state->wake.notify_all();
}

Result<void> NoticeWatcher::acknowledge(const PreemptionNotice& notice) {
  if (m_state->options.cloud != NoticeSource::azure || notice.source != NoticeSource::azure ||
      notice.event_id.empty())
    return {};
  // POST the same URL with {"StartRequests":[{"EventId":"<id>"}]}: azure-docs scheduled-events.md.
  json::Value start = json::Value::object();
  start["EventId"] = notice.event_id;
  json::Value body = json::Value::object();
  body["StartRequests"].push_back(std::move(start));
  net::HttpRequest request;
  request.method = "POST";
  request.url = m_state->base + std::string(k_azure_events);
  request.headers = {{"Metadata", "true"}, {"Content-Type", "application/json"}};
  request.body = json::dump(body);
  request.timeout = m_state->options.request_timeout;
  request.max_body_bytes = k_max_body;
  std::string what = "acknowledging Azure event " + notice.event_id;
  auto response = net::http_request(request);
  if (!response) return std::unexpected(with_context(std::move(response).error(), what));
  if (response->status < 200 || response->status > 299)
    return std::unexpected(http_status_error(what, *response));
  return {};
}

std::optional<NoticeSource> watched_cloud(std::string_view cloud_setting, std::string& detected_evidence) {
  std::string cloud(cloud_setting);
  if (cloud == "none") return std::nullopt;
  if (cloud == "auto") {
    platform::CloudDetection detection = platform::collect_system_info().cloud;
    detected_evidence = detection.evidence;
    cloud = platform::cloud_vendor_id(detection.cloud);
  }
  static constexpr std::pair<std::string_view, NoticeSource> k_sources[] = {
      {"aws", NoticeSource::aws},         {"azure", NoticeSource::azure},     {"gcp", NoticeSource::gcp},
      {"alibaba", NoticeSource::alibaba}, {"tencent", NoticeSource::tencent}, {"volcengine", NoticeSource::volcengine},
  };
  for (const auto& [id, source] : k_sources)
    if (cloud == id) return source;
  return std::nullopt;  // none detected, or a cloud without an in-guest notice (Huawei)
}

}  // namespace gpuhost::supervise
