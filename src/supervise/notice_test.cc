#include "supervise/notice.h"

#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include <atomic>

#include "net/fake_http_server.h"
#include "platform/local_time.h"
#include "platform/socket.h"
#include "supervise/notice_body.h"

namespace gpuhost::supervise {
namespace {

using namespace std::chrono;
using namespace std::chrono_literals;
using net::test_support::CannedResponse;
using net::test_support::FakeHttpServer;
using net::test_support::ReceivedRequest;

system_clock::time_point utc(int y, unsigned mo, unsigned d, int h, int mi, int s) {
  return sys_days(year(y) / month(mo) / day(d)) + hours(h) + minutes(mi) + seconds(s);
}

// The documented bodies (research/02 §1.1, §1.3).
constexpr std::string_view k_aws_action = R"({"action": "terminate", "time": "2017-09-18T08:22:00Z"})";
constexpr std::string_view k_azure_preempt = R"({
  "DocumentIncarnation": 3,
  "Events": [
    {
      "EventId": "602d9444-d2cd-49c7-8624-8643e7171297",
      "EventType": "Preempt",
      "ResourceType": "VirtualMachine",
      "Resources": ["vm-1"],
      "EventStatus": "Scheduled",
      "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
      "Description": "",
      "EventSource": "Platform"
    }
  ]
})";

std::string azure_events(std::string_view type, std::string_view id, std::string_view vm,
                         std::string_view not_before = "Mon, 19 Sep 2016 18:29:47 GMT") {
  return R"({"DocumentIncarnation":1,"Events":[{"EventId":")" + std::string(id) + R"(","EventType":")" +
         std::string(type) + R"(","ResourceType":"VirtualMachine","Resources":[")" + std::string(vm) +
         R"("],"EventStatus":"Scheduled","NotBefore":")" + std::string(not_before) + R"("}]})";
}

// ---- parsers ----

TEST(NoticeParsers, AwsInstanceActionGivesTheDocumentedTime) {
  auto notice = parse_aws_instance_action(k_aws_action);
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->source, NoticeSource::aws);
  EXPECT_EQ(notice->kind, NoticeKind::preemption);
  EXPECT_EQ(notice->deadline, utc(2017, 9, 18, 8, 22, 0));
  EXPECT_EQ(notice->detail, R"(spot/instance-action {"action":"terminate","time":"2017-09-18T08:22:00Z"})");
  EXPECT_TRUE(notice->event_id.empty());
  for (const char* action : {"stop", "hibernate"}) {
    auto other = parse_aws_instance_action(R"({"action":")" + std::string(action) +
                                           R"(","time":"2017-09-18T08:22:00Z"})");
    ASSERT_TRUE(other) << action;
    EXPECT_EQ(other->kind, NoticeKind::preemption);
  }
}

TEST(NoticeParsers, AwsGarbageIsNeverANotice) {
  for (std::string_view body :
       {"", "<html>404</html>", "[]", R"({"action":"terminate"})", R"({"action":"terminate","time":"soon"})",
        R"({"action":"","time":"2017-09-18T08:22:00Z"})",
        R"({"action":"terminate","time":"0000-00-00T00:00:00Z"})",
        R"({"action":"terminate","time":"2017-13-18T08:22:00Z"})",
        R"({"action":"terminate","time":"2017-02-30T08:22:00Z"})",
        R"({"action":"terminate","time":"2017-09-18T08:22:00Zjunk"})", R"({"action":1,"time":2})"}) {
    EXPECT_FALSE(parse_aws_instance_action(body)) << body;
    auto strict = read_aws_instance_action(body);
    ASSERT_FALSE(strict) << body;
    EXPECT_EQ(strict.error().code, ErrorCode::parse_error);
  }
}

TEST(NoticeParsers, TimestampsMayCarryFractionsAndOffsets) {
  auto notice = parse_aws_instance_action(R"({"action":"stop","time":"2017-09-18T10:22:00.250+02:00"})");
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->deadline, utc(2017, 9, 18, 8, 22, 0));
}

TEST(NoticeParsers, AwsRebalanceIsAnAdvisory) {
  auto notice = parse_aws_rebalance(R"({"noticeTime": "2020-10-27T08:22:00Z"})");
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->kind, NoticeKind::advisory);
  EXPECT_EQ(notice->deadline, utc(2020, 10, 27, 8, 24, 0)) << "the recommendation + the 2 min of a notice";
  EXPECT_FALSE(parse_aws_rebalance(R"({"noticeTime": ""})"));
  EXPECT_FALSE(parse_aws_rebalance("noticeTime"));
}

TEST(NoticeParsers, AzurePreemptGivesNotBeforeAndTheEventId) {
  auto now = utc(2016, 9, 19, 18, 29, 0);
  auto notice = parse_azure_scheduled_events(k_azure_preempt, now);
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->source, NoticeSource::azure);
  EXPECT_EQ(notice->kind, NoticeKind::preemption);
  EXPECT_EQ(notice->deadline, utc(2016, 9, 19, 18, 29, 47));
  EXPECT_EQ(notice->event_id, "602d9444-d2cd-49c7-8624-8643e7171297");
  EXPECT_NE(notice->detail.find("Preempt EventId=602d9444"), std::string::npos) << notice->detail;

  auto terminate = parse_azure_scheduled_events(azure_events("Terminate", "T-1", "vm-1"), now);
  ASSERT_TRUE(terminate);
  EXPECT_EQ(terminate->kind, NoticeKind::preemption);
  EXPECT_EQ(terminate->event_id, "T-1");
}

TEST(NoticeParsers, AzureWithoutEventsOrWithFreezeOnlyIsNoNotice) {
  auto now = system_clock::now();
  for (const std::string& body :
       {std::string(R"({"DocumentIncarnation": 0, "Events": []})"), azure_events("Freeze", "F-1", "vm-1")}) {
    EXPECT_FALSE(parse_azure_scheduled_events(body, now)) << body;
    auto strict = read_azure_scheduled_events(body, now, "");
    ASSERT_TRUE(strict) << "a valid document, not trouble: " << body;
    EXPECT_FALSE(*strict);
  }
}

TEST(NoticeParsers, AzureRebootIsAnAdvisoryThatCannotBeAcknowledged) {
  auto now = system_clock::now();
  auto reboot = parse_azure_scheduled_events(azure_events("Reboot", "R-1", "vm-1"), now);
  ASSERT_TRUE(reboot);
  EXPECT_EQ(reboot->kind, NoticeKind::advisory);
  EXPECT_TRUE(reboot->event_id.empty());
  EXPECT_NE(reboot->detail.find("R-1"), std::string::npos);

  // A preemption outranks an earlier advisory.
  std::string both =
      R"({"Events":[{"EventId":"R-1","EventType":"Redeploy","NotBefore":"Mon, 19 Sep 2016 18:00:00 GMT"},
                                   {"EventId":"P-1","EventType":"Preempt","NotBefore":"Mon, 19 Sep 2016 18:29:47 GMT"}]})";
  auto notice = parse_azure_scheduled_events(both, now);
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->event_id, "P-1");
}

TEST(NoticeParsers, AzureStartedEventWithoutNotBeforeIsDueNow) {
  auto now = utc(2024, 5, 1, 12, 0, 0);
  auto notice = parse_azure_scheduled_events(azure_events("Preempt", "P-1", "vm-1", ""), now);
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->deadline, now);
}

TEST(NoticeParsers, AzureSkipsEventsForOtherVms) {
  auto now = system_clock::now();
  EXPECT_FALSE(parse_azure_scheduled_events(k_azure_preempt, now, "vm-2"));
  EXPECT_TRUE(parse_azure_scheduled_events(k_azure_preempt, now, "vm-1"));
  EXPECT_TRUE(parse_azure_scheduled_events(k_azure_preempt, now, "")) << "no name known: every event counts";
}

TEST(NoticeParsers, AzureGarbageIsNeverANotice) {
  auto now = system_clock::now();
  for (const std::string& body :
       {std::string(""), std::string("{"), std::string(R"({"Events": {}})"), std::string(R"({"events": []})"),
        std::string(R"({"Events":[{"EventType":"Preempt","NotBefore":""}]})"),
        std::string(R"({"Events":[7]})"), azure_events("Preempt", "P-1", "vm-1", "tomorrow"),
        azure_events("Preempt", "P-1", "vm-1", "Mon, 19 Foo 2016 18:29:47 GMT"),
        azure_events("Preempt", "P-1", "vm-1", "Mon, 19 Sep 2016 18:29:47 PST")}) {
    EXPECT_FALSE(parse_azure_scheduled_events(body, now)) << body;
    EXPECT_FALSE(read_azure_scheduled_events(body, now, "")) << body;
  }
}

TEST(NoticeParsers, GcpTrueIsANoticeThirtySecondsAway) {
  auto now = utc(2024, 5, 1, 12, 0, 0);
  auto notice = parse_gcp_preempted("TRUE", now);
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->source, NoticeSource::gcp);
  EXPECT_EQ(notice->deadline, now + 30s);
  EXPECT_TRUE(parse_gcp_preempted("TRUE\n", now));
  EXPECT_FALSE(parse_gcp_preempted("FALSE", now));
  ASSERT_TRUE(read_gcp_preempted("FALSE", now));
  for (std::string_view body : {"", "true", "yes", "<html>TRUE</html>"}) {
    EXPECT_FALSE(parse_gcp_preempted(body, now)) << body;
    EXPECT_FALSE(read_gcp_preempted(body, now)) << body;
  }
}

TEST(NoticeParsers, AlibabaTerminationTimeIsUtc) {
  auto notice = parse_alibaba_termination_time("2015-01-05T18:02:00Z");
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->source, NoticeSource::alibaba);
  EXPECT_EQ(notice->deadline, utc(2015, 1, 5, 18, 2, 0));
  for (std::string_view body : {"", "2015-01-05", "18:02:00", "<Error>NotFound</Error>", "2015-01-05T18:02Z"})
    EXPECT_FALSE(parse_alibaba_termination_time(body)) << body;
}

TEST(NoticeParsers, TencentLocalTimeUsesTheGivenOffset) {
  auto china = parse_tencent_termination_time("2018-08-18 12:05:33", 8h);
  ASSERT_TRUE(china);
  EXPECT_EQ(china->source, NoticeSource::tencent);
  EXPECT_EQ(china->deadline, utc(2018, 8, 18, 4, 5, 33));
  EXPECT_NE(china->detail.find("UTC+08:00"), std::string::npos) << china->detail;
  auto utc_host = parse_tencent_termination_time("2018-08-18 12:05:33\n", 0s);
  ASSERT_TRUE(utc_host);
  EXPECT_EQ(utc_host->deadline, utc(2018, 8, 18, 12, 5, 33));
  auto west = parse_tencent_termination_time("2018-08-18 12:05:33", -(5h + 30min));
  ASSERT_TRUE(west);
  EXPECT_EQ(west->deadline, utc(2018, 8, 18, 17, 35, 33));
  for (std::string_view body : {"", "2018-08-18", "2018/08/18 12:05:33", "2018-08-18 25:05:33", "not found"})
    EXPECT_FALSE(parse_tencent_termination_time(body, 8h)) << body;
}

TEST(NoticeParsers, VolcengineAcceptsUtcAndLocalTimes) {
  auto zoned = parse_volcengine_termination_time("2023-06-01T10:00:00Z", 8h);
  ASSERT_TRUE(zoned);
  EXPECT_EQ(zoned->deadline, utc(2023, 6, 1, 10, 0, 0)) << "a zone overrides the local offset";
  auto local = parse_volcengine_termination_time("2023-06-01 10:00:00", 8h);
  ASSERT_TRUE(local);
  EXPECT_EQ(local->deadline, utc(2023, 6, 1, 2, 0, 0));
  EXPECT_FALSE(parse_volcengine_termination_time("", 8h));
  ASSERT_TRUE(read_volcengine_termination_time("", 8h)) << "an empty answer is no notice, not trouble";
  EXPECT_FALSE(read_volcengine_termination_time("garbage", 8h));
}

TEST(NoticeParsers, LeadTimesAndNamesFollowTheResearch) {
  EXPECT_EQ(default_lead_time(NoticeSource::aws), 120s);
  EXPECT_EQ(default_lead_time(NoticeSource::azure), 30s);
  EXPECT_EQ(default_lead_time(NoticeSource::gcp), 30s);
  EXPECT_EQ(default_lead_time(NoticeSource::alibaba), 300s);
  EXPECT_EQ(default_lead_time(NoticeSource::tencent), 30s);
  EXPECT_EQ(default_lead_time(NoticeSource::volcengine), 300s);
  EXPECT_STREQ(notice_source_name(NoticeSource::volcengine), "volcengine");
  EXPECT_STREQ(notice_source_name(NoticeSource::drill), "drill");
}

// ---- the watcher against a fake metadata server ----

// Collects what the watcher reports, from its thread.
class Recorder {
 public:
  WatcherCallbacks callbacks() {
    return {[this](const PreemptionNotice& n) {
              std::lock_guard lock(m_mutex);
              m_notices.push_back(n);
            },
            [this](std::string_view message) {
              std::lock_guard lock(m_mutex);
              m_troubles.emplace_back(message);
            }};
  }
  std::vector<PreemptionNotice> notices() const {
    std::lock_guard lock(m_mutex);
    return m_notices;
  }
  std::vector<std::string> troubles() const {
    std::lock_guard lock(m_mutex);
    return m_troubles;
  }

 private:
  mutable std::mutex m_mutex;
  std::vector<PreemptionNotice> m_notices;
  std::vector<std::string> m_troubles;
};

// Waits (generously: this bounds a broken test, it is not a timing assertion) for `done`.
template <typename Predicate>
bool eventually(Predicate done) {
  auto give_up = steady_clock::now() + 20s;
  while (!done()) {
    if (steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

CannedResponse respond(int status, std::string body = {}) {
  CannedResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

CannedResponse hang() {
  CannedResponse r;
  r.hang = true;
  return r;
}

WatcherOptions options_for(NoticeSource cloud, const FakeHttpServer& server) {
  WatcherOptions o;
  o.cloud = cloud;
  o.endpoint = server.url() + "/";
  o.poll_interval = 20ms;
  o.request_timeout = 5s;
  return o;
}

std::size_t count(const std::vector<ReceivedRequest>& requests, std::string_view method,
                  std::string_view target) {
  return static_cast<std::size_t>(
      std::count_if(requests.begin(), requests.end(),
                    [&](const ReceivedRequest& r) { return r.method == method && r.target == target; }));
}

constexpr std::string_view k_aws_action_path = "/latest/meta-data/spot/instance-action";
constexpr std::string_view k_aws_rebalance_path = "/latest/meta-data/events/recommendations/rebalance";

TEST(NoticeWatcher, AwsReportsTheNoticeOnceAndSendsTheToken) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.method == "PUT" && r.target == "/latest/api/token") return respond(200, "AQAEAtoken==");
    if (r.header("X-aws-ec2-metadata-token") != "AQAEAtoken==") return respond(401);
    if (r.target == k_aws_action_path) return respond(200, std::string(k_aws_action));
    return respond(404);
  });
  Recorder recorder;
  {
    NoticeWatcher watcher(options_for(NoticeSource::aws, server), recorder.callbacks());
    ASSERT_TRUE(eventually([&] { return count(server.requests(), "GET", k_aws_action_path) >= 4; }));
  }
  auto notices = recorder.notices();
  ASSERT_EQ(notices.size(), 1u) << "polled again and again, reported once";
  EXPECT_EQ(notices[0].deadline, utc(2017, 9, 18, 8, 22, 0));
  EXPECT_TRUE(recorder.troubles().empty());
  auto requests = server.requests();
  EXPECT_EQ(count(requests, "PUT", "/latest/api/token"), 1u) << "the token is kept while it is valid";
  EXPECT_EQ(requests[0].header("X-aws-ec2-metadata-token-ttl-seconds"), "21600");
  EXPECT_GE(count(requests, "GET", k_aws_rebalance_path), 1u);
  for (const auto& r : requests)
    if (r.method == "GET") {
      EXPECT_EQ(r.header("X-aws-ec2-metadata-token"), "AQAEAtoken==") << r.target;
    }
}

TEST(NoticeWatcher, PollNowAsksAtOnceInsteadOfAtTheNextInterval) {
  // A SIGTERM arrives while the watcher sleeps out a long interval: the spot notice that came
  // with it is read now, not an hour later.
  std::atomic<bool> noticed{false};
  FakeHttpServer server([&](const ReceivedRequest& r) {
    if (r.method == "PUT") return respond(200, "t");
    if (r.target == k_aws_action_path && noticed) return respond(200, std::string(k_aws_action));
    return respond(404);
  });
  Recorder recorder;
  WatcherOptions options = options_for(NoticeSource::aws, server);
  options.poll_interval = std::chrono::hours(1);
  NoticeWatcher watcher(options, recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return count(server.requests(), "GET", k_aws_action_path) >= 1; }));
  noticed = true;
  watcher.poll_now();
  ASSERT_TRUE(eventually([&] { return !recorder.notices().empty(); }));
  EXPECT_EQ(recorder.notices()[0].deadline, utc(2017, 9, 18, 8, 22, 0));
  EXPECT_EQ(count(server.requests(), "GET", k_aws_action_path), 2u);
}

TEST(NoticeWatcher, AwsReportsTheRebalanceAdvisory) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.method == "PUT") return respond(200, "t");
    if (r.target == k_aws_rebalance_path) return respond(200, R"({"noticeTime": "2020-10-27T08:22:00Z"})");
    return respond(404);
  });
  Recorder recorder;
  NoticeWatcher watcher(options_for(NoticeSource::aws, server), recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return !recorder.notices().empty(); }));
  EXPECT_EQ(recorder.notices()[0].kind, NoticeKind::advisory);
}

TEST(NoticeWatcher, AwsFallsBackToImdsV1WithoutATokenApi) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.method == "PUT") return respond(405);
    if (r.target == k_aws_action_path) return respond(200, std::string(k_aws_action));
    return respond(404);
  });
  Recorder recorder;
  {
    NoticeWatcher watcher(options_for(NoticeSource::aws, server), recorder.callbacks());
    ASSERT_TRUE(eventually([&] { return count(server.requests(), "GET", k_aws_action_path) >= 2; }));
  }
  EXPECT_EQ(recorder.notices().size(), 1u);
  EXPECT_TRUE(recorder.troubles().empty());
  auto requests = server.requests();
  EXPECT_EQ(count(requests, "PUT", "/latest/api/token"), 1u);
  for (const auto& r : requests)
    if (r.method == "GET") {
      EXPECT_FALSE(r.header("X-aws-ec2-metadata-token"));
    }
}

TEST(NoticeWatcher, AwsTakesANewTokenAfter401) {
  std::atomic<int> tokens{0};
  FakeHttpServer server([&](const ReceivedRequest& r) {
    if (r.method == "PUT") return respond(200, "token-" + std::to_string(++tokens));
    if (r.header("X-aws-ec2-metadata-token") != "token-2") return respond(401);  // the first one "expired"
    if (r.target == k_aws_action_path) return respond(200, std::string(k_aws_action));
    return respond(404);
  });
  Recorder recorder;
  NoticeWatcher watcher(options_for(NoticeSource::aws, server), recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return !recorder.notices().empty(); }));
  EXPECT_EQ(tokens.load(), 2);
  EXPECT_TRUE(recorder.troubles().empty());
}

TEST(NoticeWatcher, ServerErrorsAreTroubleOnceThenTheNoticeArrives) {
  std::atomic<int> calls{0};
  FakeHttpServer server([&](const ReceivedRequest&) {
    if (++calls <= 3) return respond(500, "oops");
    return respond(200, "2023-06-01T10:00:00Z");
  });
  Recorder recorder;
  NoticeWatcher watcher(options_for(NoticeSource::volcengine, server), recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return !recorder.notices().empty(); }));
  auto troubles = recorder.troubles();
  ASSERT_EQ(troubles.size(), 2u) << "three failures, one report; then one recovery";
  EXPECT_NE(troubles[0].find("HTTP 500"), std::string::npos) << troubles[0];
  EXPECT_NE(troubles[1].find("answers again"), std::string::npos) << troubles[1];
  EXPECT_EQ(recorder.notices()[0].deadline, utc(2023, 6, 1, 10, 0, 0));
  EXPECT_EQ(server.requests()[0].target, "/latest/spot_instance_termination_time");
}

TEST(NoticeWatcher, GarbageIsTroubleNeverANotice) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.method == "PUT") return respond(404);  // normal mode: no token API
    return respond(200, "<html><body>Welcome to nginx!</body></html>");
  });
  Recorder recorder;
  {
    NoticeWatcher watcher(options_for(NoticeSource::alibaba, server), recorder.callbacks());
    ASSERT_TRUE(eventually([&] {
      return count(server.requests(), "GET", "/latest/meta-data/instance/spot/termination-time") >= 3;
    }));
  }
  EXPECT_TRUE(recorder.notices().empty());
  auto troubles = recorder.troubles();
  ASSERT_EQ(troubles.size(), 1u);
  EXPECT_NE(troubles[0].find("unexpected answer"), std::string::npos) << troubles[0];
}

TEST(NoticeWatcher, RefusedConnectionIsTrouble) {
  std::uint16_t port = 0;
  {
    auto listener = platform::TcpListener::listen("127.0.0.1", 0);
    ASSERT_TRUE(listener);
    port = listener->port();
  }
  WatcherOptions options;
  options.cloud = NoticeSource::tencent;
  options.endpoint = "http://127.0.0.1:" + std::to_string(port);
  options.poll_interval = 20ms;
  Recorder recorder;
  NoticeWatcher watcher(options, recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return !recorder.troubles().empty(); }));
  EXPECT_TRUE(recorder.notices().empty());
  EXPECT_NE(recorder.troubles()[0].find("tencent metadata service"), std::string::npos)
      << recorder.troubles()[0];
}

TEST(NoticeWatcher, SlowServerTimesOutAsTrouble) {
  FakeHttpServer server([](const ReceivedRequest&) { return hang(); });
  WatcherOptions options = options_for(NoticeSource::tencent, server);
  options.request_timeout = 200ms;
  Recorder recorder;
  NoticeWatcher watcher(options, recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return !recorder.troubles().empty(); }));
  EXPECT_NE(recorder.troubles()[0].find("timed out"), std::string::npos) << recorder.troubles()[0];
  EXPECT_TRUE(recorder.notices().empty());
}

TEST(NoticeWatcher, TencentReadsLocalTime) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.target == "/latest/meta-data/spot/termination-time") return respond(200, "2018-08-18 12:05:33");
    return respond(404);
  });
  Recorder recorder;
  NoticeWatcher watcher(options_for(NoticeSource::tencent, server), recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return !recorder.notices().empty(); }));
  auto offset = platform::local_utc_offset(system_clock::now());
  EXPECT_EQ(recorder.notices()[0].deadline, utc(2018, 8, 18, 12, 5, 33) - offset);
}

TEST(NoticeWatcher, AlibabaUsesTheHardenedModeToken) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.method == "PUT" && r.target == "/latest/api/token" &&
        r.header("X-aliyun-ecs-metadata-token-ttl-seconds") == "21600")
      return respond(200, "aliyun-token");
    if (r.header("X-aliyun-ecs-metadata-token") != "aliyun-token") return respond(403);
    if (r.target == "/latest/meta-data/instance/spot/termination-time")
      return respond(200, "2015-01-05T18:02:00Z");
    return respond(404);
  });
  Recorder recorder;
  NoticeWatcher watcher(options_for(NoticeSource::alibaba, server), recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return !recorder.notices().empty(); }));
  EXPECT_EQ(recorder.notices()[0].deadline, utc(2015, 1, 5, 18, 2, 0));
  EXPECT_TRUE(recorder.troubles().empty());
}

constexpr std::string_view k_azure_events_path = "/metadata/scheduledevents?api-version=2019-08-01";

TEST(NoticeWatcher, AzureReportsPreemptAndAcknowledgesIt) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.header("Metadata") != "true") return respond(400);
    if (r.target.starts_with("/metadata/instance/compute/name")) return respond(200, "vm-1");
    if (r.target != k_azure_events_path) return respond(404);
    if (r.method == "POST") return respond(200);
    // Another VM's preemption in the same scale set comes first and must be skipped.
    return respond(200, R"({"DocumentIncarnation":2,"Events":[
      {"EventId":"other","EventType":"Preempt","Resources":["vm-7"],"EventStatus":"Scheduled","NotBefore":"Mon, 19 Sep 2016 18:00:00 GMT"},
      {"EventId":"602d9444-d2cd-49c7-8624-8643e7171297","EventType":"Preempt","Resources":["vm-1"],"EventStatus":"Scheduled","NotBefore":"Mon, 19 Sep 2016 18:29:47 GMT"}]})");
  });
  Recorder recorder;
  NoticeWatcher watcher(options_for(NoticeSource::azure, server), recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return !recorder.notices().empty(); }));
  PreemptionNotice notice = recorder.notices()[0];
  EXPECT_EQ(notice.event_id, "602d9444-d2cd-49c7-8624-8643e7171297");
  EXPECT_EQ(notice.deadline, utc(2016, 9, 19, 18, 29, 47));

  auto acknowledged = watcher.acknowledge(notice);
  ASSERT_TRUE(acknowledged) << acknowledged.error().message;
  auto requests = server.requests();
  auto post = std::find_if(requests.begin(), requests.end(),
                           [](const ReceivedRequest& r) { return r.method == "POST"; });
  ASSERT_NE(post, requests.end());
  EXPECT_EQ(post->target, k_azure_events_path);
  EXPECT_EQ(post->header("Metadata"), "true");
  EXPECT_EQ(post->body, R"({"StartRequests":[{"EventId":"602d9444-d2cd-49c7-8624-8643e7171297"}]})");
  EXPECT_TRUE(recorder.troubles().empty());
}

TEST(NoticeWatcher, AzureAcknowledgeReportsARefusal) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.method == "POST") return respond(400);
    return respond(200, R"({"Events":[]})");
  });
  Recorder recorder;
  NoticeWatcher watcher(options_for(NoticeSource::azure, server), recorder.callbacks());
  PreemptionNotice notice;
  notice.source = NoticeSource::azure;
  notice.event_id = "gone";
  auto acknowledged = watcher.acknowledge(notice);
  ASSERT_FALSE(acknowledged);
  EXPECT_NE(acknowledged.error().message.find("HTTP 400"), std::string::npos) << acknowledged.error().message;
}

TEST(NoticeWatcher, AzureFreezeIsNeitherNoticeNorTrouble) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.target != k_azure_events_path) return respond(404);
    return respond(200, azure_events("Freeze", "F-1", "vm-1"));
  });
  Recorder recorder;
  {
    NoticeWatcher watcher(options_for(NoticeSource::azure, server), recorder.callbacks());
    ASSERT_TRUE(eventually([&] { return count(server.requests(), "GET", k_azure_events_path) >= 3; }));
  }
  EXPECT_TRUE(recorder.notices().empty());
  EXPECT_TRUE(recorder.troubles().empty()) << recorder.troubles()[0];
}

constexpr std::string_view k_gcp_path = "/computeMetadata/v1/instance/preempted";

TEST(NoticeWatcher, GcpSeesAnAlreadyTrueValue) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.header("Metadata-Flavor") != "Google") return respond(403);
    if (r.target == k_gcp_path) return respond(200, "TRUE");
    return hang();
  });
  Recorder recorder;
  NoticeWatcher watcher(options_for(NoticeSource::gcp, server), recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return !recorder.notices().empty(); }));
  EXPECT_EQ(recorder.notices()[0].source, NoticeSource::gcp);
  EXPECT_TRUE(recorder.troubles().empty());
}

TEST(NoticeWatcher, GcpHangingGetDeliversTheChange) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.header("Metadata-Flavor") != "Google") return respond(403);
    if (r.target == k_gcp_path) {
      auto response = respond(200, "FALSE");
      response.headers.emplace_back("ETag", "411261ca6c9e654e");
      return response;
    }
    if (r.target == std::string(k_gcp_path) + "?wait_for_change=true&last_etag=411261ca6c9e654e")
      return respond(200, "TRUE");
    return respond(404);
  });
  Recorder recorder;
  NoticeWatcher watcher(options_for(NoticeSource::gcp, server), recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return !recorder.notices().empty(); }));
  EXPECT_TRUE(recorder.troubles().empty()) << recorder.troubles()[0];
}

TEST(NoticeWatcher, HangingGetDoesNotHoldTheDestructor) {
  FakeHttpServer server([](const ReceivedRequest& r) {
    if (r.target == k_gcp_path) return respond(200, "FALSE");
    return hang();  // wait_for_change: nothing changes
  });
  Recorder recorder;
  auto watcher =
      std::make_unique<NoticeWatcher>(options_for(NoticeSource::gcp, server), recorder.callbacks());
  ASSERT_TRUE(eventually([&] { return server.requests().size() >= 2; }));
  auto start = steady_clock::now();
  watcher.reset();
  // The hanging GET may wait 5 minutes; being cancelled takes ~100 ms. 10 s only guards against
  // a broken cancel, with room for a loaded machine.
  EXPECT_LT(steady_clock::now() - start, 10s);
  EXPECT_TRUE(recorder.notices().empty());
  EXPECT_TRUE(recorder.troubles().empty()) << "waiting is normal for GCP";
}

TEST(NoticeWatcher, AcknowledgeIsANoOpOutsideAzure) {
  FakeHttpServer server([](const ReceivedRequest&) { return respond(404); });
  Recorder recorder;
  NoticeWatcher watcher(options_for(NoticeSource::aws, server), recorder.callbacks());
  PreemptionNotice notice;
  notice.source = NoticeSource::aws;
  notice.event_id = "x";
  EXPECT_TRUE(watcher.acknowledge(notice));
  for (const auto& r : server.requests()) EXPECT_NE(r.method, "POST");
}

TEST(NoticeWatcher, NonCloudSourceStartsNothing) {
  Recorder recorder;
  WatcherOptions options;
  options.cloud = NoticeSource::signal;
  NoticeWatcher watcher(options, recorder.callbacks());
  PreemptionNotice notice;
  EXPECT_TRUE(watcher.acknowledge(notice));
}

}  // namespace
}  // namespace gpuhost::supervise
