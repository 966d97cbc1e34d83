#include "store/s3_store.h"

#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "base/strings.h"
#include "net/fake_http_server.h"
#include "store/s3_protocol.h"

namespace gpuhost::store {
namespace {

using net::test_support::CannedResponse;
using net::test_support::FakeHttpServer;
using net::test_support::ReceivedRequest;
using net::test_support::RequestHandler;
using namespace std::chrono_literals;

const std::string k_secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const std::string k_token = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN";

Credentials test_credentials() {
  Credentials c;
  c.access_key_id = "AKIDEXAMPLE";
  c.secret_access_key = Secret(k_secret);
  c.session_token = Secret(k_token);
  c.source = "test";
  return c;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(parse_int(s.substr(i + 1, 2), 16).value_or('?'));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// What a real S3 does with a request: recomputes its SigV4 signature from the bytes that
// arrived (target, Host and the signed headers) and the known secret, and checks the body's
// hash. Empty when it verifies, else why not.
std::string verify(const ReceivedRequest& r) {
  auto authorization = r.header("Authorization");
  auto date = r.header("x-amz-date");
  auto content_hash = r.header("x-amz-content-sha256");
  if (!authorization || !date || !content_hash)
    return "missing Authorization, x-amz-date or x-amz-content-sha256";
  if (*content_hash != sha256_hex(r.body)) return "x-amz-content-sha256 is not the body's SHA-256";
  std::size_t signed_at = authorization->find("SignedHeaders=");
  std::size_t signature_at = authorization->find(", Signature=");
  std::size_t scope_at = authorization->find("Credential=AKIDEXAMPLE/");
  if (signed_at == std::string::npos || signature_at == std::string::npos || scope_at == std::string::npos)
    return "malformed Authorization";
  std::string signed_headers = authorization->substr(signed_at + 14, signature_at - signed_at - 14);
  std::string scope = authorization->substr(scope_at + 23, signed_at - 2 - scope_at - 23);
  auto scope_parts = split(scope, '/');
  if (scope_parts.size() != 4) return "bad scope " + scope;

  SignableRequest request;
  request.method = r.method;
  std::size_t q = r.target.find('?');
  request.canonical_uri = r.target.substr(0, q);
  if (q != std::string::npos)
    for (const std::string& pair : split(r.target.substr(q + 1), '&')) {
      std::size_t eq = pair.find('=');
      request.query.emplace_back(percent_decode(pair.substr(0, eq)),
                                 eq == std::string::npos ? "" : percent_decode(pair.substr(eq + 1)));
    }
  Credentials credentials = test_credentials();
  credentials.session_token = Secret();
  for (const std::string& name : split(signed_headers, ';')) {
    if (name == "host") {
      request.host = r.header("Host").value_or("");
    } else if (name == "x-amz-date") {
    } else if (name == "x-amz-security-token") {
      credentials.session_token = Secret(r.header(name).value_or(""));
    } else {
      for (const auto& [key, value] : r.headers)
        if (iequals(key, name)) request.headers.emplace_back(name, value);
    }
  }
  request.payload_hash = *content_hash;
  // x-amz-date -> time point
  const std::string& d = *date;
  auto when = std::chrono::sys_days{std::chrono::year(std::stoi(d.substr(0, 4))) / std::stoi(d.substr(4, 2)) /
                                    std::stoi(d.substr(6, 2))} +
              std::chrono::hours(std::stoi(d.substr(9, 2))) +
              std::chrono::minutes(std::stoi(d.substr(11, 2))) +
              std::chrono::seconds(std::stoi(d.substr(13, 2)));
  Signature expected = sign(request, credentials, {scope_parts[1], scope_parts[2]}, when);
  if (authorization->substr(signature_at + 12) != expected.signature) return "signature mismatch";
  return {};
}

// The fake server closes every connection after its answer, so it says so: a client must not
// put the connection back in its pool (WinHTTP under Wine would reuse it and fail).
CannedResponse reply(int status, std::string body = {}, net::HttpHeaders headers = {}) {
  CannedResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  r.headers.emplace_back("Connection", "close");
  return r;
}

CannedResponse s3_error(int status, const std::string& code, const std::string& message = "m") {
  return reply(status, "<Error><Code>" + code + "</Code><Message>" + message + "</Message><RequestId>RID-" +
                           code + "</RequestId></Error>");
}

CannedResponse raw(std::string bytes) {
  CannedResponse r;
  r.raw = std::move(bytes);
  return r;
}

class CountingCredentials final : public CredentialProvider {
 public:
  Result<Credentials> credentials() override { return test_credentials(); }
  void invalidate() override { ++invalidations; }
  std::atomic<int> invalidations{0};
};

StoreLocation location_for(const FakeHttpServer& server, std::string prefix = "pre/") {
  StoreLocation l;
  l.provider = Provider::custom;
  l.bucket = "bucket";
  l.prefix = std::move(prefix);
  l.endpoint_scheme = "http";
  l.endpoint_host = "127.0.0.1";
  l.endpoint_port = server.port();
  l.region = "us-east-1";
  l.style = AddressingStyle::path;
  return l;
}

S3Options fast_retries(int attempts = 4) {
  S3Options options;
  options.retry.max_attempts = attempts;
  options.retry.base_delay = 1ms;
  options.retry.max_delay = 5ms;
  options.stall_timeout = 2s;
  return options;
}

S3Store store_for(const FakeHttpServer& server, S3Options options = fast_retries(),
                  std::shared_ptr<CredentialProvider> credentials = nullptr) {
  if (!credentials) credentials = std::make_shared<StaticCredentials>(test_credentials());
  return S3Store(location_for(server), std::move(credentials), options);
}

// Answers each request by its position: the i-th request gets script[i] (the last repeats).
class Script {
 public:
  explicit Script(std::vector<CannedResponse> steps) : m_steps(std::move(steps)) {}
  CannedResponse operator()(const ReceivedRequest& r) {
    if (std::string why = verify(r); !why.empty()) return s3_error(403, "SignatureDoesNotMatch", why);
    std::lock_guard lock(m_mutex);
    std::size_t i = std::min(m_next++, m_steps.size() - 1);
    return m_steps[i];
  }

 private:
  std::mutex m_mutex;
  std::vector<CannedResponse> m_steps;
  std::size_t m_next = 0;
};

TEST(WireTarget, PathAndVirtualHostedForms) {
  StoreLocation l;
  l.bucket = "bkt";
  l.endpoint_scheme = "https";
  l.endpoint_host = "s3.eu-west-1.amazonaws.com";
  l.style = AddressingStyle::virtual_hosted;
  WireTarget t = wire_target(l, "ckpt/step 1/model.pt", {{"partNumber", "3"}, {"uploadId", "a/b="}});
  EXPECT_EQ(t.host, "bkt.s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(t.path, "/ckpt/step%201/model.pt");
  EXPECT_EQ(t.url,
            "https://bkt.s3.eu-west-1.amazonaws.com/ckpt/step%201/model.pt?partNumber=3&uploadId=a%2Fb%3D");
  EXPECT_EQ(wire_target(l, "", {{"list-type", "2"}}).path, "/");

  l.style = AddressingStyle::path;
  l.endpoint_scheme = "http";
  l.endpoint_host = "minio.lan";
  l.endpoint_port = 9000;
  t = wire_target(l, "k", {});
  EXPECT_EQ(t.host, "minio.lan:9000");
  EXPECT_EQ(t.url, "http://minio.lan:9000/bkt/k");
  EXPECT_EQ(wire_target(l, "", {}).path, "/bkt");
  l.endpoint_port = 80;
  EXPECT_EQ(wire_target(l, "k", {}).host, "minio.lan");
}

TEST(S3Store, SignsEveryRequestAsTheServerChecksIt) {
  Script script({reply(200, "", {{"ETag", "\"etag-1\""}})});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  auto etag = store.put("dir/my key+1.pt", Payload::from_memory("checkpoint bytes"));
  ASSERT_TRUE(etag) << etag.error().message;
  EXPECT_EQ(*etag, "etag-1");
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  const ReceivedRequest& r = requests[0];
  EXPECT_EQ(r.method, "PUT");
  EXPECT_EQ(r.target, "/bucket/pre/dir/my%20key%2B1.pt");
  EXPECT_EQ(r.body, "checkpoint bytes");
  EXPECT_EQ(r.header("x-amz-content-sha256"), sha256_hex("checkpoint bytes"));
  EXPECT_EQ(r.header("x-amz-security-token"), k_token);
  EXPECT_NE(r.header("Authorization")
                ->find("SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;"
                       "x-amz-security-token"),
            std::string::npos);
  EXPECT_EQ(verify(r), "");
}

TEST(S3Store, SendsTheEmptyPayloadHashOnBodilessRequests) {
  Script script({reply(200, "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>")});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  auto page = store.list("sub/", std::string("token/=="), 50);
  ASSERT_TRUE(page) << page.error().message;
  auto r = server.requests().at(0);
  EXPECT_EQ(r.header("x-amz-content-sha256"),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(r.target,
            "/bucket?continuation-token=token%2F%3D%3D&list-type=2&max-keys=50&prefix=pre%2Fsub%2F");
}

TEST(S3Store, RetriesSlowDownAndServerErrorsThenSucceeds) {
  Script script({s3_error(503, "SlowDown", "Please reduce your request rate."),
                 s3_error(500, "InternalError"), reply(200, "", {{"ETag", "\"ok\""}})});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  auto etag = store.put("k", Payload::from_memory("x"));
  ASSERT_TRUE(etag) << etag.error().message;
  EXPECT_EQ(server.requests().size(), 3u);
  for (const auto& r : server.requests()) EXPECT_EQ(r.body, "x");  // the body is resent whole
}

TEST(S3Store, RetriesAConnectionClosedWithoutAnswer) {
  Script script({raw(""), reply(200, "", {{"ETag", "\"ok\""}})});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  auto part = store.upload_part("k", "UP", 1, Payload::from_memory("part one"));
  ASSERT_TRUE(part) << part.error().message;
  EXPECT_EQ(part->etag, "ok");
  EXPECT_EQ(part->sha256, sha256_hex("part one"));
  EXPECT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests()[1].target, "/bucket/pre/k?partNumber=1&uploadId=UP");
}

TEST(S3Store, RetriesATruncatedDownload) {
  Script script({raw("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 11\r\n\r\nhello"),
                 reply(200, "hello world")});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  auto body = store.get("k", {}, 1024);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(*body, "hello world");
}

TEST(S3Store, RetriesAStalledAnswer) {
  CannedResponse hang;
  hang.hang = true;
  Script script({hang, reply(200, "late but whole")});
  FakeHttpServer server(std::ref(script));
  S3Options options = fast_retries();
  options.stall_timeout = 1s;
  S3Store store = store_for(server, options);
  auto body = store.get("k", {}, 1024);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(*body, "late but whole");
}

TEST(S3Store, GivesUpAfterTheLastAttemptWithAClearMessage) {
  Script script({s3_error(500, "InternalError", "We encountered an internal error.")});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server, fast_retries(3));
  auto etag = store.put("k", Payload::from_memory("x"));
  ASSERT_FALSE(etag);
  EXPECT_EQ(etag.error().code, ErrorCode::unavailable);
  EXPECT_EQ(server.requests().size(), 3u);
  const std::string& m = etag.error().message;
  EXPECT_NE(
      m.find("PUT s3://bucket/pre/k: InternalError: We encountered an internal error. (HTTP 500, request id "
             "RID-InternalError) (gave up after 3 attempts)"),
      std::string::npos)
      << m;
}

TEST(S3Store, DoesNotRetryClientErrors) {
  Script script({s3_error(403, "AccessDenied", "Access Denied")});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  auto info = store.get("k", {}, 1024);
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error().code, ErrorCode::permission_denied);
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_NE(info.error().message.find("AccessDenied: Access Denied (HTTP 403, request id RID-AccessDenied)"),
            std::string::npos)
      << info.error().message;
}

TEST(S3Store, ASignatureMismatchMessageHoldsNoSecret) {
  // A real S3 echoes the string to sign and the canonical request (with the token) in the body.
  FakeHttpServer server([](const ReceivedRequest& r) {
    return reply(
        403,
        "<Error><Code>SignatureDoesNotMatch</Code><Message>The request signature we calculated does not "
        "match the signature you provided. Check your key and signing method.</Message>"
        "<AWSAccessKeyId>AKIDEXAMPLE</AWSAccessKeyId><StringToSign>" +
            r.header("Authorization").value_or("") +
            "</StringToSign><CanonicalRequest>x-amz-security-token:" +
            r.header("x-amz-security-token").value_or("") +
            "</CanonicalRequest><RequestId>R1</RequestId></Error>");
  });
  S3Store store = store_for(server);
  auto etag = store.put("k", Payload::from_memory("x"));
  ASSERT_FALSE(etag);
  const std::string& m = etag.error().message;
  EXPECT_NE(m.find("SignatureDoesNotMatch"), std::string::npos) << m;
  EXPECT_NE(m.find("check the secret access key"), std::string::npos) << m;
  EXPECT_EQ(m.find(k_secret), std::string::npos) << m;
  EXPECT_EQ(m.find(k_token), std::string::npos) << m;
  EXPECT_EQ(m.find("Signature="), std::string::npos) << m;
}

TEST(S3Store, ExpiredTokenFetchesNewCredentialsOnce) {
  Script script({s3_error(400, "ExpiredToken", "The provided token has expired."), reply(200, "body")});
  FakeHttpServer server(std::ref(script));
  auto credentials = std::make_shared<CountingCredentials>();
  S3Store store = store_for(server, fast_retries(), credentials);
  auto body = store.get("k", {}, 100);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(credentials->invalidations, 1);
}

TEST(S3Store, HeadOfAMissingObjectIsNotFound) {
  Script script({reply(404)});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  auto info = store.head("missing");
  ASSERT_FALSE(info);
  EXPECT_EQ(info.error().code, ErrorCode::not_found);
  EXPECT_NE(info.error().message.find("HEAD s3://bucket/pre/missing: NoSuchKey"), std::string::npos)
      << info.error().message;
}

TEST(S3Store, HeadReadsSizeAndEtag) {
  FakeHttpServer server([](const ReceivedRequest&) {
    return raw(
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1048576\r\nETag: "
        "\"abc-3\"\r\nLast-Modified: Wed, 01 Jan 2026 "
        "00:00:00 GMT\r\n\r\n");
  });
  S3Store store = store_for(server);
  auto info = store.head("k");
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->size, 1048576u);
  EXPECT_EQ(info->etag, "abc-3");
}

TEST(S3Store, RangedGetAsksForTheRangeAndRefusesAWholeAnswer) {
  Script script({reply(206, "bcd"), reply(200, "abcdef")});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  ReadOptions read;
  read.range = ByteRange{1, 3};
  read.if_match = "etag9";
  auto part = store.get("k", read, 100);
  ASSERT_TRUE(part) << part.error().message;
  EXPECT_EQ(*part, "bcd");
  EXPECT_EQ(server.requests()[0].header("Range"), "bytes=1-3");
  EXPECT_EQ(server.requests()[0].header("If-Match"), "\"etag9\"");
  auto ignored = store.get("k", read, 100);
  ASSERT_FALSE(ignored);
  EXPECT_NE(ignored.error().message.find("ignored the Range header"), std::string::npos);
}

TEST(S3Store, DownloadsARangeIntoAFileAtItsOffset) {
  Script script({reply(206, "XYZ")});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  auto path = std::filesystem::temp_directory_path() / "gpuhost-s3-range.bin";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "0123456789";
  ReadOptions read;
  read.range = ByteRange{0, 3};
  auto n = store.get_to_file("k", path, 4, read);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 3u);
  std::ifstream in(path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "0123XYZ789");
}

TEST(S3Store, CompleteRetriesA200ThatCarriesAnError) {
  Script script(
      {reply(200, "<Error><Code>InternalError</Code><Message>retry</Message></Error>"),
       reply(200,
             "<CompleteMultipartUploadResult><ETag>\"final-2\"</ETag></CompleteMultipartUploadResult>")});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  std::vector<PartInfo> parts = {{1, "e1", 5, ""}, {2, "e2", 1, ""}};
  auto etag = store.complete_multipart("k", "UP", parts);
  ASSERT_TRUE(etag) << etag.error().message;
  EXPECT_EQ(*etag, "final-2");
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests()[0].target, "/bucket/pre/k?uploadId=UP");
  EXPECT_NE(server.requests()[0].body.find("<PartNumber>2</PartNumber><ETag>&quot;e2&quot;</ETag>"),
            std::string::npos);
}

TEST(S3Store, ACompleteWhoseAnswerWasLostIsRecognised) {
  // The first Complete went through but the connection died before the answer; the retry finds
  // no upload, and the object is there with a 2-part ETag.
  FakeHttpServer server([calls = std::make_shared<std::atomic<int>>(0)](const ReceivedRequest& r) {
    if (r.method == "HEAD")
      return raw("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 6\r\nETag: \"abc-2\"\r\n\r\n");
    if ((*calls)++ == 0) return raw("");
    return s3_error(404, "NoSuchUpload", "The specified upload does not exist.");
  });
  S3Store store = store_for(server);
  std::vector<PartInfo> parts = {{1, "e1", 5, ""}, {2, "e2", 1, ""}};
  auto etag = store.complete_multipart("k", "UP", parts);
  ASSERT_TRUE(etag) << etag.error().message;
  EXPECT_EQ(*etag, "abc-2");
}

// Part ETags that are MD5s: the completed object's ETag is known exactly (s3_protocol.h).
const std::vector<PartInfo> k_md5_parts = {{1, "bce6bf66aeb76c7040fdd5f4eccb78e6", 5, ""},
                                           {2, "8165449fc15bbf43d3b674595cbcc406", 1, ""}};
const std::string k_md5_parts_etag = "f77dc0eecdebcd774a2a22cb393ad2ff-2";

// A server whose first Complete dies without an answer, whose later ones find no upload, and
// whose HEAD shows `head_etag` with `head_size` bytes (404 when head_etag is empty).
RequestHandler lost_complete(std::string head_etag, std::uint64_t head_size) {
  return [calls = std::make_shared<std::atomic<int>>(0), head_etag, head_size](const ReceivedRequest& r) {
    if (r.method == "HEAD") {
      if (head_etag.empty()) return reply(404);
      return raw("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: " + std::to_string(head_size) +
                 "\r\nETag: \"" + head_etag + "\"\r\n\r\n");
    }
    if ((*calls)++ == 0) return raw("");
    return s3_error(404, "NoSuchUpload", "The specified upload does not exist.");
  };
}

TEST(S3Store, ALostCompleteIsConfirmedByTheExactMultipartEtag) {
  FakeHttpServer server(lost_complete(k_md5_parts_etag, 6));
  S3Store store = store_for(server);
  auto etag = store.complete_multipart("k", "UP", k_md5_parts);
  ASSERT_TRUE(etag) << etag.error().message;
  EXPECT_EQ(*etag, k_md5_parts_etag);
  EXPECT_EQ(server.requests().back().method, "HEAD");
}

TEST(S3Store, ALostCompleteIsRefusedWhenAnotherObjectIsAtTheKey) {
  // Same size and part count, other parts: another writer's object, not ours.
  FakeHttpServer server(lost_complete("0123456789abcdef0123456789abcdef-2", 6));
  S3Store store = store_for(server);
  auto etag = store.complete_multipart("k", "UP", k_md5_parts);
  ASSERT_FALSE(etag);
  const std::string& m = etag.error().message;
  EXPECT_NE(m.find("completing the multipart upload of s3://bucket/pre/k"), std::string::npos) << m;
  EXPECT_NE(m.find("not the one these parts make"), std::string::npos) << m;
  EXPECT_NE(m.find(k_md5_parts_etag), std::string::npos) << m;
  EXPECT_NE(m.find("NoSuchUpload"), std::string::npos) << m;
}

TEST(S3Store, ALostCompleteIsRefusedWhenTheSizeDiffers) {
  FakeHttpServer server(lost_complete(k_md5_parts_etag, 7));
  S3Store store = store_for(server);
  auto etag = store.complete_multipart("k", "UP", k_md5_parts);
  ASSERT_FALSE(etag);
  EXPECT_NE(etag.error().message.find("it holds 7 bytes, the parts 6"), std::string::npos)
      << etag.error().message;
}

TEST(S3Store, ACompleteThatNeverGotAnAnswerAndLeftNoObjectFails) {
  FakeHttpServer server([](const ReceivedRequest& r) { return r.method == "HEAD" ? reply(404) : raw(""); });
  S3Store store = store_for(server, fast_retries(3));
  auto etag = store.complete_multipart("k", "UP", k_md5_parts);
  ASSERT_FALSE(etag);
  EXPECT_NE(etag.error().message.find("(gave up after 3 attempts) (and no object is at the key)"),
            std::string::npos)
      << etag.error().message;
}

TEST(S3Store, AFirstCompleteThatFindsNoUploadIsNotConfirmedByHead) {
  // No earlier try could have completed it: the upload id is wrong or was aborted.
  Script script({s3_error(404, "NoSuchUpload", "The specified upload does not exist.")});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  auto etag = store.complete_multipart("k", "UP", k_md5_parts);
  ASSERT_FALSE(etag);
  EXPECT_EQ(etag.error().code, ErrorCode::not_found);
  ASSERT_EQ(server.requests().size(), 1u);
}

TEST(S3Store, CompleteWaitsPastTheStallTimeoutForASlowAnswer) {
  // Silent for longer than the stall timeout, as a server assembling a large object is. (libcurl
  // notices a stall only seconds late, so on Linux this holds even with the bug; WinHTTP's
  // watchdog is exact.)
  FakeHttpServer server([](const ReceivedRequest&) {
    std::this_thread::sleep_for(2500ms);
    return reply(200, "<CompleteMultipartUploadResult><ETag>\"" + k_md5_parts_etag +
                          "\"</ETag></CompleteMultipartUploadResult>");
  });
  S3Options options = fast_retries();
  options.stall_timeout = 1s;
  options.complete_timeout = 60s;
  S3Store store = store_for(server, options);
  auto etag = store.complete_multipart("k", "UP", k_md5_parts);
  ASSERT_TRUE(etag) << etag.error().message;
  EXPECT_EQ(*etag, k_md5_parts_etag);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(S3Store, CancelEndsACompleteWaitingForItsAnswer) {
  FakeHttpServer server([](const ReceivedRequest&) {
    CannedResponse r;
    r.hang = true;
    return r;
  });
  std::atomic<bool> cancel{false};
  S3Options options = fast_retries();
  // Windows and libcurl end the wait at once; Wine's WinHTTP only at this timeout (https_client.h).
  options.complete_timeout = 5s;
  options.cancel = &cancel;
  S3Store store = store_for(server, options);
  std::thread canceller([&] {
    std::this_thread::sleep_for(300ms);
    cancel = true;
  });
  auto etag = store.complete_multipart("k", "UP", k_md5_parts);
  canceller.join();
  ASSERT_FALSE(etag);
  EXPECT_EQ(etag.error().code, ErrorCode::timeout);
  EXPECT_NE(etag.error().message.find("cancelled"), std::string::npos) << etag.error().message;
  for (const auto& r : server.requests()) EXPECT_NE(r.method, "HEAD");
}

TEST(S3Store, AbortAndDeleteOfMissingThingsSucceed) {
  Script script({s3_error(404, "NoSuchUpload"), s3_error(404, "NoSuchKey")});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  EXPECT_TRUE(store.abort_multipart("k", "UP"));
  EXPECT_TRUE(store.remove("k"));
  EXPECT_EQ(server.requests()[0].method, "DELETE");
  EXPECT_EQ(server.requests()[0].target, "/bucket/pre/k?uploadId=UP");
}

TEST(S3Store, ListsPartsAndUploadsAcrossPages) {
  Script script(
      {reply(200,
             "<ListPartsResult><IsTruncated>true</IsTruncated><NextPartNumberMarker>1</NextPartNumberMarker>"
             "<Part><PartNumber>1</PartNumber><ETag>\"a\"</ETag><Size>5</Size></Part></ListPartsResult>"),
       reply(200,
             "<ListPartsResult><IsTruncated>false</IsTruncated>"
             "<Part><PartNumber>2</PartNumber><ETag>\"b\"</ETag><Size>1</Size></Part></ListPartsResult>"),
       reply(200,
             "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated><Upload><Key>pre/k</Key>"
             "<UploadId>U1</UploadId><Initiated>2026-01-01T00:00:00.000Z</Initiated></Upload>"
             "</ListMultipartUploadsResult>")});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  auto parts = store.list_parts("k", "UP");
  ASSERT_TRUE(parts) << parts.error().message;
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[1].etag, "b");
  EXPECT_EQ(server.requests()[1].target, "/bucket/pre/k?part-number-marker=1&uploadId=UP");
  auto uploads = store.list_multipart_uploads("");
  ASSERT_TRUE(uploads) << uploads.error().message;
  ASSERT_EQ(uploads->size(), 1u);
  EXPECT_EQ((*uploads)[0].key, "k");
  EXPECT_EQ(server.requests()[2].target, "/bucket?prefix=pre%2F&uploads=");
}

TEST(S3Store, CancelStopsRetrying) {
  Script script({s3_error(503, "SlowDown")});
  FakeHttpServer server(std::ref(script));
  std::atomic<bool> cancel{false};
  S3Options options = fast_retries(100);
  options.retry.base_delay = 200ms;
  options.retry.max_delay = 200ms;
  options.cancel = &cancel;
  S3Store store = store_for(server, options);
  std::thread canceller([&] {
    std::this_thread::sleep_for(300ms);
    cancel = true;
  });
  auto etag = store.put("k", Payload::from_memory("x"));
  canceller.join();
  ASSERT_FALSE(etag);
  EXPECT_EQ(etag.error().code, ErrorCode::timeout);
  EXPECT_NE(etag.error().message.find("cancelled"), std::string::npos);
  EXPECT_LT(server.requests().size(), 100u);
}

TEST(S3Store, RejectsKeysS3CannotHold) {
  Script script({reply(200)});
  FakeHttpServer server(std::ref(script));
  S3Store store = store_for(server);
  EXPECT_FALSE(store.put("", Payload::from_memory("x")));
  EXPECT_FALSE(store.put("/abs", Payload::from_memory("x")));
  EXPECT_FALSE(store.put(std::string(1100, 'k'), Payload::from_memory("x")));
  EXPECT_TRUE(server.requests().empty());
}

}  // namespace
}  // namespace gpuhost::store
