// Parsers of the bodies each cloud's metadata service returns when a spot/preemptible machine is
// about to be taken away. Formats and lead times: shared/research/02 §1.1–1.7.
#include "supervise/notice.h"

#include <array>
#include <cctype>
#include <cstdio>

#include "base/json.h"
#include "base/strings.h"
#include "supervise/notice_body.h"

namespace gpuhost::supervise {
namespace {

using std::chrono::seconds;
using std::chrono::system_clock;
using TimePoint = system_clock::time_point;

constexpr std::size_t k_max_detail = 300;

Error malformed(std::string_view what, std::string_view body) {
  std::string shown(trim(body).substr(0, 80));
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  return Error{ErrorCode::parse_error, std::string(what) + ": unexpected answer \"" + shown + "\""};
}

std::string detail_of(std::string_view prefix, std::string_view body) {
  std::string text = std::string(prefix) + " " + std::string(trim(body));
  if (text.size() > k_max_detail) text = text.substr(0, k_max_detail) + "...";
  return text;
}

// Consumes exactly `digits` decimal digits from the front of `s`.
bool take_number(std::string_view& s, std::size_t digits, int& out) {
  if (s.size() < digits) return false;
  out = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    out = out * 10 + (s[i] - '0');
  }
  s.remove_prefix(digits);
  return true;
}

bool take_char(std::string_view& s, char c) {
  if (s.empty() || s.front() != c) return false;
  s.remove_prefix(1);
  return true;
}

// A civil date and time read as UTC; nullopt unless it is a real moment this century or next
// (a garbage year must not become a deadline in 1970 or 9999).
std::optional<TimePoint> civil_time(int year, int month, int day, int hour, int minute, int second) {
  using namespace std::chrono;
  year_month_day date{std::chrono::year(year), std::chrono::month(static_cast<unsigned>(month)),
                      std::chrono::day(static_cast<unsigned>(day))};
  if (year < 2000 || year > 2199 || !date.ok() || hour > 23 || minute > 59 || second > 60)
    return std::nullopt;
  return sys_days(date) + hours(hour) + minutes(minute) + seconds(second);
}

// "2017-09-18T08:22:00Z" (AWS, Alibaba), "2018-08-18 12:05:33" (Tencent, local time), with an
// optional fraction and an optional zone (Z or ±hh:mm / ±hhmm). Without a zone the time is
// `zoneless_offset` ahead of UTC.
std::optional<TimePoint> parse_timestamp(std::string_view s, seconds zoneless_offset) {
  s = trim(s);
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!take_number(s, 4, year) || !take_char(s, '-') || !take_number(s, 2, month) || !take_char(s, '-') ||
      !take_number(s, 2, day))
    return std::nullopt;
  if (!take_char(s, 'T') && !take_char(s, 't') && !take_char(s, ' ')) return std::nullopt;
  if (!take_number(s, 2, hour) || !take_char(s, ':') || !take_number(s, 2, minute) || !take_char(s, ':') ||
      !take_number(s, 2, second))
    return std::nullopt;
  if (take_char(s, '.') || take_char(s, ',')) {
    std::size_t digits = 0;
    while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
    if (digits == 0) return std::nullopt;
    s.remove_prefix(digits);
  }
  seconds offset = zoneless_offset;
  if (take_char(s, 'Z') || take_char(s, 'z')) {
    offset = seconds(0);
  } else if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
    int sign = s.front() == '-' ? -1 : 1;
    s.remove_prefix(1);
    int oh = 0, om = 0;
    if (!take_number(s, 2, oh)) return std::nullopt;
    take_char(s, ':');
    if (!take_number(s, 2, om) || oh > 23 || om > 59) return std::nullopt;
    offset = seconds(sign * (oh * 3600 + om * 60));
  }
  if (!s.empty()) return std::nullopt;
  auto t = civil_time(year, month, day, hour, minute, second);
  if (!t) return std::nullopt;
  return *t - offset;
}

// RFC 1123 / RFC 9110 IMF-fixdate, as Azure's NotBefore: "Mon, 19 Sep 2016 18:29:47 GMT".
std::optional<TimePoint> parse_rfc1123(std::string_view s) {
  static constexpr std::array<std::string_view, 12> k_months = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                                "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  auto fields = split_whitespace(trim(s));
  if (fields.size() == 6) fields.erase(fields.begin());  // the weekday, which adds nothing
  if (fields.size() != 5 || (fields[4] != "GMT" && fields[4] != "UTC")) return std::nullopt;
  auto day = parse_int(fields[0]);
  int month = 0;
  for (std::size_t i = 0; i < k_months.size(); ++i)
    if (iequals(fields[1], k_months[i])) month = static_cast<int>(i) + 1;
  auto year = parse_int(fields[2]);
  std::string_view clock = fields[3];
  int hour = 0, minute = 0, second = 0;
  if (!day || fields[0].size() > 2 || month == 0 || !year || fields[2].size() != 4 ||
      !take_number(clock, 2, hour) || !take_char(clock, ':') || !take_number(clock, 2, minute) ||
      !take_char(clock, ':') || !take_number(clock, 2, second) || !clock.empty())
    return std::nullopt;
  return civil_time(static_cast<int>(*year), month, static_cast<int>(*day), hour, minute, second);
}

std::string format_offset(seconds offset) {
  long long total = offset.count();
  char sign = total < 0 ? '-' : '+';
  if (total < 0) total = -total;
  char text[32];
  std::snprintf(text, sizeof text, "UTC%c%02lld:%02lld", sign, total / 3600, (total % 3600) / 60);
  return text;
}

// Alibaba, Tencent, Volcengine: the body is the termination time and nothing else.
NoticeRead read_termination_time(NoticeSource source, std::string_view what, std::string_view body,
                                 seconds zoneless_offset, bool local_time) {
  auto when = parse_timestamp(body, zoneless_offset);
  if (!when) return std::unexpected(malformed(what, body));
  PreemptionNotice notice;
  notice.source = source;
  notice.deadline = *when;
  notice.detail = detail_of(what, body);
  if (local_time) notice.detail += " (read as " + format_offset(zoneless_offset) + ")";
  return notice;
}

}  // namespace

const char* notice_source_name(NoticeSource source) {
  switch (source) {
    case NoticeSource::aws: return "aws";
    case NoticeSource::azure: return "azure";
    case NoticeSource::gcp: return "gcp";
    case NoticeSource::alibaba: return "alibaba";
    case NoticeSource::tencent: return "tencent";
    case NoticeSource::volcengine: return "volcengine";
    case NoticeSource::signal: return "signal";
    case NoticeSource::drill: return "drill";
    case NoticeSource::peer: return "peer";
  }
  return "unknown";
}

std::chrono::seconds default_lead_time(NoticeSource source) {
  switch (source) {
    case NoticeSource::aws: return seconds(120);      // AWS EC2 UG spot-instance-termination-notices
    case NoticeSource::azure: return seconds(30);     // azure-docs scheduled-events.md: Preempt >= 30 s
    case NoticeSource::gcp: return seconds(30);       // Compute API skipGuestOsShutdown: G2 -> G3 30 s
    case NoticeSource::alibaba: return seconds(300);  // Alibaba FAQ copy (unconfirmed), research/02 §1.5
    case NoticeSource::tencent: return seconds(30);   // not documented: assume the shortest cloud's
    case NoticeSource::volcengine:
      return seconds(300);  // volcengine.com/docs/6396/155893
    // Kubernetes terminationGracePeriodSeconds and Slurm KillWait both default to 30 s.
    case NoticeSource::signal: return seconds(30);
    case NoticeSource::drill: return seconds(30);
    case NoticeSource::peer: return seconds(30);  // a peer's notice carries its own deadline
  }
  return seconds(30);
}

NoticeRead read_aws_instance_action(std::string_view body) {
  // {"action": "terminate", "time": "2017-09-18T08:22:00Z"}, action in stop/terminate/hibernate.
  // The path only exists while an interruption is pending, so any well-formed action counts
  // (a future action name must not hide a real notice); the time must parse.
  constexpr std::string_view what = "spot/instance-action";
  auto value = json::parse(body);
  if (!value || !value->is_object()) return std::unexpected(malformed(what, body));
  const json::Value* action = value->find("action");
  const json::Value* time = value->find("time");
  if (!action || !action->is_string() || action->as_string().empty() || !time || !time->is_string())
    return std::unexpected(malformed(what, body));
  auto when = parse_timestamp(time->as_string(), seconds(0));
  if (!when) return std::unexpected(malformed(what, body));
  PreemptionNotice notice;
  notice.source = NoticeSource::aws;
  notice.deadline = *when;
  notice.detail = detail_of(what, json::dump(*value));
  return notice;
}

NoticeRead read_aws_rebalance(std::string_view body) {
  // {"noticeTime": "2020-10-27T08:22:00Z"}: doc_source/rebalance-recommendations.md.
  constexpr std::string_view what = "events/recommendations/rebalance";
  auto value = json::parse(body);
  if (!value || !value->is_object()) return std::unexpected(malformed(what, body));
  const json::Value* time = value->find("noticeTime");
  if (!time || !time->is_string()) return std::unexpected(malformed(what, body));
  auto when = parse_timestamp(time->as_string(), seconds(0));
  if (!when) return std::unexpected(malformed(what, body));
  PreemptionNotice notice;
  notice.source = NoticeSource::aws;
  notice.kind = NoticeKind::advisory;
  notice.deadline = *when + default_lead_time(NoticeSource::aws);
  notice.detail = detail_of(what, json::dump(*value));
  return notice;
}

NoticeRead read_azure_scheduled_events(std::string_view body, TimePoint now, std::string_view vm_name) {
  // {"DocumentIncarnation": 1, "Events": [{"EventId", "EventType", "ResourceType", "Resources",
  // "EventStatus", "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT", ...}]}: azure-docs
  // articles/virtual-machines/linux/scheduled-events.md. NotBefore is empty once an event has
  // Started.
  constexpr std::string_view what = "scheduledevents";
  auto value = json::parse(body);
  if (!value || !value->is_object()) return std::unexpected(malformed(what, body));
  const json::Value* events = value->find("Events");
  if (!events || !events->is_array()) return std::unexpected(malformed(what, body));

  std::optional<PreemptionNotice> best;
  for (const json::Value& event : events->items()) {
    if (!event.is_object()) return std::unexpected(malformed(what, body));
    std::string type = event.get_string("EventType");
    std::string id = event.get_string("EventId");
    bool stops = type == "Preempt" || type == "Terminate";
    bool restarts = type == "Reboot" || type == "Redeploy";
    if (!stops && !restarts) continue;  // Freeze: the VM pauses for seconds and keeps its memory
    if (id.empty()) return std::unexpected(malformed(what, body));
    if (!vm_name.empty()) {
      const json::Value* resources = event.find("Resources");
      bool listed = !resources || !resources->is_array() || resources->items().empty();
      if (resources && resources->is_array())
        for (const json::Value& r : resources->items())
          listed = listed || (r.is_string() && r.as_string() == vm_name);
      if (!listed) continue;  // another VM of the same availability set or scale set
    }
    std::string not_before = event.get_string("NotBefore");
    TimePoint deadline = now;
    if (!trim(not_before).empty()) {
      auto when = parse_rfc1123(not_before);
      if (!when) return std::unexpected(malformed(what, body));
      deadline = *when;
    }
    PreemptionNotice notice;
    notice.source = NoticeSource::azure;
    notice.kind = stops ? NoticeKind::preemption : NoticeKind::advisory;
    notice.deadline = deadline;
    notice.detail =
        detail_of(what, type + " EventId=" + id + " EventStatus=" + event.get_string("EventStatus") +
                            " NotBefore=" + (not_before.empty() ? "(none)" : not_before));
    if (stops) notice.event_id = id;
    bool better = !best || (stops && best->kind == NoticeKind::advisory) ||
                  (notice.kind == best->kind && notice.deadline < best->deadline);
    if (better) best = std::move(notice);
  }
  return best;
}

NoticeRead read_gcp_preempted(std::string_view body, TimePoint now) {
  // instance/preempted is "TRUE" or "FALSE"; a preempted VM has 30 s from the ACPI soft off.
  constexpr std::string_view what = "instance/preempted";
  std::string_view value = trim(body);
  if (value == "FALSE") return std::optional<PreemptionNotice>();
  if (value != "TRUE") return std::unexpected(malformed(what, body));
  PreemptionNotice notice;
  notice.source = NoticeSource::gcp;
  notice.deadline = now + default_lead_time(NoticeSource::gcp);
  notice.detail = detail_of(what, value);
  return notice;
}

NoticeRead read_alibaba_termination_time(std::string_view body) {
  // UTC, "2015-01-05T18:02:00Z": Alibaba "Best practices for preemptible instances".
  return read_termination_time(NoticeSource::alibaba, "instance/spot/termination-time", body, seconds(0),
                               false);
}

NoticeRead read_tencent_termination_time(std::string_view body, seconds utc_offset) {
  // "2018-08-18 12:05:33", the guest's local time: tencentcloud.com/document/product/213/32487.
  return read_termination_time(NoticeSource::tencent, "spot/termination-time", body, utc_offset, true);
}

NoticeRead read_volcengine_termination_time(std::string_view body, seconds utc_offset) {
  // "a time string" (volcengine.com/docs/6396/155893, format not shown): ISO-8601 with a zone,
  // or Tencent-style local time without one.
  if (trim(body).empty()) return std::optional<PreemptionNotice>();
  // A time with a zone reads the same whatever offset a zoneless one would get.
  bool zoned = parse_timestamp(body, seconds(0)) == parse_timestamp(body, seconds(1));
  return read_termination_time(NoticeSource::volcengine, "spot_instance_termination_time", body, utc_offset,
                               !zoned);
}

std::optional<PreemptionNotice> parse_aws_instance_action(std::string_view body) {
  return read_aws_instance_action(body).value_or(std::nullopt);
}

std::optional<PreemptionNotice> parse_aws_rebalance(std::string_view body) {
  return read_aws_rebalance(body).value_or(std::nullopt);
}

std::optional<PreemptionNotice> parse_azure_scheduled_events(std::string_view body, TimePoint now,
                                                             std::string_view vm_name) {
  return read_azure_scheduled_events(body, now, vm_name).value_or(std::nullopt);
}

std::optional<PreemptionNotice> parse_gcp_preempted(std::string_view body, TimePoint now) {
  return read_gcp_preempted(body, now).value_or(std::nullopt);
}

std::optional<PreemptionNotice> parse_alibaba_termination_time(std::string_view body) {
  return read_alibaba_termination_time(body).value_or(std::nullopt);
}

std::optional<PreemptionNotice> parse_tencent_termination_time(std::string_view body, seconds utc_offset) {
  return read_tencent_termination_time(body, utc_offset).value_or(std::nullopt);
}

std::optional<PreemptionNotice> parse_volcengine_termination_time(std::string_view body, seconds utc_offset) {
  return read_volcengine_termination_time(body, utc_offset).value_or(std::nullopt);
}

}  // namespace gpuhost::supervise
