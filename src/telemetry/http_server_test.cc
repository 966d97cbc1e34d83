#include "telemetry/http_server.h"

#include <gtest/gtest.h>

#include "net/http_client.h"
#include "platform/socket.h"
#include "telemetry/exporter.h"

namespace gpuhost::telemetry {
namespace {

AccessPolicy local_policy(std::string token = "") {
  return AccessPolicy{allowed_host_names("127.0.0.1", {}), 9808, std::move(token)};
}

RequestHead get(std::string host, HeaderList extra = {}) {
  RequestHead r{"GET", "/metrics", "HTTP/1.1", {}};
  if (!host.empty()) r.headers.emplace_back("Host", std::move(host));
  for (auto& h : extra) r.headers.push_back(std::move(h));
  return r;
}

TEST(RequestHead, ParsesRequestLineAndHeaders) {
  auto r =
      parse_request_head("GET /metrics?x=1 HTTP/1.1\r\nHost: localhost:9808\r\nAccept:  text/plain \r\n");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->method, "GET");
  EXPECT_EQ(r->path(), "/metrics");
  EXPECT_EQ(r->header("host"), "localhost:9808");
  EXPECT_EQ(r->header("ACCEPT"), "text/plain");
  EXPECT_FALSE(r->header("Authorization"));
}

TEST(RequestHead, RejectsMalformedHeads) {
  EXPECT_FALSE(parse_request_head(""));
  EXPECT_FALSE(parse_request_head("GET /metrics\r\n"));
  EXPECT_FALSE(parse_request_head("GET /metrics HTTP/2.0\r\n"));
  EXPECT_FALSE(parse_request_head("GET http://evil/ HTTP/1.1\r\n"));
  EXPECT_FALSE(parse_request_head("G(T / HTTP/1.1\r\n"));
  EXPECT_FALSE(parse_request_head("GET / HTTP/1.1\r\nno colon\r\n"));
  EXPECT_FALSE(parse_request_head("GET / HTTP/1.1\r\nA: b\r\n folded\r\n"));
  EXPECT_FALSE(parse_request_head(std::string_view("GET / HTTP/1.1\r\nA: b\0c\r\n", 24)));
}

TEST(AccessPolicy, AcceptsLoopbackNamesOnTheBoundPort) {
  const auto policy = local_policy();
  EXPECT_EQ(check_access(get("127.0.0.1:9808"), policy), AccessVerdict::allowed);
  EXPECT_EQ(check_access(get("LOCALHOST:9808"), policy), AccessVerdict::allowed);
  EXPECT_EQ(check_access(get("[::1]:9808"), policy), AccessVerdict::allowed);
  EXPECT_EQ(check_access(get("localhost"), policy), AccessVerdict::allowed);
}

TEST(AccessPolicy, RefusesForeignHostsAndOtherPorts) {
  const auto policy = local_policy();
  EXPECT_EQ(check_access(get("attacker.example:9808"), policy), AccessVerdict::foreign_host);
  EXPECT_EQ(check_access(get("localhost.attacker.example"), policy), AccessVerdict::foreign_host);
  EXPECT_EQ(check_access(get("localhost:80"), policy), AccessVerdict::foreign_host);
  EXPECT_EQ(check_access(get(""), policy), AccessVerdict::bad_request);
  EXPECT_EQ(check_access(get("[::1"), policy), AccessVerdict::bad_request);
  EXPECT_EQ(check_access(get("localhost:99999"), policy), AccessVerdict::bad_request);
}

TEST(AccessPolicy, BindAddressAndExtraNamesAreAllowed) {
  AccessPolicy policy{allowed_host_names("10.0.0.5", {"node1"}), 9808, "s3cret"};
  const HeaderList auth = {{"Authorization", "Bearer s3cret"}};
  EXPECT_EQ(check_access(get("10.0.0.5:9808", auth), policy), AccessVerdict::allowed);
  EXPECT_EQ(check_access(get("node1:9808", auth), policy), AccessVerdict::allowed);
  EXPECT_EQ(check_access(get("10.0.0.6:9808", auth), policy), AccessVerdict::foreign_host);
  // A wildcard bind adds no name of its own.
  auto wildcard = allowed_host_names("0.0.0.0", {});
  EXPECT_EQ(std::find(wildcard.begin(), wildcard.end(), "0.0.0.0"), wildcard.end());
}

TEST(AccessPolicy, RequiresTheBearerTokenWhenSet) {
  const auto policy = local_policy("s3cret");
  EXPECT_EQ(check_access(get("localhost:9808"), policy), AccessVerdict::unauthorized);
  EXPECT_EQ(check_access(get("localhost:9808", {{"Authorization", "Bearer wrong"}}), policy),
            AccessVerdict::unauthorized);
  EXPECT_EQ(check_access(get("localhost:9808", {{"Authorization", "Bearer s3cre"}}), policy),
            AccessVerdict::unauthorized);
  EXPECT_EQ(check_access(get("localhost:9808", {{"Authorization", "Basic s3cret"}}), policy),
            AccessVerdict::unauthorized);
  EXPECT_EQ(check_access(get("localhost:9808", {{"Authorization", "bearer s3cret"}}), policy),
            AccessVerdict::allowed);
}

TEST(AnswerRequest, NeverEchoesTheTokenOrTheHost) {
  const auto policy = local_policy("s3cret");
  const RequestHandler handler = [](const RequestHead&) { return Response{200, "text/plain", "ok", {}}; };
  auto reply = answer_request("GET /metrics HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer s3cret",
                              policy, handler);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 403 "));
  EXPECT_EQ(reply.find("evil.example"), std::string::npos);
  EXPECT_EQ(reply.find("s3cret"), std::string::npos);
  reply = answer_request("GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer guess", policy,
                         handler);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 401 "));
  EXPECT_EQ(reply.find("guess"), std::string::npos);
  reply = answer_request("GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer s3cret", policy,
                         handler);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200 "));
  EXPECT_TRUE(reply.ends_with("\r\n\r\nok"));
}

TEST(AnswerRequest, RoutesMetricsLandingPageAndErrors) {
  gpu::GpuSnapshot fake;
  fake.available = false;
  fake.error = gpu::NvmlIssue{12, "NVML_ERROR_LIBRARY_NOT_FOUND", "not found"};
  MetricsExporter exporter("h", [&] { return fake; });
  const RequestHandler handler = [&](const RequestHead& r) { return exporter.handle(r); };
  const auto policy = local_policy();
  auto metrics = answer_request("GET /metrics HTTP/1.1\r\nHost: localhost", policy, handler);
  EXPECT_TRUE(metrics.starts_with("HTTP/1.1 200 "));
  EXPECT_NE(metrics.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos);
  EXPECT_NE(metrics.find("gpuhost_nvml_up{error=\"NVML_ERROR_LIBRARY_NOT_FOUND\"} 0\n"), std::string::npos);
  EXPECT_NE(metrics.find("gpuhost_scrape_duration_seconds "), std::string::npos);
  auto landing = answer_request("GET / HTTP/1.1\r\nHost: localhost", policy, handler);
  EXPECT_NE(landing.find("href=\"metrics\""), std::string::npos);
  EXPECT_TRUE(
      answer_request("GET /nope HTTP/1.1\r\nHost: localhost", policy, handler).starts_with("HTTP/1.1 404 "));
  auto post = answer_request("POST /metrics HTTP/1.1\r\nHost: localhost", policy, handler);
  EXPECT_TRUE(post.starts_with("HTTP/1.1 405 "));
  EXPECT_NE(post.find("Allow: GET, HEAD\r\n"), std::string::npos);
  auto head = answer_request("HEAD /metrics HTTP/1.1\r\nHost: localhost", policy, handler);
  EXPECT_TRUE(head.ends_with("\r\n\r\n"));
  EXPECT_TRUE(answer_request("garbage", policy, handler).starts_with("HTTP/1.1 400 "));
}

TEST(HttpServer, ServesOverLoopbackAndStops) {
  HttpServerOptions options;
  options.access.allowed_hosts = allowed_host_names("127.0.0.1", {});
  auto server = HttpServer::start(options, [](const RequestHead& r) {
    return Response{200, "text/plain", "path=" + r.path(), {}};
  });
  ASSERT_TRUE(server) << server.error().message;
  const auto port = (*server)->port();
  ASSERT_NE(port, 0);
  net::HttpRequest request;
  request.url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  request.timeout = std::chrono::seconds(20);
  auto response = net::http_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "path=/metrics");
  request.headers = {{"Host", "rebind.example"}};
  response = net::http_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 403);
  (*server)->stop();
}

TEST(HttpServer, AnswersOversizedHeadsWith431) {
  HttpServerOptions options;
  options.max_head_bytes = 1024;
  auto server = HttpServer::start(options, [](const RequestHead&) { return Response{}; });
  ASSERT_TRUE(server);
  net::HttpRequest request;
  request.url = "http://127.0.0.1:" + std::to_string((*server)->port()) + "/";
  request.headers = {{"X-Filler", std::string(4096, 'a')}};
  request.timeout = std::chrono::seconds(20);
  auto response = net::http_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 431);
}

TEST(HttpServer, DropsAConnectionWhoseHeadNeverCompletes) {
  HttpServerOptions options;
  options.head_timeout = std::chrono::milliseconds(300);
  auto server = HttpServer::start(options, [](const RequestHead&) { return Response{}; });
  ASSERT_TRUE(server);
  auto stream = platform::TcpStream::connect("127.0.0.1", (*server)->port(), std::chrono::seconds(10));
  ASSERT_TRUE(stream) << stream.error().message;
  const std::string partial = "GET / HTTP/1.1\r\nHost: localhost\r\n";  // never the empty line
  ASSERT_TRUE(stream->send_all(partial.data(), partial.size()));
  auto readable = stream->wait_readable(std::chrono::seconds(30));
  ASSERT_TRUE(readable && *readable);
  char byte = 0;
  auto got = stream->receive_some(&byte, 1);
  // Closed without an answer (a reset reads as an error, which is as good).
  EXPECT_TRUE(!got || *got == 0);
}

TEST(HttpServer, AnswersBeyondTheConnectionCapWith503) {
  HttpServerOptions options;
  options.max_connections = 1;
  auto server = HttpServer::start(options, [](const RequestHead&) { return Response{}; });
  ASSERT_TRUE(server);
  // Holds the only slot: connected, silent. Accepts are in order, so it is taken first.
  auto idle = platform::TcpStream::connect("127.0.0.1", (*server)->port(), std::chrono::seconds(10));
  ASSERT_TRUE(idle);
  net::HttpRequest request;
  request.url = "http://127.0.0.1:" + std::to_string((*server)->port()) + "/";
  request.timeout = std::chrono::seconds(20);
  auto response = net::http_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 503);
}

}  // namespace
}  // namespace gpuhost::telemetry
