#include "net/http_client.h"

#include <gtest/gtest.h>

#include "net/fake_http_server.h"
#include "platform/socket.h"

namespace gpuhost::net {
namespace {

using test_support::CannedResponse;
using test_support::FakeHttpServer;
using test_support::ReceivedRequest;
using namespace std::chrono_literals;

CannedResponse respond(int status, std::string body,
                       CannedResponse::Framing framing = CannedResponse::Framing::content_length) {
  CannedResponse r;
  r.status = status;
  r.body = std::move(body);
  r.framing = framing;
  return r;
}

CannedResponse raw(std::string bytes) {
  CannedResponse r;
  r.raw = std::move(bytes);
  return r;
}

HttpRequest get(const FakeHttpServer& server, std::string target = "/") {
  HttpRequest request;
  request.url = server.url() + target;
  return request;
}

TEST(ParseUrl, SplitsHostPortAndTarget) {
  auto url = parse_url("http://169.254.169.254/latest/api/token");
  ASSERT_TRUE(url) << url.error().message;
  EXPECT_EQ(url->host, "169.254.169.254");
  EXPECT_EQ(url->port, 80);
  EXPECT_EQ(url->target, "/latest/api/token");

  url = parse_url("HTTP://127.0.0.1:8080/metadata/scheduledevents?api-version=2019-08-01#frag");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->port, 8080);
  EXPECT_EQ(url->target, "/metadata/scheduledevents?api-version=2019-08-01");

  url = parse_url("http://[fd00:ec2::254]:81");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "fd00:ec2::254");
  EXPECT_EQ(url->port, 81);
  EXPECT_EQ(url->target, "/");

  url = parse_url("http://metadata.tencentyun.com?x=1");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->target, "/?x=1");
}

TEST(ParseUrl, RejectsWhatItCannotSpeak) {
  EXPECT_EQ(parse_url("https://example.com/").error().code, ErrorCode::unsupported);
  for (const char* bad : {"169.254.169.254/latest", "ftp://host/", "http://", "http://:80/", "http://host:0/",
                          "http://host:70000/", "http://host:8o/", "http://host:/", "http://[::1/",
                          "http://user@host/", "http://host/a b", "http://host/a\r\nX: y"}) {
    auto url = parse_url(bad);
    ASSERT_FALSE(url) << bad;
    EXPECT_EQ(url.error().code, ErrorCode::invalid_argument) << bad;
  }
}

TEST(HttpClient, GetReturnsStatusHeadersAndBody) {
  FakeHttpServer server([](const ReceivedRequest&) {
    auto r = respond(200, "i-1234567890abcdef0");
    r.headers.emplace_back("X-Custom", "value");
    return r;
  });
  ASSERT_NE(server.port(), 0);
  auto response = http_request(get(server, "/latest/meta-data/instance-id?x=1"));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->reason, "OK");
  EXPECT_EQ(response->body, "i-1234567890abcdef0");
  EXPECT_EQ(response->header("x-custom"), "value");
  EXPECT_EQ(response->header("CONTENT-LENGTH"), "19");
  EXPECT_FALSE(response->header("Missing"));

  auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].method, "GET");
  EXPECT_EQ(seen[0].target, "/latest/meta-data/instance-id?x=1");
  EXPECT_EQ(seen[0].header("Host"), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(seen[0].header("Connection"), "close");
  EXPECT_FALSE(seen[0].header("Content-Length")) << "a GET without a body announces none";
}

TEST(HttpClient, ErrorStatusIsAResponseNotAnError) {
  FakeHttpServer server([](const ReceivedRequest&) { return respond(404, "not found"); });
  auto response = http_request(get(server, "/latest/meta-data/spot/instance-action"));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 404);
  EXPECT_EQ(response->reason, "Not Found");
  EXPECT_EQ(response->body, "not found");
}

TEST(HttpClient, DecodesAChunkedBody) {
  FakeHttpServer server([](const ReceivedRequest&) {
    return respond(200, R"({"Events":[{"EventId":"A"}]})", CannedResponse::Framing::chunked);
  });
  auto response = http_request(get(server));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->body, R"({"Events":[{"EventId":"A"}]})");
}

TEST(HttpClient, ReadsToTheEndOfTheConnectionWithoutALength) {
  FakeHttpServer server(
      [](const ReceivedRequest&) { return respond(200, "TRUE", CannedResponse::Framing::until_close); });
  auto response = http_request(get(server));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->body, "TRUE");
}

TEST(HttpClient, SkipsAnInterimResponse) {
  FakeHttpServer server([](const ReceivedRequest&) {
    return raw("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  });
  auto response = http_request(get(server));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "ok");
}

TEST(HttpClient, AcceptsBareLineFeedsAndAnEmptyReason) {
  FakeHttpServer server(
      [](const ReceivedRequest&) { return raw("HTTP/1.0 200\nContent-Length: 4\n\nTRUE"); });
  auto response = http_request(get(server));
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->reason, "");
  EXPECT_EQ(response->body, "TRUE");
}

TEST(HttpClient, ServerThatNeverAnswersTimesOut) {
  FakeHttpServer server([](const ReceivedRequest&) {
    CannedResponse r;
    r.hang = true;
    return r;
  });
  HttpRequest request = get(server);
  request.timeout = 300ms;
  auto start = std::chrono::steady_clock::now();
  auto response = http_request(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::timeout) << response.error().message;
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms) << "gave up before the deadline";
}

TEST(HttpClient, CancelFlagEndsAWaitEarly) {
  std::atomic<bool> cancel{false};
  FakeHttpServer server([&](const ReceivedRequest&) {
    cancel = true;  // the request is in flight: cancel it
    CannedResponse r;
    r.hang = true;
    return r;
  });
  HttpRequest request = get(server);
  request.timeout = std::chrono::minutes(10);  // the test would hang if cancelling did not work
  request.cancel = &cancel;
  auto response = http_request(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::timeout);
  EXPECT_NE(response.error().message.find("cancelled"), std::string::npos) << response.error().message;
}

TEST(HttpClient, GarbageIsAParseError) {
  for (const char* garbage :
       {"SSH-2.0-OpenSSH_9.2\r\n\r\n", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        "HTTP/1.1 2x0 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXX0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nabc", "", "HTTP/1.1 200 OK\r\nX: y"}) {
    FakeHttpServer server([&](const ReceivedRequest&) { return raw(garbage); });
    auto response = http_request(get(server));
    ASSERT_FALSE(response) << "accepted: " << garbage;
    EXPECT_EQ(response.error().code, ErrorCode::parse_error) << garbage << " -> " << response.error().message;
  }
}

TEST(HttpClient, EndlessHeaderIsRefusedAtTheLimit) {
  FakeHttpServer server([](const ReceivedRequest&) {
    return raw("HTTP/1.1 200 OK\r\n" + std::string(100 * 1024, 'x') + "\r\n\r\n");
  });
  auto response = http_request(get(server));
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::parse_error) << response.error().message;
}

TEST(HttpClient, BodyCutShortIsAnIoError) {
  FakeHttpServer server(
      [](const ReceivedRequest&) { return raw("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"); });
  auto response = http_request(get(server));
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::io_error) << response.error().message;
}

TEST(HttpClient, BodyOverTheLimitIsRefusedWhateverTheFraming) {
  for (auto framing : {CannedResponse::Framing::content_length, CannedResponse::Framing::chunked,
                       CannedResponse::Framing::until_close}) {
    FakeHttpServer server(
        [&](const ReceivedRequest&) { return respond(200, std::string(2000, 'a'), framing); });
    HttpRequest request = get(server);
    request.max_body_bytes = 1000;
    auto response = http_request(request);
    ASSERT_FALSE(response) << static_cast<int>(framing);
    EXPECT_EQ(response.error().code, ErrorCode::parse_error) << response.error().message;

    request.max_body_bytes = 2000;
    response = http_request(request);
    ASSERT_TRUE(response) << response.error().message;
    EXPECT_EQ(response->body.size(), 2000u);
  }
}

TEST(HttpClient, RefusedConnectionIsUnavailable) {
  std::uint16_t port = 0;
  {
    auto listener = platform::TcpListener::listen("127.0.0.1", 0);
    ASSERT_TRUE(listener) << listener.error().message;
    port = listener->port();
  }  // closed: nothing listens there now
  HttpRequest request;
  request.url = "http://127.0.0.1:" + std::to_string(port) + "/latest/api/token";
  auto response = http_request(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::unavailable) << response.error().message;
}

TEST(HttpClient, PutSendsItsBodyAndHeaders) {
  FakeHttpServer server([](const ReceivedRequest& r) { return respond(200, "token-for-" + r.body); });
  HttpRequest request = get(server, "/latest/api/token");
  request.method = "PUT";
  request.headers = {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}, {"Content-Type", "application/json"}};
  const std::string body = R"({"StartRequests":[{"EventId":"x"}]})";
  request.body = body;
  auto response = http_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->body, "token-for-" + body);

  request.body.clear();
  ASSERT_TRUE(http_request(request));

  auto seen = server.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "PUT");
  EXPECT_EQ(seen[0].target, "/latest/api/token");
  EXPECT_EQ(seen[0].header("X-aws-ec2-metadata-token-ttl-seconds"), "21600");
  EXPECT_EQ(seen[0].header("Content-Type"), "application/json");
  EXPECT_EQ(seen[0].header("Content-Length"), std::to_string(body.size()));
  EXPECT_EQ(seen[0].body, body);
  EXPECT_EQ(seen[1].header("Content-Length"), "0") << "an empty PUT still says its length";
  EXPECT_EQ(seen[1].body, "");
}

TEST(HttpClient, RefusesHeadersThatWouldSplitTheRequest) {
  FakeHttpServer server([](const ReceivedRequest&) { return respond(200, ""); });
  HttpRequest request = get(server);
  request.headers = {{"Metadata", "true\r\nX-Injected: 1"}};
  auto response = http_request(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::invalid_argument);
  request.headers = {{"Bad Name", "x"}};
  EXPECT_FALSE(http_request(request));
  EXPECT_TRUE(server.requests().empty());
}

}  // namespace
}  // namespace gpuhost::net
