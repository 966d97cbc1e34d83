#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>

#include "store/credentials.h"
#include "store/object_store.h"
#include "store/retry.h"
#include "store/sigv4.h"
#include "store/store_url.h"

namespace gpuhost::store {

struct S3Options {
  RetryPolicy retry;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // A request fails (and is retried) when no byte moves for this long.
  std::chrono::milliseconds stall_timeout{std::chrono::seconds(30)};
  // The same for CompleteMultipartUpload, which may be silent for long: on S3 it "could take
  // several minutes to complete", S3 keeping the connection open with whitespace meanwhile
  // (docs.aws.amazon.com/AmazonS3/latest/API/API_CompleteMultipartUpload.html); moto assembles a
  // 2 GiB object in 40-60 s without sending a byte. The cancel flag still ends the wait (under
  // Wine only at this timeout: platform/https_client.h).
  std::chrono::milliseconds complete_timeout{std::chrono::minutes(10)};
  // When set, calls stop soon after *cancel becomes true (error `timeout`, "cancelled"), also
  // between retries. Must outlive the store.
  const std::atomic<bool>* cancel = nullptr;
};

// Where a request for `key` (full key, prefix included; empty for bucket-level calls) goes:
// virtual-hosted "bucket.endpoint" with path "/key", or path style "endpoint" with "/bucket/key".
// The key is percent-encoded once, with '/' kept, as S3 signs it. Pure.
struct WireTarget {
  std::string host;  // the Host header: with ":port" unless default
  std::string path;  // the canonical URI
  std::string url;   // scheme://host/path?canonical-query
};
[[nodiscard]] WireTarget wire_target(const StoreLocation& location, std::string_view key,
                                     const QueryParameters& query);

// ObjectStore over the S3 REST API, signed with SigV4 (sigv4.h) and sent through
// platform/https_client.h. Every request carries x-amz-content-sha256 with the SHA-256 of its
// body (never "aws-chunked": OSS rejects chunked signing), so the server checks each part's
// bytes; x-amz-security-token is sent with temporary credentials. Thread-safe: one store serves
// parallel part uploads.
//
// CompleteMultipartUpload waits up to S3Options::complete_timeout for its answer. When the answer
// was lost (a transport failure) or a retry finds the upload gone (NoSuchUpload), the object is
// checked by HEAD: it counts as completed only when its size is the parts' sum and its ETag the
// one the parts make (s3_protocol.h: completed_object_mismatch); anything else is an error.
class S3Store final : public ObjectStore {
 public:
  // REQUIRES: location.kind == s3. `credentials` must not be null.
  S3Store(StoreLocation location, std::shared_ptr<CredentialProvider> credentials, S3Options options = {});

  std::string describe() const override;
  Result<std::string> put(std::string_view key, const Payload& payload) override;
  Result<std::string> get(std::string_view key, const ReadOptions& options, std::uint64_t max_bytes) override;
  Result<std::uint64_t> get_to_file(std::string_view key, const std::filesystem::path& file,
                                    std::uint64_t file_offset, const ReadOptions& options) override;
  Result<ObjectInfo> head(std::string_view key) override;
  Result<ListPage> list(std::string_view prefix, const std::optional<std::string>& after,
                        int max_keys) override;
  Result<void> remove(std::string_view key) override;
  Result<std::string> create_multipart(std::string_view key) override;
  Result<PartInfo> upload_part(std::string_view key, std::string_view upload_id, int number,
                               const Payload& payload) override;
  Result<std::vector<PartInfo>> list_parts(std::string_view key, std::string_view upload_id) override;
  Result<std::string> complete_multipart(std::string_view key, std::string_view upload_id,
                                         std::span<const PartInfo> parts) override;
  Result<void> abort_multipart(std::string_view key, std::string_view upload_id) override;
  Result<std::vector<UploadInfo>> list_multipart_uploads(std::string_view prefix) override;

  // One request as the store sends it; public for tests of the wire format.
  struct Call {
    std::string method;
    std::string key;  // full object key (prefix included); empty for bucket-level calls
    QueryParameters query;
    SignedHeaderList headers;
    Payload payload;
    std::string payload_sha256;  // filled by send() when empty
    std::filesystem::path response_file;
    std::uint64_t response_file_offset = 0;
    bool response_file_truncate = false;
    std::uint64_t max_response_bytes = 16u << 20;
    std::optional<std::chrono::milliseconds> stall_timeout;  // instead of S3Options::stall_timeout
  };
  // What send() went through, for a caller that must judge a failure.
  struct SendTrace {
    int attempts = 0;          // tries made
    bool answer_lost = false;  // some try ended without a whole answer: the server may have acted
  };
  // Signs and sends `call`, retrying transient failures; a 2xx answer or an error whose message
  // names the operation and the S3 error (code, message, request id; never a secret).
  // `trace`, when given, receives what happened on the way.
  [[nodiscard]] Result<platform::HttpsResponse> send(Call call, SendTrace* trace = nullptr) const;

 private:
  [[nodiscard]] Result<std::string> full_key(std::string_view key) const;
  [[nodiscard]] std::string display(std::string_view full_key) const;
  [[nodiscard]] Result<platform::HttpsResponse> read(std::string_view key, Call call,
                                                     const ReadOptions& options) const;
  [[nodiscard]] Result<std::string> confirm_completed(std::string_view key, std::span<const PartInfo> parts,
                                                      const Error& failure, const std::string& what);

  const StoreLocation m_location;
  const std::shared_ptr<CredentialProvider> m_credentials;
  const S3Options m_options;
};

}  // namespace gpuhost::store
