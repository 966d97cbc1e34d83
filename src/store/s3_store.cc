#include "store/s3_store.h"

#include <algorithm>
#include <fstream>

#include "base/strings.h"
#include "platform/crypto.h"
#include "store/s3_protocol.h"

namespace gpuhost::store {
namespace {

using platform::HttpsRequest;
using platform::HttpsResponse;

// S3 keys are at most 1,024 bytes of UTF-8 (docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
constexpr std::size_t k_max_key_bytes = 1024;

Result<std::string> payload_sha256(const Payload& payload) {
  if (payload.source != Payload::Source::file) return sha256_hex(payload.memory);
  std::ifstream in(payload.file, std::ios::binary);
  if (!in) return make_error(ErrorCode::not_found, "hashing " + payload.file.string() + ": cannot open it");
  in.seekg(static_cast<std::streamoff>(payload.offset));
  platform::Sha256 hash;
  std::string buffer(1u << 20, '\0');
  std::uint64_t left = payload.length;
  while (left > 0) {
    auto chunk = static_cast<std::streamsize>(std::min<std::uint64_t>(left, buffer.size()));
    in.read(buffer.data(), chunk);
    if (in.gcount() != chunk)
      return make_error(ErrorCode::io_error, "hashing " + payload.file.string() +
                                                 ": the file ended before byte " +
                                                 std::to_string(payload.offset + payload.length));
    hash.update(buffer.data(), static_cast<std::size_t>(chunk));
    left -= static_cast<std::uint64_t>(chunk);
  }
  auto digest = hash.finish();
  return platform::to_hex(digest);
}

bool is_success(int status) {
  return status >= 200 && status < 300;
}

std::string range_header(const ByteRange& range) {
  return "bytes=" + std::to_string(range.offset) + "-" + std::to_string(range.offset + range.length - 1);
}

}  // namespace

WireTarget wire_target(const StoreLocation& location, std::string_view key, const QueryParameters& query) {
  WireTarget out;
  bool virtual_hosted = location.style == AddressingStyle::virtual_hosted;
  out.host = virtual_hosted ? location.bucket + "." + location.endpoint_host : location.endpoint_host;
  bool default_port = location.endpoint_port == 0 ||
                      location.endpoint_port == (location.endpoint_scheme == "https" ? 443 : 80);
  if (!default_port) out.host += ":" + std::to_string(location.endpoint_port);
  std::string encoded = uri_encode(key, SlashEncoding::keep);
  out.path = virtual_hosted ? "/" + encoded : "/" + location.bucket + (key.empty() ? "" : "/" + encoded);
  std::string q = canonical_query(query);
  out.url = location.endpoint_scheme + "://" + out.host + out.path + (q.empty() ? "" : "?" + q);
  return out;
}

S3Store::S3Store(StoreLocation location, std::shared_ptr<CredentialProvider> credentials, S3Options options)
    : m_location(std::move(location)), m_credentials(std::move(credentials)), m_options(options) {}

std::string S3Store::describe() const {
  std::string endpoint = m_location.endpoint_scheme + "://" + m_location.endpoint_host;
  if (m_location.endpoint_port) endpoint += ":" + std::to_string(m_location.endpoint_port);
  return m_location.display() + " (" + endpoint + ", " + provider_name(m_location.provider) + ", region " +
         m_location.region + ", " + (m_location.style == AddressingStyle::path ? "path" : "virtual-hosted") +
         " style)";
}

Result<std::string> S3Store::full_key(std::string_view key) const {
  if (key.empty() || key.front() == '/')
    return make_error(ErrorCode::invalid_argument,
                      "object key \"" + std::string(key) + "\" must be non-empty and not start with '/'");
  std::string full = m_location.prefix + std::string(key);
  if (full.size() > k_max_key_bytes)
    return make_error(ErrorCode::invalid_argument,
                      "object key \"" + full + "\" is longer than S3's 1,024 bytes");
  return full;
}

std::string S3Store::display(std::string_view full_key) const {
  return "s3://" + m_location.bucket + "/" + std::string(full_key);
}

Result<HttpsResponse> S3Store::send(Call call, SendTrace* trace) const {
  std::string what = call.method + " " + display(call.key);
  if (call.payload_sha256.empty()) {
    auto hash = payload_sha256(call.payload);
    if (!hash) return std::unexpected(with_context(hash.error(), what));
    call.payload_sha256 = *hash;
  }

  WireTarget target = wire_target(m_location, call.key, call.query);
  SignableRequest signable;
  signable.method = call.method;
  signable.host = target.host;
  signable.canonical_uri = target.path;
  signable.query = call.query;
  signable.headers = call.headers;
  signable.headers.emplace_back("x-amz-content-sha256", call.payload_sha256);
  signable.payload_hash = call.payload_sha256;
  SigningScope scope{m_location.region, "s3"};

  bool refreshed = false;
  const int max_attempts = std::max(1, m_options.retry.max_attempts);
  for (int attempt = 1;; ++attempt) {
    if (trace) trace->attempts = attempt;
    if (m_options.cancel && m_options.cancel->load())
      return make_error(ErrorCode::timeout, what + ": cancelled");
    auto credentials = m_credentials->credentials();
    if (!credentials) return std::unexpected(with_context(credentials.error(), what));
    Signature signature = sign(signable, *credentials, scope, std::chrono::system_clock::now());

    HttpsRequest request;
    request.method = call.method;
    request.url = target.url;
    request.headers = signable.headers;
    for (auto& header : signature.headers_to_add) request.headers.push_back(header);
    request.body = call.payload;
    request.response_file = call.response_file;
    request.response_file_offset = call.response_file_offset;
    request.response_file_truncate = call.response_file_truncate;
    request.max_response_bytes = std::max<std::uint64_t>(call.max_response_bytes, 1u << 20);
    request.connect_timeout = m_options.connect_timeout;
    request.stall_timeout = call.stall_timeout.value_or(m_options.stall_timeout);
    request.cancel = m_options.cancel;

    auto response = platform::https_request(request);
    bool transient = false;
    std::optional<Error> failure;
    if (!response) {
      if (trace) trace->answer_lost = true;
      bool cancelled = m_options.cancel && m_options.cancel->load();
      transient = !cancelled && transport_error_is_transient(response.error());
      failure = Error{response.error().code, what + ": " + response.error().message};
    } else if (is_success(response->status)) {
      if (!call.response_file.empty() || response->body.size() <= call.max_response_bytes) return response;
      return make_error(ErrorCode::parse_error, what + ": the answer is larger than " +
                                                    std::to_string(call.max_response_bytes) + " bytes");
    } else {
      S3Error error =
          parse_s3_error(response->status, response->body, response->header("x-amz-request-id").value_or(""));
      if (error.code.empty() && error.status == 404 && call.method == "HEAD") error.code = "NoSuchKey";
      if ((error.code == "ExpiredToken" || error.code == "TokenRefreshRequired") && !refreshed) {
        m_credentials->invalidate();  // instance-role credentials rotate; fetch the new ones once
        refreshed = true;
        --attempt;
        continue;
      }
      transient = s3_error_is_transient(error);
      failure = Error{s3_error_code(error), what + ": " + describe_s3_error(error)};
    }
    if (!transient || attempt >= max_attempts) {
      if (transient)
        failure->message += " (gave up after " + std::to_string(attempt) + " attempts)";
      else if (attempt > 1)
        failure->message += " (on attempt " + std::to_string(attempt) + ")";
      return std::unexpected(*failure);
    }
    if (!sleep_unless_cancelled(m_options.retry.delay(attempt, random_unit()), m_options.cancel))
      return make_error(ErrorCode::timeout, what + ": cancelled");
  }
}

Result<std::string> S3Store::put(std::string_view key, const Payload& payload) {
  Call call;
  call.method = "PUT";
  call.key = GPUHOST_TRY(full_key(key));
  // An explicit type: a body sent as application/x-www-form-urlencoded can be stored empty by
  // some servers (research/02 §6.4, moto).
  call.headers = {{"Content-Type", "application/octet-stream"}};
  call.payload = payload;
  auto response = GPUHOST_TRY(send(std::move(call)));
  return unquote_etag(response.header("ETag").value_or(""));
}

Result<HttpsResponse> S3Store::read(std::string_view key, Call call, const ReadOptions& options) const {
  call.method = "GET";
  call.key = GPUHOST_TRY(full_key(key));
  std::string what = "GET " + display(call.key);
  if (options.range) {
    if (options.range->length == 0)
      return make_error(ErrorCode::invalid_argument, what + ": an empty byte range");
    call.headers.emplace_back("Range", range_header(*options.range));
  }
  if (!options.if_match.empty()) call.headers.emplace_back("If-Match", "\"" + options.if_match + "\"");
  auto response = GPUHOST_TRY(send(std::move(call)));
  if (options.range && response.status != 206)
    return make_error(ErrorCode::io_error, what + ": asked for " + range_header(*options.range) +
                                               " but the server answered HTTP " +
                                               std::to_string(response.status) +
                                               " (it ignored the Range header)");
  return response;
}

Result<std::string> S3Store::get(std::string_view key, const ReadOptions& options, std::uint64_t max_bytes) {
  Call call;
  call.max_response_bytes = max_bytes;
  auto response = GPUHOST_TRY(read(key, std::move(call), options));
  return std::move(response.body);
}

Result<std::uint64_t> S3Store::get_to_file(std::string_view key, const std::filesystem::path& file,
                                           std::uint64_t file_offset, const ReadOptions& options) {
  Call call;
  call.response_file = file;
  call.response_file_offset = file_offset;
  // A whole object replaces what the file held past the offset; a range fills its slot only.
  call.response_file_truncate = !options.range;
  call.max_response_bytes = UINT64_MAX;
  auto response = GPUHOST_TRY(read(key, std::move(call), options));
  return response.body_bytes;
}

Result<ObjectInfo> S3Store::head(std::string_view key) {
  Call call;
  call.method = "HEAD";
  call.key = GPUHOST_TRY(full_key(key));
  std::string what = "HEAD " + display(call.key);
  auto response = GPUHOST_TRY(send(std::move(call)));
  ObjectInfo info;
  info.key = std::string(key);
  auto length = parse_int(trim(response.header("Content-Length").value_or("")));
  if (!length || *length < 0)
    return make_error(ErrorCode::parse_error, what + ": the answer has no Content-Length");
  info.size = static_cast<std::uint64_t>(*length);
  info.etag = unquote_etag(response.header("ETag").value_or(""));
  info.last_modified = response.header("Last-Modified").value_or("");
  return info;
}

Result<ListPage> S3Store::list(std::string_view prefix, const std::optional<std::string>& after,
                               int max_keys) {
  Call call;
  call.method = "GET";
  std::string full_prefix = m_location.prefix + std::string(prefix);
  call.query = {{"prefix", full_prefix}, {"max-keys", std::to_string(std::clamp(max_keys, 1, 1000))}};
  if (m_location.list_objects_v1) {
    if (after) call.query.emplace_back("marker", *after);
  } else {
    call.query.emplace_back("list-type", "2");
    if (after) call.query.emplace_back("continuation-token", *after);
  }
  auto response = GPUHOST_TRY(send(std::move(call)));
  auto page = m_location.list_objects_v1 ? parse_list_objects_v1(response.body, m_location.prefix)
                                         : parse_list_objects_v2(response.body, m_location.prefix);
  if (!page) return std::unexpected(with_context(page.error(), "listing " + display(full_prefix)));
  return page;
}

Result<void> S3Store::remove(std::string_view key) {
  Call call;
  call.method = "DELETE";
  call.key = GPUHOST_TRY(full_key(key));
  auto response = send(std::move(call));
  if (!response && response.error().code != ErrorCode::not_found) return std::unexpected(response.error());
  return {};
}

Result<std::string> S3Store::create_multipart(std::string_view key) {
  Call call;
  call.method = "POST";
  call.key = GPUHOST_TRY(full_key(key));
  call.query = {{"uploads", ""}};
  call.headers = {{"Content-Type", "application/octet-stream"}};
  std::string what = "POST " + display(call.key) + "?uploads";
  auto response = GPUHOST_TRY(send(std::move(call)));
  auto id = parse_create_multipart(response.body);
  if (!id) return std::unexpected(with_context(id.error(), what));
  return id;
}

Result<PartInfo> S3Store::upload_part(std::string_view key, std::string_view upload_id, int number,
                                      const Payload& payload) {
  Call call;
  call.method = "PUT";
  call.key = GPUHOST_TRY(full_key(key));
  if (number < 1 || number > 10000)
    return make_error(ErrorCode::invalid_argument, "uploading part " + std::to_string(number) + " of " +
                                                       display(call.key) +
                                                       ": part numbers run from 1 to 10,000");
  call.query = {{"partNumber", std::to_string(number)}, {"uploadId", std::string(upload_id)}};
  call.payload = payload;
  call.payload_sha256 = GPUHOST_TRY(payload_sha256(payload));
  PartInfo part;
  part.number = number;
  part.size = payload.size();
  part.sha256 = call.payload_sha256;
  auto response = GPUHOST_TRY(send(std::move(call)));
  part.etag = unquote_etag(response.header("ETag").value_or(""));
  if (part.etag.empty())
    return make_error(ErrorCode::parse_error, "uploading part " + std::to_string(number) + " of " +
                                                  display(m_location.prefix + std::string(key)) +
                                                  ": the answer has no ETag");
  return part;
}

Result<std::vector<PartInfo>> S3Store::list_parts(std::string_view key, std::string_view upload_id) {
  std::vector<PartInfo> parts;
  std::optional<std::string> marker;
  std::string full = GPUHOST_TRY(full_key(key));
  for (;;) {
    Call call;
    call.method = "GET";
    call.key = full;
    call.query = {{"uploadId", std::string(upload_id)}};
    if (marker) call.query.emplace_back("part-number-marker", *marker);
    auto response = GPUHOST_TRY(send(std::move(call)));
    auto page = parse_list_parts(response.body);
    if (!page) return std::unexpected(with_context(page.error(), "listing the parts of " + display(full)));
    for (PartInfo& p : page->parts) parts.push_back(std::move(p));
    if (!page->next_marker) return parts;
    marker = page->next_marker;
  }
}

Result<std::string> S3Store::complete_multipart(std::string_view key, std::string_view upload_id,
                                                std::span<const PartInfo> parts) {
  std::string full = GPUHOST_TRY(full_key(key));
  std::string what = "completing the multipart upload of " + display(full);
  if (parts.empty()) return make_error(ErrorCode::invalid_argument, what + ": no parts");
  for (std::size_t i = 1; i < parts.size(); ++i)
    if (parts[i].number <= parts[i - 1].number)
      return make_error(ErrorCode::invalid_argument, what + ": parts must be in ascending order of number");
  std::string body = complete_multipart_body(parts);
  const int max_attempts = std::max(1, m_options.retry.max_attempts);
  bool answer_lost = false;
  for (int round = 1;; ++round) {
    Call call;
    call.method = "POST";
    call.key = full;
    call.query = {{"uploadId", std::string(upload_id)}};
    call.headers = {{"Content-Type", "application/xml"}};
    call.payload = Payload::from_memory(body);
    call.stall_timeout = m_options.complete_timeout;
    SendTrace trace;
    auto response = send(std::move(call), &trace);
    answer_lost = answer_lost || trace.answer_lost;
    if (!response) {
      // A Complete that went through but whose answer was lost leaves a retry finding the upload
      // gone, or no answer at all: only the object itself can say whether it completed.
      bool gone = response.error().code == ErrorCode::not_found && (round > 1 || trace.attempts > 1);
      if (gone || answer_lost) return confirm_completed(key, parts, response.error(), what);
      return std::unexpected(response.error());
    }
    auto result = parse_complete_multipart(response->body);
    if (!result) return std::unexpected(with_context(result.error(), what));
    if (!result->error) return result->etag;
    std::string failure = what + ": " + describe_s3_error(*result->error);
    if (!s3_error_is_transient(*result->error) || round >= max_attempts)
      return make_error(s3_error_code(*result->error), failure);
    if (!sleep_unless_cancelled(m_options.retry.delay(round, random_unit()), m_options.cancel))
      return make_error(ErrorCode::timeout, what + ": cancelled");
  }
}

// Never a guess: the object counts as completed only when it is exactly what these parts make
// (completed_object_mismatch), since another writer may have put the key meanwhile.
Result<std::string> S3Store::confirm_completed(std::string_view key, std::span<const PartInfo> parts,
                                               const Error& failure, const std::string& what) {
  if (m_options.cancel && m_options.cancel->load()) return std::unexpected(failure);
  auto info = head(key);
  if (!info) {
    if (info.error().code == ErrorCode::not_found)
      return make_error(failure.code, failure.message + " (and no object is at the key)");
    return make_error(failure.code, failure.message + "; checking whether it completed anyway failed too: " +
                                        info.error().message);
  }
  std::string mismatch = completed_object_mismatch(*info, parts);
  if (mismatch.empty()) return info->etag;
  return make_error(ErrorCode::io_error,
                    what + ": the outcome of the Complete request is unknown (" + failure.message +
                        ") and the object now at the key is not the one these parts make: " + mismatch +
                        "; another writer may have replaced it. Upload the file again");
}

Result<void> S3Store::abort_multipart(std::string_view key, std::string_view upload_id) {
  Call call;
  call.method = "DELETE";
  call.key = GPUHOST_TRY(full_key(key));
  call.query = {{"uploadId", std::string(upload_id)}};
  auto response = send(std::move(call));
  if (!response && response.error().code != ErrorCode::not_found) return std::unexpected(response.error());
  return {};
}

Result<std::vector<UploadInfo>> S3Store::list_multipart_uploads(std::string_view prefix) {
  std::vector<UploadInfo> uploads;
  std::string full_prefix = m_location.prefix + std::string(prefix);
  std::optional<std::pair<std::string, std::string>> marker;
  for (;;) {
    Call call;
    call.method = "GET";
    call.query = {{"uploads", ""}, {"prefix", full_prefix}};
    if (marker) {
      call.query.emplace_back("key-marker", marker->first);
      call.query.emplace_back("upload-id-marker", marker->second);
    }
    auto response = GPUHOST_TRY(send(std::move(call)));
    auto page = parse_list_multipart_uploads(response.body, m_location.prefix);
    if (!page)
      return std::unexpected(
          with_context(page.error(), "listing the multipart uploads under " + display(full_prefix)));
    for (UploadInfo& u : page->uploads) uploads.push_back(std::move(u));
    if (!page->next || page->next->first.empty()) return uploads;
    marker = page->next;
  }
}

}  // namespace gpuhost::store
