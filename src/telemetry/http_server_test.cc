#include "telemetry/http_server.h"

#include <atomic>
#include <thread>

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

TEST(RequestHead, DecodesQueryParameters) {
  RequestHead r{
      "GET", "/api/job/a/series/train%2Fbox_loss?width=640&x=step&name=a+b%21&flag&bad=%zz", "HTTP/1.1", {}};
  EXPECT_EQ(r.path(), "/api/job/a/series/train%2Fbox_loss");
  EXPECT_EQ(r.query("width"), "640");
  EXPECT_EQ(r.query("name"), "a b!");
  EXPECT_EQ(r.query("flag"), "");
  EXPECT_EQ(r.query("bad"), "");  // a malformed escape reads as empty, never as raw text
  EXPECT_FALSE(r.query("missing"));
  EXPECT_EQ(percent_decode("train%2Fbox_loss"), "train/box_loss");
  EXPECT_FALSE(percent_decode("%4"));
}

TEST(AccessPolicy, AcceptsTheTokenFromTheBrowserCookieOrOnceInTheQuery) {
  const auto policy = local_policy("s3cret;=");
  const std::string cookie = token_cookie_name(9808);
  EXPECT_EQ(cookie, "gpuhost_token_9808");
  EXPECT_EQ(check_access(get("localhost:9808", {{"Cookie", "a=b; " + cookie + "=s3cret%3B%3D"}}), policy),
            AccessVerdict::allowed);
  EXPECT_EQ(check_access(get("localhost:9808", {{"Cookie", cookie + "=wrong"}}), policy),
            AccessVerdict::unauthorized);
  // Another server's cookie on the same host does not count.
  EXPECT_EQ(check_access(get("localhost:9808", {{"Cookie", "gpuhost_token_9809=s3cret%3B%3D"}}), policy),
            AccessVerdict::unauthorized);
  RequestHead with_query{"GET", "/?job=a&token=s3cret%3B%3D", "HTTP/1.1", {{"Host", "localhost:9808"}}};
  EXPECT_EQ(check_access(with_query, policy), AccessVerdict::allowed_by_query_token);
  with_query.target = "/?token=s3cre";
  EXPECT_EQ(check_access(with_query, policy), AccessVerdict::unauthorized);
}

TEST(AnswerRequest, MovesAQueryTokenIntoAnHttpOnlyCookie) {
  const auto policy = local_policy("s3cret");
  int calls = 0;
  const RequestHandler handler = [&](const RequestHead&) {
    ++calls;
    return Response{200, "text/plain", "ok", {}, {}};
  };
  auto reply =
      answer_request("GET /?job=a&token=s3cret&x=step HTTP/1.1\r\nHost: localhost:9808", policy, handler);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 303 ")) << reply;
  EXPECT_NE(reply.find("Location: /?job=a&x=step\r\n"), std::string::npos) << reply;
  EXPECT_NE(reply.find("Set-Cookie: gpuhost_token_9808=s3cret; Path=/; HttpOnly; SameSite=Strict\r\n"),
            std::string::npos);
  EXPECT_EQ(calls, 0);
  // The cookie then opens the page; the token never appears in what the handler answers.
  reply = answer_request("GET /?job=a HTTP/1.1\r\nHost: localhost:9808\r\nCookie: gpuhost_token_9808=s3cret",
                         policy, handler);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 200 "));
  EXPECT_EQ(calls, 1);
  reply = answer_request("GET /?token=nope HTTP/1.1\r\nHost: localhost:9808", policy, handler);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 401 "));
  EXPECT_EQ(reply.find("nope"), std::string::npos);
}

TEST(AnswerRequest, NeverEchoesTheTokenOrTheHost) {
  const auto policy = local_policy("s3cret");
  const RequestHandler handler = [](const RequestHead&) { return Response{200, "text/plain", "ok", {}, {}}; };
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
    return Response{200, "text/plain", "path=" + r.path(), {}, {}};
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

// A stream handler that sends one event and then waits until the client or the server ends it.
Response one_event_stream(std::atomic<int>& ended) {
  Response r;
  r.content_type = "text/event-stream";
  r.stream = [&ended](ResponseWriter& out) {
    if (out.write("data: hello\n\n"))
      while (out.wait(std::chrono::milliseconds(50))) {
      }
    ++ended;
  };
  return r;
}

// Reads from `stream` until `needle` has arrived (or the peer closes); returns what came.
std::string read_until(platform::TcpStream& stream, std::string_view needle) {
  std::string got;
  while (got.find(needle) == std::string::npos) {
    char chunk[1024];
    auto n = stream.receive_some(chunk, sizeof chunk);
    if (!n || *n == 0) break;
    got.append(chunk, *n);
  }
  return got;
}

platform::TcpStream open_stream(std::uint16_t port, std::string_view path) {
  auto stream = platform::TcpStream::connect("127.0.0.1", port, std::chrono::seconds(10));
  EXPECT_TRUE(stream) << stream.error().message;
  const std::string request = "GET " + std::string(path) + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  EXPECT_TRUE(stream->send_all(request.data(), request.size()));
  return std::move(*stream);
}

TEST(HttpServer, StreamsABodyUntilTheClientLeaves) {
  std::atomic<int> ended{0};
  auto server =
      HttpServer::start(HttpServerOptions{}, [&](const RequestHead&) { return one_event_stream(ended); });
  ASSERT_TRUE(server);
  {
    auto stream = open_stream((*server)->port(), "/api/stream");
    const std::string got = read_until(stream, "data: hello\n\n");
    EXPECT_TRUE(got.starts_with("HTTP/1.1 200 OK\r\n")) << got;
    EXPECT_NE(got.find("Content-Type: text/event-stream\r\n"), std::string::npos);
    EXPECT_EQ(got.find("Content-Length"), std::string::npos);
    EXPECT_TRUE(got.ends_with("\r\n\r\ndata: hello\n\n")) << got;
  }  // the client closes
  for (int i = 0; i < 600 && ended.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ended.load(), 1);
}

TEST(HttpServer, CapsStreamsButStillAnswersScrapes) {
  std::atomic<int> ended{0};
  HttpServerOptions options;
  options.max_streams = 1;
  auto server = HttpServer::start(options, [&](const RequestHead& r) {
    if (r.path() == "/api/stream") return one_event_stream(ended);
    return Response{200, "text/plain", "metrics", {}, {}};
  });
  ASSERT_TRUE(server);
  auto first = open_stream((*server)->port(), "/api/stream");
  ASSERT_NE(read_until(first, "data: hello").find("data: hello"), std::string::npos);
  auto second = open_stream((*server)->port(), "/api/stream");
  const std::string refused = read_until(second, "\r\n\r\n");
  EXPECT_TRUE(refused.starts_with("HTTP/1.1 503 ")) << refused;
  EXPECT_NE(refused.find("Retry-After: 5\r\n"), std::string::npos);
  net::HttpRequest request;
  request.url = "http://127.0.0.1:" + std::to_string((*server)->port()) + "/metrics";
  request.timeout = std::chrono::seconds(20);
  auto response = net::http_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "metrics");
  // stop() ends the open stream (its wait() fails) and returns.
  (*server)->stop();
  EXPECT_EQ(ended.load(), 1);
}

// Far more than loopback holds in flight (Linux: tcp_wmem + tcp_rmem, a few MiB at most): a
// client that stops reading leaves a send of it blocked.
const std::string& more_than_socket_buffers() {
  static const std::string bytes(std::size_t{64} << 20, 'x');
  return bytes;
}

// A stream that sends more_than_socket_buffers() until write() fails, then counts itself ended.
Response flooding_stream(std::atomic<int>& ended) {
  Response r;
  r.content_type = "text/event-stream";
  r.stream = [&ended](ResponseWriter& out) {
    while (out.write(more_than_socket_buffers())) {
    }
    ++ended;
  };
  return r;
}

// Reads the answer's head and at least one byte of its body (so the server is sending), then
// stops reading.
void read_head_and_a_byte(platform::TcpStream& stream) {
  const std::string got = read_until(stream, "\r\n\r\n");
  ASSERT_TRUE(got.starts_with("HTTP/1.1 200 OK\r\n")) << got.substr(0, 200);
  if (got.size() == got.find("\r\n\r\n") + 4) {
    char byte = 0;
    auto n = stream.receive_some(&byte, 1);
    ASSERT_TRUE(n && *n == 1);
  }
}

TEST(HttpServer, StopReturnsWhileAStreamsClientHasStoppedReading) {
  std::atomic<int> ended{0};
  HttpServerOptions options;
  options.send_timeout = std::chrono::hours(1);  // only stop() can end the blocked send
  auto server = HttpServer::start(options, [&](const RequestHead& r) {
    if (r.path() == "/api/stream") return flooding_stream(ended);
    return Response{200, "text/plain", "metrics", {}, {}};
  });
  ASSERT_TRUE(server);
  auto stalled = open_stream((*server)->port(), "/api/stream");
  read_head_and_a_byte(stalled);
  // Others are served meanwhile.
  net::HttpRequest request;
  request.url = "http://127.0.0.1:" + std::to_string((*server)->port()) + "/metrics";
  request.timeout = std::chrono::seconds(20);
  auto response = net::http_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->body, "metrics");
  EXPECT_EQ(ended.load(), 0);  // the stream's send cannot have finished: still blocked
  // Hangs until the test's timeout if stop() waits for the stalled client.
  (*server)->stop();
  EXPECT_EQ(ended.load(), 1);
}

TEST(HttpServer, StopReturnsWhileAClientStallsOnALargeAnswer) {
  std::atomic<int> answered{0};
  HttpServerOptions options;
  options.send_timeout = std::chrono::hours(1);
  auto server = HttpServer::start(options, [&](const RequestHead&) {
    ++answered;
    return Response{200, "application/octet-stream", more_than_socket_buffers(), {}, {}};
  });
  ASSERT_TRUE(server);
  auto stalled = open_stream((*server)->port(), "/big");
  read_head_and_a_byte(stalled);
  EXPECT_EQ(answered.load(), 1);
  (*server)->stop();
}

TEST(HttpServer, DropsAStreamWhoseClientTakesNothingForTheSendTimeout) {
  std::atomic<int> ended{0};
  HttpServerOptions options;
  options.send_timeout = std::chrono::milliseconds(200);
  auto server = HttpServer::start(options, [&](const RequestHead&) { return flooding_stream(ended); });
  ASSERT_TRUE(server);
  auto stalled = open_stream((*server)->port(), "/api/stream");
  read_head_and_a_byte(stalled);
  // Without stop(): the send timeout alone ends the stream (the client never reads again).
  for (int i = 0; i < 1200 && ended.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(ended.load(), 1);
}

}  // namespace
}  // namespace gpuhost::telemetry
