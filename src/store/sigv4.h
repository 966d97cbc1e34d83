#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/credentials.h"

namespace gpuhost::store {

// AWS Signature Version 4, computed here for both OSes (hashing: platform/crypto.h) rather than
// by libcurl's CURLOPT_AWS_SIGV4, so Linux and Windows (WinHTTP) sign through the same code and
// the same tests (doc/object-store.md). Reference: docs.aws.amazon.com/IAM/latest/UserGuide/
// reference_sigv_create-signed-request.html and, for S3, docs.aws.amazon.com/AmazonS3/latest/
// API/sig-v4-header-based-auth.html. Pure functions, thread-safe.

using QueryParameters = std::vector<std::pair<std::string, std::string>>;
using SignedHeaderList = std::vector<std::pair<std::string, std::string>>;

// RFC 3986 percent-encoding as SigV4 wants it: A-Z a-z 0-9 - . _ ~ stay, every other byte is
// %XX in upper-case hex; '/' stays only with SlashEncoding::keep (object key paths).
enum class SlashEncoding { keep, encode };
[[nodiscard]] std::string uri_encode(std::string_view text, SlashEncoding slash);

// Query parameters (decoded names and values, any order) in canonical form: each encoded, sorted
// by name then value, joined "a=1&b=" . The request must carry exactly this string as its query.
[[nodiscard]] std::string canonical_query(const QueryParameters& query);

struct SignableRequest {
  std::string method;
  std::string host;           // the Host header as sent: host, plus ":port" when not the default
  std::string canonical_uri;  // the path exactly as sent, already percent-encoded ("/b/my%20key")
  QueryParameters query;
  // Headers to sign (any case, duplicates allowed and joined with ','). The signer adds host,
  // x-amz-date and, with a session token, x-amz-security-token. S3 requires
  // x-amz-content-sha256 on every request; callers put it here.
  SignedHeaderList headers;
  std::string payload_hash;  // lower-case hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"
};

struct SigningScope {
  std::string region;
  std::string service = "s3";
};

struct Signature {
  std::string amz_date;           // "20150830T123600Z"
  std::string canonical_request;  // for tests and debugging; holds no secret
  std::string string_to_sign;
  std::string signed_headers;  // "host;x-amz-date"
  std::string signature;       // hex
  // Headers to send besides the request's own: x-amz-date, x-amz-security-token (when the
  // credentials have one) and Authorization. The token is a secret: never log these.
  SignedHeaderList headers_to_add;
};

[[nodiscard]] Signature sign(const SignableRequest& request, const Credentials& credentials,
                             const SigningScope& scope, std::chrono::system_clock::time_point now);

// "20150830T123600Z" for a point in time (UTC, whole seconds).
[[nodiscard]] std::string amz_date(std::chrono::system_clock::time_point t);

// Lower-case hex SHA-256 of `data`; the payload hash of an empty body is
// "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".
[[nodiscard]] std::string sha256_hex(std::string_view data);

}  // namespace gpuhost::store
