#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "store/object_store.h"

namespace gpuhost::store {

// The S3 REST API's XML bodies, as pure functions (docs.aws.amazon.com/AmazonS3/latest/API/:
// API_ListObjectsV2, API_ListObjects, API_CreateMultipartUpload, API_ListParts,
// API_CompleteMultipartUpload, API_ListMultipartUploads, ErrorResponses).

// An error answer: <Error><Code/><Message/><RequestId/></Error>, or for bodiless answers (HEAD)
// the status and the x-amz-request-id header. Only these fields are kept: S3's
// SignatureDoesNotMatch body also carries the string to sign and the canonical request, which
// never reach a message.
struct S3Error {
  int status = 0;
  std::string code;  // "SlowDown", "NoSuchKey"; empty when the body had none
  std::string message;
  std::string request_id;
  std::string oss_ec;  // Alibaba OSS's <EC> diagnostic code, e.g. "0002-00000033"
};

[[nodiscard]] S3Error parse_s3_error(int status, std::string_view body, std::string_view request_id_header);

// "SlowDown: Please reduce your request rate. (HTTP 503, request id 4442587FB7D0A2F9)" plus a
// "; <fix>" where the code has a known fix.
[[nodiscard]] std::string describe_s3_error(const S3Error& error);

// The ErrorCode an S3 error maps to: not_found for NoSuchKey/NoSuchUpload/NoSuchBucket/404,
// permission_denied for 403s, timeout for RequestTimeout, unavailable for 5xx and SlowDown,
// invalid_argument for the rest of 4xx.
[[nodiscard]] ErrorCode s3_error_code(const S3Error& error);

// Transient: 500, 502, 503, 504, SlowDown, InternalError, RequestTimeout, 429.
[[nodiscard]] bool s3_error_is_transient(const S3Error& error);

// Listing answers. `strip` (the store's prefix) is removed from each key.
[[nodiscard]] Result<ListPage> parse_list_objects_v2(std::string_view body, std::string_view strip);
// ListObjects (v1) pages by marker: the next page starts after the last key of this one.
[[nodiscard]] Result<ListPage> parse_list_objects_v1(std::string_view body, std::string_view strip);

[[nodiscard]] Result<std::string> parse_create_multipart(std::string_view body);  // the upload id

struct PartsPage {
  std::vector<PartInfo> parts;
  std::optional<std::string> next_marker;  // NextPartNumberMarker while IsTruncated
};
[[nodiscard]] Result<PartsPage> parse_list_parts(std::string_view body);

struct UploadsPage {
  std::vector<UploadInfo> uploads;
  std::optional<std::pair<std::string, std::string>> next;  // (key marker, upload id marker)
};
[[nodiscard]] Result<UploadsPage> parse_list_multipart_uploads(std::string_view body, std::string_view strip);

[[nodiscard]] std::string complete_multipart_body(std::span<const PartInfo> parts);

// CompleteMultipartUpload can answer 200 and still fail: the error is in the body ("a 200 OK
// response can contain either a success or an error": API_CompleteMultipartUpload). Returns the
// ETag, or the S3Error that the body holds.
struct CompleteResult {
  std::string etag;
  std::optional<S3Error> error;
};
[[nodiscard]] Result<CompleteResult> parse_complete_multipart(std::string_view body);

// The ETag S3 gives the object that completing `parts` makes: the hex MD5 of the concatenated
// binary MD5s of the parts, then "-" and the part count ("f77dc0eecdebcd774a2a22cb393ad2ff-2").
// AWS calls ETags opaque; this form is what S3 produces where a part's ETag is its MD5 and what
// other servers copy: Huawei OBS documents it as MD5(M1M2...MN)-N
// (support.huaweicloud.com/api-obs/obs_04_0102.html), Cloudflare R2 as "mimic the behavior of S3"
// with a worked example (developers.cloudflare.com/r2/objects/multipart-objects), and moto
// computes it so (moto/s3/models.py, FakeMultipart.complete). nullopt when some part's ETag is
// not a plain 32-hex-digit MD5 (S3 with SSE-KMS or SSE-C, docs.aws.amazon.com/AmazonS3/latest/
// API/API_Object.html; some other servers), or when this build has no MD5. Lower case.
[[nodiscard]] std::optional<std::string> expected_multipart_etag(std::span<const PartInfo> parts);

// Whether `object` (a HEAD answer) is what completing `parts` makes: its size is the sum of the
// parts' sizes, and its ETag equals expected_multipart_etag(parts), or, where that cannot be
// computed, at least ends in "-N" for N parts (weaker: a same-sized object of as many parts, with
// opaque part ETags, passes too). Empty when it is; otherwise why not, for a message.
[[nodiscard]] std::string completed_object_mismatch(const ObjectInfo& object,
                                                    std::span<const PartInfo> parts);

// "2026-05-01T12:00:00Z" or "2026-05-01T12:00:00.000Z" (S3's Initiated and LastModified, IMDS's
// Expiration); nullopt when it is not that form.
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> parse_iso8601_utc(std::string_view text);

// ETags arrive quoted ("\"9b2cf535f27731c974343645a3985328\""); we keep them bare.
[[nodiscard]] std::string unquote_etag(std::string_view etag);

}  // namespace gpuhost::store
