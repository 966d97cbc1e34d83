// Tests of platform/https_client.h (libcurl on Linux, WinHTTP under Wine) against net/'s fake
// server on 127.0.0.1; they live here because platform_test cannot link net/.

#include "platform/https_client.h"

#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "net/fake_http_server.h"

namespace gpuhost::platform {
namespace {

using net::test_support::CannedResponse;
using net::test_support::FakeHttpServer;
using net::test_support::ReceivedRequest;
using namespace std::chrono_literals;

CannedResponse answer(int status, std::string body, net::HttpHeaders headers = {}) {
  CannedResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

CannedResponse raw(std::string bytes) {
  CannedResponse r;
  r.raw = std::move(bytes);
  return r;
}

std::filesystem::path temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / "gpuhost-https-test";
  std::filesystem::create_directories(dir);
  return dir / name;
}

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::filesystem::path& path, std::string_view data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(data.data(), static_cast<std::streamsize>(data.size()));
}

TEST(ParseWebUrl, SplitsSchemeHostPortAndTarget) {
  auto url = parse_web_url("https://bucket.s3.us-east-1.amazonaws.com/a%20b?uploads=");
  ASSERT_TRUE(url) << url.error().message;
  EXPECT_EQ(url->scheme, "https");
  EXPECT_EQ(url->host, "bucket.s3.us-east-1.amazonaws.com");
  EXPECT_EQ(url->port, 443);
  EXPECT_EQ(url->target, "/a%20b?uploads=");
  EXPECT_EQ(url->authority(), "bucket.s3.us-east-1.amazonaws.com");

  url = parse_web_url("http://[::1]:9000");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->authority(), "[::1]:9000");
  EXPECT_EQ(url->target, "/");

  EXPECT_FALSE(parse_web_url("ftp://host/x"));
  EXPECT_FALSE(parse_web_url("http://user:pw@host/"));
  EXPECT_FALSE(parse_web_url("http://host:99999/"));
  EXPECT_FALSE(parse_web_url("http://host/a b"));
}

TEST(HttpsRequest, SendsMethodTargetHeadersAndMemoryBody) {
  FakeHttpServer server([](const ReceivedRequest&) { return answer(200, "stored", {{"ETag", "\"abc\""}}); });
  ASSERT_NE(server.port(), 0);
  HttpsRequest request;
  request.method = "PUT";
  request.url = server.url() + "/bucket/a%20key?partNumber=1&uploadId=x";
  request.headers = {{"x-amz-content-sha256", "hash"}, {"Content-Type", "application/octet-stream"}};
  request.body = RequestBody::from_memory("hello body");
  auto response = https_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "stored");
  EXPECT_EQ(response->header("etag"), "\"abc\"");

  auto received = server.requests();
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].method, "PUT");
  EXPECT_EQ(received[0].target, "/bucket/a%20key?partNumber=1&uploadId=x");  // not re-encoded
  EXPECT_EQ(received[0].body, "hello body");
  EXPECT_EQ(received[0].header("x-amz-content-sha256"), "hash");
  EXPECT_EQ(received[0].header("Content-Length"), "10");
  EXPECT_EQ(received[0].header("Host"), "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_FALSE(received[0].header("Expect"));
}

TEST(HttpsRequest, SendsAFileRangeAsTheBody) {
  auto path = temp_path("body.bin");
  write_all(path, "0123456789abcdef");
  FakeHttpServer server([](const ReceivedRequest&) { return answer(200, ""); });
  HttpsRequest request;
  request.method = "PUT";
  request.url = server.url() + "/k";
  request.body = RequestBody::from_file(path, 4, 8);
  auto response = https_request(request);
  ASSERT_TRUE(response) << response.error().message;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].body, "456789ab");
}

TEST(HttpsRequest, RejectsABodyRangePastTheEndOfTheFile) {
  auto path = temp_path("short.bin");
  write_all(path, "0123");
  HttpsRequest request;
  request.method = "PUT";
  request.url = "http://127.0.0.1:9/k";
  request.body = RequestBody::from_file(path, 2, 8);
  auto response = https_request(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(response.error().message.find("past the end"), std::string::npos);
}

TEST(HttpsRequest, SendsAnEmptyPostWithContentLengthZero) {
  FakeHttpServer server([](const ReceivedRequest&) { return answer(200, "<x/>"); });
  HttpsRequest request;
  request.method = "POST";
  request.url = server.url() + "/k?uploads=";
  auto response = https_request(request);
  ASSERT_TRUE(response) << response.error().message;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_EQ(server.requests()[0].method, "POST");
  EXPECT_EQ(server.requests()[0].header("Content-Length"), "0");
}

TEST(HttpsRequest, WritesA2xxBodyIntoTheFileAtTheOffset) {
  auto path = temp_path("download.bin");
  write_all(path, "..........");
  FakeHttpServer server([](const ReceivedRequest&) { return answer(206, "ABCD"); });
  HttpsRequest request;
  request.url = server.url() + "/k";
  request.response_file = path;
  request.response_file_offset = 3;
  auto response = https_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->body_bytes, 4u);
  EXPECT_TRUE(response->body.empty());
  EXPECT_EQ(read_all(path), "...ABCD...");

  request.response_file_truncate = true;  // a whole object: nothing of the old file after it
  response = https_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(read_all(path), "...ABCD");
}

TEST(HttpsRequest, KeepsAnErrorBodyInMemoryEvenWithAResponseFile) {
  auto path = temp_path("untouched.bin");
  write_all(path, "keep");
  FakeHttpServer server(
      [](const ReceivedRequest&) { return answer(404, "<Error><Code>NoSuchKey</Code></Error>"); });
  HttpsRequest request;
  request.url = server.url() + "/k";
  request.response_file = path;
  request.response_file_truncate = true;
  auto response = https_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 404);
  EXPECT_EQ(response->body, "<Error><Code>NoSuchKey</Code></Error>");
  EXPECT_EQ(read_all(path), "keep");
}

TEST(HttpsRequest, HeadReadsHeadersWithoutABody) {
  FakeHttpServer server([](const ReceivedRequest&) {
    return raw("HTTP/1.1 200 OK\r\nContent-Length: 12345\r\nETag: \"e\"\r\n\r\n");
  });
  HttpsRequest request;
  request.method = "HEAD";
  request.url = server.url() + "/k";
  auto response = https_request(request);
  ASSERT_TRUE(response) << response.error().message;
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->header("Content-Length"), "12345");
  EXPECT_EQ(response->body_bytes, 0u);
}

TEST(HttpsRequest, ATruncatedBodyIsAnIoError) {
  FakeHttpServer server([](const ReceivedRequest&) {
    return raw("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this much");
  });
  HttpsRequest request;
  request.url = server.url() + "/k";
  auto response = https_request(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::io_error) << response.error().message;
}

TEST(HttpsRequest, AConnectionClosedWithoutAnswerIsAnIoError) {
  FakeHttpServer server([](const ReceivedRequest&) { return raw(""); });
  HttpsRequest request;
  request.url = server.url() + "/k";
  auto response = https_request(request);
  ASSERT_FALSE(response);
  EXPECT_TRUE(response.error().code == ErrorCode::io_error || response.error().code == ErrorCode::parse_error)
      << response.error().message;
}

TEST(HttpsRequest, AStalledServerTimesOut) {
  FakeHttpServer server([](const ReceivedRequest&) {
    CannedResponse r;
    r.hang = true;
    return r;
  });
  HttpsRequest request;
  request.url = server.url() + "/k";
  request.stall_timeout = 1s;
  auto response = https_request(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::timeout) << response.error().message;
}

TEST(HttpsRequest, CancellingEndsAWaitingRequest) {
  FakeHttpServer server([](const ReceivedRequest&) {
    CannedResponse r;
    r.hang = true;
    return r;
  });
  std::atomic<bool> cancel{false};
  HttpsRequest request;
  request.url = server.url() + "/k";
  // Windows ends the wait at once; Wine's WinHTTP only at the stall timeout (https_client.h).
  request.stall_timeout = 5s;
  request.cancel = &cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(300ms);
    cancel = true;
  });
  auto response = https_request(request);
  canceller.join();
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::timeout);
  EXPECT_NE(response.error().message.find("cancelled"), std::string::npos) << response.error().message;
}

TEST(HttpsRequest, ABodyOverTheLimitFails) {
  FakeHttpServer server([](const ReceivedRequest&) { return answer(200, std::string(5000, 'x')); });
  HttpsRequest request;
  request.url = server.url() + "/k";
  request.max_response_bytes = 1000;
  auto response = https_request(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::parse_error) << response.error().message;
}

TEST(HttpsRequest, ARefusedConnectionIsUnavailable) {
  std::uint16_t port;
  {
    FakeHttpServer server([](const ReceivedRequest&) { return answer(200, ""); });
    port = server.port();
  }
  HttpsRequest request;
  request.url = "http://127.0.0.1:" + std::to_string(port) + "/k";
  request.connect_timeout = 2s;
  auto response = https_request(request);
  ASSERT_FALSE(response);
  EXPECT_TRUE(response.error().code == ErrorCode::unavailable || response.error().code == ErrorCode::timeout)
      << response.error().message;
}

TEST(HttpsRequest, RefusesHeadersWithLineBreaks) {
  HttpsRequest request;
  request.url = "http://127.0.0.1:9/k";
  request.headers = {{"X-Evil", "a\r\nInjected: yes"}};
  auto response = https_request(request);
  ASSERT_FALSE(response);
  EXPECT_EQ(response.error().code, ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace gpuhost::platform
