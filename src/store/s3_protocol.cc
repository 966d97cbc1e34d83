#include "store/s3_protocol.h"

#include <algorithm>
#include <cctype>

#include "base/strings.h"
#include "platform/crypto.h"
#include "store/xml.h"

namespace gpuhost::store {
namespace {

// `root` is S3's name for the answer's root element. moto 5 names some "...Response" instead of
// "...Result" (ListParts, CompleteMultipartUpload), so that spelling is accepted too.
bool is_md5_hex(std::string_view etag) {
  return etag.size() == 32 &&
         std::ranges::all_of(etag, [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

Result<XmlElement> parse_answer(std::string_view body, std::string_view root, std::string_view what) {
  auto xml = parse_xml(body);
  if (!xml) return std::unexpected(with_context(xml.error(), "reading the " + std::string(what) + " answer"));
  std::string alias(root);
  if (alias.ends_with("Result")) alias.replace(alias.size() - 6, 6, "Response");
  if (xml->name != root && xml->name != alias)
    return make_error(ErrorCode::parse_error, "reading the " + std::string(what) + " answer: expected <" +
                                                  std::string(root) + ">, got <" + xml->name + ">");
  return xml;
}

bool is_true(std::string_view text) {
  return iequals(trim(text), "true");
}

Result<std::uint64_t> parse_size(const XmlElement& e, std::string_view what) {
  std::string text = std::string(trim(e.child_text("Size")));
  auto size = parse_int(text);
  if (!size || *size < 0)
    return make_error(ErrorCode::parse_error,
                      "reading the " + std::string(what) + " answer: bad <Size> \"" + text + "\"");
  return static_cast<std::uint64_t>(*size);
}

std::optional<std::string> strip_prefix(const std::string& key, std::string_view strip) {
  if (!std::string_view(key).starts_with(strip)) return std::nullopt;
  return key.substr(strip.size());
}

Result<std::vector<ObjectInfo>> parse_contents(const XmlElement& root, std::string_view strip,
                                               std::string_view what) {
  std::vector<ObjectInfo> objects;
  for (const XmlElement* c : root.children_named("Contents")) {
    auto key = strip_prefix(c->child_text("Key"), strip);
    if (!key) continue;
    ObjectInfo info;
    info.key = std::move(*key);
    info.size = GPUHOST_TRY(parse_size(*c, what));
    info.etag = unquote_etag(c->child_text("ETag"));
    info.last_modified = c->child_text("LastModified");
    objects.push_back(std::move(info));
  }
  return objects;
}

}  // namespace

std::optional<std::chrono::system_clock::time_point> parse_iso8601_utc(std::string_view text) {
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text.back() != 'Z')
    return std::nullopt;
  std::string_view fraction = text.substr(19, text.size() - 20);
  if (!fraction.empty() && (fraction[0] != '.' || fraction.size() < 2 ||
                            fraction.substr(1).find_first_not_of("0123456789") != std::string_view::npos))
    return std::nullopt;
  auto number = [&](std::size_t at, std::size_t n) { return parse_int(text.substr(at, n)); };
  auto y = number(0, 4), mo = number(5, 2), d = number(8, 2), h = number(11, 2), mi = number(14, 2),
       s = number(17, 2);
  if (!y || !mo || !d || !h || !mi || !s) return std::nullopt;
  std::chrono::year_month_day date{std::chrono::year(static_cast<int>(*y)),
                                   std::chrono::month(static_cast<unsigned>(*mo)),
                                   std::chrono::day(static_cast<unsigned>(*d))};
  if (!date.ok() || *h > 23 || *mi > 59 || *s > 60) return std::nullopt;
  return std::chrono::sys_days(date) + std::chrono::hours(*h) + std::chrono::minutes(*mi) +
         std::chrono::seconds(*s);
}

std::string unquote_etag(std::string_view etag) {
  etag = trim(etag);
  if (etag.starts_with("W/")) etag.remove_prefix(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return std::string(etag);
}

S3Error parse_s3_error(int status, std::string_view body, std::string_view request_id_header) {
  S3Error error;
  error.status = status;
  error.request_id = std::string(request_id_header);
  if (auto xml = parse_xml(body); xml && xml->name == "Error") {
    error.code = std::string(trim(xml->child_text("Code")));
    error.message = std::string(trim(xml->child_text("Message")));
    if (std::string id(trim(xml->child_text("RequestId"))); !id.empty()) error.request_id = id;
    error.oss_ec = std::string(trim(xml->child_text("EC")));
  }
  return error;
}

std::string describe_s3_error(const S3Error& e) {
  std::string text = e.code.empty() ? "HTTP " + std::to_string(e.status) : e.code;
  if (!e.message.empty()) text += ": " + e.message;
  std::vector<std::string> details;
  if (!e.code.empty()) details.push_back("HTTP " + std::to_string(e.status));
  if (!e.request_id.empty()) details.push_back("request id " + e.request_id);
  if (!e.oss_ec.empty()) details.push_back("OSS EC " + e.oss_ec);
  if (!details.empty()) text += " (" + join(details, ", ") + ")";

  const std::string& c = e.code;
  std::string fix;
  if (c == "SignatureDoesNotMatch")
    fix = "check the secret access key, and that region= is the bucket's region";
  else if (c == "InvalidAccessKeyId")
    fix = "the endpoint does not know this access key id; check the credentials and endpoint=";
  else if (c == "AccessDenied")
    fix = "the credentials lack permission for this operation on this bucket";
  else if (c.empty() && (e.status == 403 || e.status == 400))
    // HEAD answers have no body to name the cause.
    fix = "the server refused the request (wrong secret key, region or permissions?)";
  else if (c == "NoSuchBucket")
    fix = "check the bucket name, endpoint= and region=";
  else if (c == "PermanentRedirect" || c == "AuthorizationHeaderMalformed" ||
           c == "IllegalLocationConstraintException")
    fix = "the bucket is in another region; set region= to its region";
  else if (c == "ExpiredToken" || c == "TokenRefreshRequired")
    fix = "the temporary credentials expired; refresh them (AWS_SESSION_TOKEN)";
  else if (c == "RequestTimeTooSkewed")
    fix = "this machine's clock is off by more than 15 minutes; sync it (NTP)";
  else if (c == "SecondLevelDomainForbidden" || c == "VirtualHostDomainRequired")
    fix = "this provider needs virtual-hosted style; drop style=path";
  else if (c == "EntityTooSmall")
    fix = "every part but the last must be at least 5 MiB";
  else if (c == "XAmzContentSHA256Mismatch" || c == "BadDigest")
    fix = "the bytes changed while they were sent; the file was modified during the upload";
  else if (e.oss_ec == "0002-00000033")
    // alibabacloud.com/help/en/oss/support/0002-00000033
    fix = "SigV4 for OSS's S3-compatible API is not enabled for this account; ask Alibaba Cloud support";
  if (!fix.empty()) text += "; " + fix;
  return text;
}

ErrorCode s3_error_code(const S3Error& e) {
  if (e.code == "NoSuchKey" || e.code == "NoSuchUpload" || e.code == "NoSuchBucket" || e.status == 404)
    return ErrorCode::not_found;
  if (e.status == 403) return ErrorCode::permission_denied;
  if (e.code == "RequestTimeout") return ErrorCode::timeout;
  if (s3_error_is_transient(e)) return ErrorCode::unavailable;
  if (e.status == 412) return ErrorCode::invalid_argument;  // If-Match: the object changed
  if (e.status >= 400 && e.status < 500) return ErrorCode::invalid_argument;
  return ErrorCode::io_error;
}

bool s3_error_is_transient(const S3Error& e) {
  // docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html: 500 InternalError and
  // 503 SlowDown / ServiceUnavailable ask to retry; 400 RequestTimeout (idle socket) is safe to
  // retry; 429 is what some S3-compatible servers send instead of SlowDown.
  if (e.code == "SlowDown" || e.code == "InternalError" || e.code == "RequestTimeout" ||
      e.code == "ServiceUnavailable")
    return true;
  return e.status == 500 || e.status == 502 || e.status == 503 || e.status == 504 || e.status == 429;
}

Result<ListPage> parse_list_objects_v2(std::string_view body, std::string_view strip) {
  XmlElement root = GPUHOST_TRY(parse_answer(body, "ListBucketResult", "ListObjectsV2"));
  ListPage page;
  page.objects = GPUHOST_TRY(parse_contents(root, strip, "ListObjectsV2"));
  if (is_true(root.child_text("IsTruncated"))) {
    std::string token = root.child_text("NextContinuationToken");
    if (token.empty())
      return make_error(ErrorCode::parse_error,
                        "reading the ListObjectsV2 answer: truncated without a NextContinuationToken");
    page.next = token;
  }
  return page;
}

Result<ListPage> parse_list_objects_v1(std::string_view body, std::string_view strip) {
  XmlElement root = GPUHOST_TRY(parse_answer(body, "ListBucketResult", "ListObjects"));
  ListPage page;
  page.objects = GPUHOST_TRY(parse_contents(root, strip, "ListObjects"));
  if (is_true(root.child_text("IsTruncated"))) {
    // NextMarker is only sent with a delimiter; otherwise the last key is the marker.
    std::string marker = root.child_text("NextMarker");
    if (marker.empty()) {
      auto contents = root.children_named("Contents");
      if (contents.empty())
        return make_error(ErrorCode::parse_error,
                          "reading the ListObjects answer: truncated without keys or NextMarker");
      marker = contents.back()->child_text("Key");
    }
    page.next = marker;
  }
  return page;
}

Result<std::string> parse_create_multipart(std::string_view body) {
  XmlElement root = GPUHOST_TRY(parse_answer(body, "InitiateMultipartUploadResult", "CreateMultipartUpload"));
  std::string id(trim(root.child_text("UploadId")));
  if (id.empty())
    return make_error(ErrorCode::parse_error, "reading the CreateMultipartUpload answer: no <UploadId>");
  return id;
}

Result<PartsPage> parse_list_parts(std::string_view body) {
  XmlElement root = GPUHOST_TRY(parse_answer(body, "ListPartsResult", "ListParts"));
  PartsPage page;
  for (const XmlElement* p : root.children_named("Part")) {
    PartInfo part;
    auto number = parse_int(trim(p->child_text("PartNumber")));
    if (!number || *number < 1 || *number > 10000)
      return make_error(ErrorCode::parse_error, "reading the ListParts answer: bad <PartNumber>");
    part.number = static_cast<int>(*number);
    part.etag = unquote_etag(p->child_text("ETag"));
    part.size = GPUHOST_TRY(parse_size(*p, "ListParts"));
    page.parts.push_back(std::move(part));
  }
  if (is_true(root.child_text("IsTruncated"))) {
    std::string marker(trim(root.child_text("NextPartNumberMarker")));
    if (marker.empty())
      return make_error(ErrorCode::parse_error,
                        "reading the ListParts answer: truncated without a NextPartNumberMarker");
    page.next_marker = marker;
  }
  return page;
}

Result<UploadsPage> parse_list_multipart_uploads(std::string_view body, std::string_view strip) {
  XmlElement root = GPUHOST_TRY(parse_answer(body, "ListMultipartUploadsResult", "ListMultipartUploads"));
  UploadsPage page;
  for (const XmlElement* u : root.children_named("Upload")) {
    auto key = strip_prefix(u->child_text("Key"), strip);
    if (!key) continue;
    page.uploads.push_back(UploadInfo{std::move(*key), std::string(trim(u->child_text("UploadId"))),
                                      std::string(trim(u->child_text("Initiated")))});
  }
  if (is_true(root.child_text("IsTruncated")))
    page.next = std::pair(root.child_text("NextKeyMarker"), root.child_text("NextUploadIdMarker"));
  return page;
}

std::string complete_multipart_body(std::span<const PartInfo> parts) {
  std::string body = "<CompleteMultipartUpload>";
  for (const PartInfo& p : parts)
    body += "<Part><PartNumber>" + std::to_string(p.number) + "</PartNumber><ETag>" +
            xml_escape("\"" + p.etag + "\"") + "</ETag></Part>";
  body += "</CompleteMultipartUpload>";
  return body;
}

Result<CompleteResult> parse_complete_multipart(std::string_view body) {
  auto xml = parse_xml(body);
  if (!xml) return std::unexpected(with_context(xml.error(), "reading the CompleteMultipartUpload answer"));
  CompleteResult result;
  if (xml->name == "Error") {
    result.error = parse_s3_error(200, body, "");
    return result;
  }
  if (xml->name != "CompleteMultipartUploadResult" &&
      xml->name != "CompleteMultipartUploadResponse")  // moto 5
    return make_error(ErrorCode::parse_error,
                      "reading the CompleteMultipartUpload answer: unexpected <" + xml->name + ">");
  result.etag = unquote_etag(xml->child_text("ETag"));
  return result;
}

std::optional<std::string> expected_multipart_etag(std::span<const PartInfo> parts) {
  std::vector<std::uint8_t> digests;
  digests.reserve(parts.size() * 16);
  for (const PartInfo& part : parts) {
    if (!is_md5_hex(part.etag)) return std::nullopt;
    for (std::size_t i = 0; i < 32; i += 2)
      digests.push_back(static_cast<std::uint8_t>(*parse_int(std::string_view(part.etag).substr(i, 2), 16)));
  }
  auto digest = platform::md5(digests);
  if (!digest) return std::nullopt;
  return platform::to_hex(*digest) + "-" + std::to_string(parts.size());
}

std::string completed_object_mismatch(const ObjectInfo& object, std::span<const PartInfo> parts) {
  std::uint64_t size = 0;
  for (const PartInfo& part : parts) size += part.size;
  if (object.size != size)
    return "it holds " + std::to_string(object.size) + " bytes, the parts " + std::to_string(size);
  std::string etag = to_lower(object.etag);
  if (auto expected = expected_multipart_etag(parts)) {
    if (etag != *expected) return "its ETag is \"" + object.etag + "\", the parts make \"" + *expected + "\"";
    return {};
  }
  std::string suffix = "-" + std::to_string(parts.size());
  if (!etag.ends_with(suffix))
    return "its ETag \"" + object.etag + "\" is not that of an object of " + std::to_string(parts.size()) +
           " parts (\"...-" + std::to_string(parts.size()) + "\")";
  return {};
}

}  // namespace gpuhost::store
