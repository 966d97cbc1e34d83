#include "store/sigv4.h"

#include <algorithm>
#include <cctype>

#include "base/strings.h"
#include "base/time_format.h"
#include "platform/crypto.h"

namespace gpuhost::store {
namespace {

std::string_view as_bytes(const platform::Sha256Digest& digest) {
  return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

// "Trimall": leading and trailing spaces removed, inner runs of whitespace made one space.
std::string canonical_value(std::string_view value) {
  std::string out;
  bool space = false;
  for (char c : trim(value)) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

}  // namespace

std::string uri_encode(std::string_view text, SlashEncoding slash) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        (c == '/' && slash == SlashEncoding::keep)) {
      out += ch;
    } else {
      out += '%';
      out += k_hex[c >> 4];
      out += k_hex[c & 15];
    }
  }
  return out;
}

std::string canonical_query(const QueryParameters& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query)
    encoded.emplace_back(uri_encode(name, SlashEncoding::encode), uri_encode(value, SlashEncoding::encode));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out += '&';
    out += name + "=" + value;
  }
  return out;
}

std::string amz_date(std::chrono::system_clock::time_point t) {
  std::string out;
  for (char c : format_rfc3339_utc(t))  // "2015-08-30T12:36:00Z" -> "20150830T123600Z"
    if (c != '-' && c != ':') out += c;
  return out;
}

std::string sha256_hex(std::string_view data) {
  return platform::to_hex(platform::sha256(data));
}

Signature sign(const SignableRequest& request, const Credentials& credentials, const SigningScope& scope,
               std::chrono::system_clock::time_point now) {
  Signature out;
  out.amz_date = amz_date(now);
  std::string date = out.amz_date.substr(0, 8);

  SignedHeaderList headers = request.headers;
  headers.emplace_back("host", request.host);
  headers.emplace_back("x-amz-date", out.amz_date);
  out.headers_to_add.emplace_back("x-amz-date", out.amz_date);
  if (!credentials.session_token.empty()) {
    headers.emplace_back("x-amz-security-token", credentials.session_token.reveal());
    out.headers_to_add.emplace_back("x-amz-security-token", credentials.session_token.reveal());
  }
  for (auto& [name, value] : headers) {
    name = to_lower(name);
    value = canonical_value(value);
  }
  // Sorted by name; a stable sort keeps repeated headers in the order given, as they are joined.
  std::stable_sort(headers.begin(), headers.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });

  std::string canonical_headers;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    if (i > 0 && headers[i].first == headers[i - 1].first) {
      canonical_headers.back() = ',';  // replaces the previous line's '\n'
      canonical_headers += headers[i].second + "\n";
      continue;
    }
    if (!out.signed_headers.empty()) out.signed_headers += ';';
    out.signed_headers += headers[i].first;
    canonical_headers += headers[i].first + ":" + headers[i].second + "\n";
  }

  out.canonical_request = request.method + "\n" + request.canonical_uri + "\n" +
                          canonical_query(request.query) + "\n" + canonical_headers + "\n" +
                          out.signed_headers + "\n" + request.payload_hash;
  std::string credential_scope = date + "/" + scope.region + "/" + scope.service + "/aws4_request";
  out.string_to_sign = "AWS4-HMAC-SHA256\n" + out.amz_date + "\n" + credential_scope + "\n" +
                       sha256_hex(out.canonical_request);

  auto key = platform::hmac_sha256("AWS4" + credentials.secret_access_key.reveal(), date);
  key = platform::hmac_sha256(as_bytes(key), scope.region);
  key = platform::hmac_sha256(as_bytes(key), scope.service);
  key = platform::hmac_sha256(as_bytes(key), "aws4_request");
  out.signature = platform::to_hex(platform::hmac_sha256(as_bytes(key), out.string_to_sign));

  out.headers_to_add.emplace_back(
      "Authorization", "AWS4-HMAC-SHA256 Credential=" + credentials.access_key_id + "/" + credential_scope +
                           ", SignedHeaders=" + out.signed_headers + ", Signature=" + out.signature);
  return out;
}

}  // namespace gpuhost::store
