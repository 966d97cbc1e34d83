// A lean S3-compatible HTTP/1.1 endpoint for the object-store benchmarks (bench/store_throughput.py,
// bench/notice_to_durable.py). It exists to measure S3 *clients* — gpuhost's and `aws s3 cp` —
// on loopback without the server being the bottleneck, as moto_server is (one Python process that
// re-reads the whole object for every ranged GET). It is not a test double and not a model of S3:
//   - no signature checking: any Authorization header (or none) is accepted;
//   - x-amz-content-sha256 and x-amz-checksum-* are not verified (Content-MD5 is), so the server
//     spends no CPU on the digests S3 itself checks on its own machines;
//   - path-style addressing only, no versioning, ACLs, CopyObject, DeleteObjects, aws-chunked
//     bodies (SigV4 streaming; botocore sends it only over https) or persistence: objects live
//     while the process does.
//
//   s3_endpoint DIR [--host 127.0.0.1] [--port 0] [--etags md5|opaque] [--verbose]
//
// Prints {"port": N} as its first stdout line, then serves until killed. Request bodies are
// streamed straight into files under DIR (tmpfs such as /dev/shm keeps a disk out of the figures),
// one file per PUT and per part; a completed multipart upload is served from its part files, so
// completing it changes metadata only, as on S3, instead of copying gigabytes. One thread per
// connection, keep-alive, 1 MiB reads and writes, TCP_NODELAY; socket buffer sizes are left to
// the kernel's autotuning (setting SO_RCVBUF would switch it off).
//
// ETags (--etags md5, the default) are S3's: the hex MD5 of a PUT object; for a multipart object
// the MD5 of the concatenated binary part MD5s followed by "-<parts>" (docs.aws.amazon.com/
// AmazonS3/latest/userguide/checking-object-integrity.html), computed while the body streams in.
// Neither client reads them as digests: gpuhost compares them (If-Match, ListParts) and aws-cli
// 1.45 / s3transfer 0.17 only hand them back (CompleteMultipartUpload, IfMatch on ranged GETs;
// s3transfer/download.py, upload.py). MD5 runs at ~700 MB/s on one core, so --etags opaque (a
// unique id, still "-N" for multipart) takes it off a host where server and clients share cores.
//
// Operations (S3 API Reference, docs.aws.amazon.com/AmazonS3/latest/API/API_<Name>.html):
// ListBuckets, CreateBucket, HeadBucket, DeleteBucket, ListObjectsV2, ListObjects, PutObject,
// GetObject (Range, If-Match, If-None-Match), HeadObject, DeleteObject, CreateMultipartUpload,
// UploadPart, ListParts, CompleteMultipartUpload, AbortMultipartUpload, ListMultipartUploads.
// Errors: docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>


#include "base/error.h"
#include "base/strings.h"
#include "base/time_format.h"
#include "platform/crypto.h"
#include "platform/socket.h"
#include "store/xml.h"

namespace {

using namespace gpuhost;
namespace fs = std::filesystem;
using Clock = std::chrono::system_clock;
using Headers = std::vector<std::pair<std::string, std::string>>;
using Md5Digest = platform::Md5Digest;

constexpr std::size_t k_io_bytes = 1u << 20;
constexpr std::size_t k_max_header_bytes = 64u << 10;
constexpr std::size_t k_max_xml_bytes = 8u << 20;  // 10,000 parts of CompleteMultipartUpload fit
// API_UploadPart / API_CompleteMultipartUpload: part numbers 1..10,000; every part but the last
// at least 5 MiB (EntityTooSmall).
constexpr int k_max_part_number = 10000;
constexpr std::uint64_t k_min_part_bytes = 5ull << 20;
constexpr int k_max_list = 1000;  // MaxKeys, MaxParts, MaxUploads: at most 1,000 per page
constexpr std::string_view k_xml_declaration = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
constexpr std::string_view k_s3_namespace = " xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"";

enum class EtagMode { md5, opaque };

// A streaming MD5 (platform/crypto.h); a library without one (FIPS mode) cannot serve MD5 ETags.
platform::Md5 new_md5() {
  auto md5 = platform::Md5::create();
  if (!md5) {
    std::fprintf(stderr, "s3_endpoint: %s\n", md5.error().message.c_str());
    std::exit(1);
  }
  return std::move(*md5);
}

std::string base64(std::span<const std::uint8_t> bytes) {
  static constexpr char k_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t n = static_cast<std::uint32_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<std::uint32_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= bytes[i + 2];
    out += k_alphabet[(n >> 18) & 63];
    out += k_alphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? k_alphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? k_alphabet[n & 63] : '=';
  }
  return out;
}

// RFC 9110 §5.6.7 IMF-fixdate, for Date and Last-Modified.
std::string http_date(Clock::time_point t) {
  static constexpr const char* k_days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* k_months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                             "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  auto day = std::chrono::floor<std::chrono::days>(t);
  std::chrono::year_month_day date{day};
  std::chrono::hh_mm_ss time{std::chrono::floor<std::chrono::seconds>(t - day)};
  char out[40];
  std::snprintf(out, sizeof out, "%s, %02u %s %04d %02d:%02d:%02d GMT",
                k_days[std::chrono::weekday(day).c_encoding()], static_cast<unsigned>(date.day()),
                k_months[static_cast<unsigned>(date.month()) - 1], static_cast<int>(date.year()),
                static_cast<int>(time.hours().count()), static_cast<int>(time.minutes().count()),
                static_cast<int>(time.seconds().count()));
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string quote_etag(std::string_view etag) {
  return "\"" + std::string(etag) + "\"";
}

std::string element(std::string_view name, std::string_view text) {
  return "<" + std::string(name) + ">" + store::xml_escape(text) + "</" + std::string(name) + ">";
}

// ---- what is stored ----

// One file under the data directory, removed when the last object, part or reader holding it
// lets go (a GET keeps reading an object that a PUT replaced meanwhile).
struct Blob {
  fs::path path;
  std::uint64_t size = 0;
  Md5Digest md5{};  // zero with --etags opaque (unless the client sent Content-MD5)
  Blob() = default;
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;
  ~Blob() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};
using BlobPtr = std::shared_ptr<const Blob>;

struct Object {
  std::vector<BlobPtr> pieces;  // a PUT has one; a completed multipart upload one per part
  std::uint64_t size = 0;
  std::string etag;  // unquoted
  std::string content_type;
  Clock::time_point modified;
};
using ObjectPtr = std::shared_ptr<const Object>;

struct Part {
  BlobPtr blob;
  std::string etag;
  Clock::time_point modified;
};

struct Upload {
  std::string bucket;
  std::string key;
  std::uint64_t sequence = 0;  // creation order, for ListMultipartUploads
  std::string content_type;
  Clock::time_point initiated;
  std::map<int, Part> parts;
};

struct Bucket {
  Clock::time_point created;
  std::map<std::string, ObjectPtr> objects;
};

// The endpoint's state, shared by every connection thread. Data moves outside the lock (into and
// out of blob files); the lock covers only these maps.
struct Endpoint {
  // Fixed after construction.
  fs::path dir;
  EtagMode etags = EtagMode::md5;
  std::string instance;  // random hex: file names and ids of two endpoints never collide
  bool verbose = false;

  std::atomic<std::uint64_t> requests{0};

  std::mutex mutex;
  // Guarded by mutex.
  std::uint64_t sequence = 0;
  std::map<std::string, Bucket> buckets;
  std::map<std::string, Upload> uploads;  // by upload id

  std::uint64_t next_sequence() {
    std::lock_guard lock(mutex);
    return ++sequence;
  }
  // 32 hex digits like an MD5, unique within this endpoint and across endpoints.
  // REQUIRES: `number` from next_sequence() or ++sequence under the lock.
  std::string opaque_etag(std::uint64_t number) const {
    char digits[17];
    std::snprintf(digits, sizeof digits, "%016llx", static_cast<unsigned long long>(number));
    return instance + std::string(24 - std::min<std::size_t>(24, instance.size()), '0') + digits;
  }
};

// ---- one request ----

struct Request {
  std::string method;
  std::string target;
  std::string bucket;
  std::string key;
  std::vector<std::pair<std::string, std::string>> query;  // decoded
  Headers headers;                                         // names in lower case

  [[nodiscard]] std::optional<std::string> header(std::string_view name) const {
    for (const auto& [n, v] : headers)
      if (n == name) return v;
    return std::nullopt;
  }
  [[nodiscard]] const std::string* param(std::string_view name) const {
    for (const auto& [n, v] : query)
      if (n == name) return &v;
    return nullptr;
  }
  [[nodiscard]] std::string param_or(std::string_view name, std::string fallback = "") const {
    const std::string* v = param(name);
    return v ? *v : fallback;
  }
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// Byte range of a GET: whole object, a slice, or none that fits (416).
struct RangeAnswer {
  enum class Kind { whole, slice, unsatisfiable } kind = Kind::whole;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

// RFC 9110 §14.1.2: "bytes=a-b", "bytes=a-", "bytes=-n". Anything else, several ranges included,
// is ignored and the whole object sent (§14.2 lets a server ignore Range).
RangeAnswer parse_range(std::string_view header, std::uint64_t size) {
  RangeAnswer whole;
  header = trim(header);
  if (!header.starts_with("bytes=") || header.find(',') != std::string_view::npos) return whole;
  std::string_view spec = header.substr(6);
  std::size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return whole;
  std::string_view first_text = trim(spec.substr(0, dash));
  std::string_view last_text = trim(spec.substr(dash + 1));
  RangeAnswer answer;
  answer.kind = RangeAnswer::Kind::slice;
  if (first_text.empty()) {
    auto suffix = parse_int(last_text);
    if (!suffix || *suffix < 0) return whole;
    if (*suffix == 0 || size == 0) return {RangeAnswer::Kind::unsatisfiable, 0, 0};
    answer.length = std::min<std::uint64_t>(static_cast<std::uint64_t>(*suffix), size);
    answer.offset = size - answer.length;
    return answer;
  }
  auto first = parse_int(first_text);
  if (!first || *first < 0) return whole;
  std::uint64_t last = size == 0 ? 0 : size - 1;
  if (!last_text.empty()) {
    auto l = parse_int(last_text);
    if (!l || *l < *first) return whole;
    last = std::min<std::uint64_t>(last, static_cast<std::uint64_t>(*l));
  }
  if (static_cast<std::uint64_t>(*first) >= size) return {RangeAnswer::Kind::unsatisfiable, 0, 0};
  answer.offset = static_cast<std::uint64_t>(*first);
  answer.length = last - answer.offset + 1;
  return answer;
}

// Whether an If-Match / If-None-Match value ("*", or a list of quoted or bare tags) names `etag`.
bool etag_listed(std::string_view value, std::string_view etag) {
  for (const std::string& item : split(value, ',')) {
    std::string_view tag = trim(item);
    if (tag == "*") return true;
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag.size() >= 2 && tag.front() == '"' && tag.back() == '"') tag = tag.substr(1, tag.size() - 2);
    if (tag == etag) return true;
  }
  return false;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 416: return "Range Not Satisfiable";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    default: return "Unknown";
  }
}

// Subresources of other S3 operations: answered NotImplemented rather than mistaken for a
// listing or an object read.
bool names_other_operation(const Request& r) {
  static const std::set<std::string, std::less<>> k_other = {"accelerate",
                                                             "acl",
                                                             "analytics",
                                                             "attributes",
                                                             "cors",
                                                             "delete",
                                                             "encryption",
                                                             "intelligent-tiering",
                                                             "inventory",
                                                             "legal-hold",
                                                             "lifecycle",
                                                             "location",
                                                             "logging",
                                                             "metrics",
                                                             "notification",
                                                             "object-lock",
                                                             "ownershipControls",
                                                             "policy",
                                                             "publicAccessBlock",
                                                             "replication",
                                                             "requestPayment",
                                                             "restore",
                                                             "retention",
                                                             "select",
                                                             "tagging",
                                                             "torrent",
                                                             "versioning",
                                                             "versions",
                                                             "website"};
  return std::any_of(r.query.begin(), r.query.end(), [](const auto& q) { return k_other.contains(q.first); });
}

// ---- one connection ----

class Connection {
 public:
  Connection(platform::TcpStream stream, Endpoint& endpoint)
      : m_stream(std::move(stream)), m_endpoint(endpoint), m_in(new char[k_io_bytes]) {}

  void serve() {
    m_stream.set_no_delay();
    for (;;) {
      auto request = read_request();
      if (!request || !*request) return;
      auto start = std::chrono::steady_clock::now();
      m_request = std::move(**request);
      m_sent_bytes = 0;
      auto handled = dispatch();
      if (handled && !m_body_done) {
        // Unread body: with a pending 100-continue the client sends none, so the connection
        // cannot be reused; otherwise it is read and dropped.
        if (m_continue_pending) {
          m_close = true;
        } else {
          handled = skip_body();
        }
      }
      if (m_endpoint.verbose) {
        std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
        std::fprintf(stderr, "%s %s -> %d, %llu bytes out, %.1f ms%s\n", m_request.method.c_str(),
                     m_request.target.c_str(), m_status, static_cast<unsigned long long>(m_sent_bytes),
                     ms.count(), handled ? "" : (" (" + handled.error().message + ")").c_str());
      }
      if (!handled || m_close) return;
    }
  }

 private:
  // ---- input ----

  // Reads more into m_in; false at the end of the stream.
  Result<bool> fill() {
    if (m_begin == m_end) {
      m_begin = m_end = 0;
    } else if (m_end == k_io_bytes) {
      std::memmove(m_in.get(), m_in.get() + m_begin, m_end - m_begin);
      m_end -= m_begin;
      m_begin = 0;
    }
    std::size_t n = GPUHOST_TRY(m_stream.receive_some(m_in.get() + m_end, k_io_bytes - m_end));
    m_end += n;
    return n > 0;
  }

  std::string_view buffered() const { return {m_in.get() + m_begin, m_end - m_begin}; }

  Result<std::string> read_line() {
    for (;;) {
      std::size_t at = buffered().find("\r\n");
      if (at != std::string_view::npos) {
        std::string line(buffered().substr(0, at));
        m_begin += at + 2;
        return line;
      }
      if (m_end - m_begin > k_max_header_bytes)
        return make_error(ErrorCode::parse_error, "a chunk header line is too long");
      if (!GPUHOST_TRY(fill()))
        return make_error(ErrorCode::io_error, "the client closed the connection in the body");
    }
  }

  // The next request's line and headers, or nullopt when the client closed between requests.
  Result<std::optional<Request>> read_request() {
    std::size_t end;
    for (;;) {
      end = buffered().find("\r\n\r\n");
      if (end != std::string_view::npos) break;
      if (m_end - m_begin > k_max_header_bytes) {
        m_close = true;
        (void)reply_error(431, "RequestHeaderSectionTooLarge", "the request's headers exceed 64 KiB");
        return make_error(ErrorCode::parse_error, "headers too large");
      }
      bool more = GPUHOST_TRY(fill());
      if (!more) {
        if (m_begin == m_end) return std::optional<Request>();
        return make_error(ErrorCode::io_error, "the client closed the connection inside a request's headers");
      }
    }
    std::vector<std::string> lines;
    std::string_view head = buffered().substr(0, end);
    std::size_t from = 0;
    while (from <= head.size()) {
      std::size_t eol = head.find("\r\n", from);
      if (eol == std::string_view::npos) eol = head.size();
      lines.emplace_back(head.substr(from, eol - from));
      from = eol + 2;
    }
    m_begin += end + 4;

    Request r;
    m_status = 0;
    m_close = false;
    m_body_done = true;
    m_continue_pending = false;
    m_chunked = false;
    m_chunk_crlf_pending = false;
    m_body_left = 0;
    auto words = split(lines[0], ' ');
    if (words.size() != 3 || !words[2].starts_with("HTTP/1.")) {
      m_close = true;
      (void)reply_error(400, "BadRequest", "malformed request line");
      return make_error(ErrorCode::parse_error, "malformed request line");
    }
    r.method = words[0];
    r.target = words[1];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      std::size_t colon = lines[i].find(':');
      if (colon == std::string::npos) continue;
      r.headers.emplace_back(to_lower(trim(std::string_view(lines[i]).substr(0, colon))),
                             std::string(trim(std::string_view(lines[i]).substr(colon + 1))));
    }
    std::string_view target = r.target;
    std::size_t question = target.find('?');
    std::string path = percent_decode(target.substr(0, question));
    if (question != std::string_view::npos) {
      for (const std::string& pair : split(target.substr(question + 1), '&')) {
        if (pair.empty()) continue;
        std::size_t eq = pair.find('=');
        r.query.emplace_back(
            percent_decode(std::string_view(pair).substr(0, eq)),
            eq == std::string::npos ? "" : percent_decode(std::string_view(pair).substr(eq + 1)));
      }
    }
    // Path style: /bucket/key (docs.aws.amazon.com/AmazonS3/latest/userguide/VirtualHosting.html).
    if (path.starts_with('/')) path.erase(0, 1);
    std::size_t slash = path.find('/');
    r.bucket = path.substr(0, slash);
    if (slash != std::string::npos) r.key = path.substr(slash + 1);

    if (words[2] == "HTTP/1.0") m_close = true;
    if (auto connection = r.header("connection")) {
      if (contains_icase(*connection, "close")) m_close = true;
      if (contains_icase(*connection, "keep-alive")) m_close = false;
    }
    if (auto encoding = r.header("transfer-encoding"); encoding && contains_icase(*encoding, "chunked")) {
      m_chunked = true;
      m_body_done = false;
    } else if (auto length = r.header("content-length")) {
      auto n = parse_int(*length);
      if (!n || *n < 0) {
        m_close = true;
        m_request = r;
        (void)reply_error(400, "InvalidArgument", "bad Content-Length");
        return make_error(ErrorCode::parse_error, "bad Content-Length");
      }
      m_body_left = static_cast<std::uint64_t>(*n);
      m_body_done = m_body_left == 0;
    }
    if (auto expect = r.header("expect"); expect && iequals(*expect, "100-continue") && !m_body_done)
      m_continue_pending = true;
    return std::optional<Request>(std::move(r));
  }

  // The next slice of the request body, a view into m_in valid until the next read; empty once
  // the body is complete. Sends "100 Continue" first when the client waits for it.
  Result<std::string_view> next_body_piece() {
    if (m_body_done) return std::string_view();
    if (m_continue_pending) {
      m_continue_pending = false;
      static constexpr std::string_view k_continue = "HTTP/1.1 100 Continue\r\n\r\n";
      if (auto sent = m_stream.send_all(k_continue.data(), k_continue.size()); !sent)
        return std::unexpected(sent.error());
    }
    if (m_chunked && m_body_left == 0) {
      // RFC 9112 §7.1: size in hex [; extensions] CRLF, data CRLF, ..., 0 CRLF, trailers, CRLF.
      if (m_chunk_crlf_pending) {
        std::string crlf = GPUHOST_TRY(read_line());
        if (!crlf.empty()) return make_error(ErrorCode::parse_error, "a chunk is longer than its size says");
      }
      std::string size_line = GPUHOST_TRY(read_line());
      std::string_view digits = trim(std::string_view(size_line).substr(0, size_line.find(';')));
      auto size = parse_int(digits, 16);
      if (!size || *size < 0 || digits.empty()) return make_error(ErrorCode::parse_error, "bad chunk size");
      if (*size == 0) {
        for (;;) {
          std::string trailer = GPUHOST_TRY(read_line());
          if (trailer.empty()) break;
        }
        m_body_done = true;
        return std::string_view();
      }
      m_body_left = static_cast<std::uint64_t>(*size);
      m_chunk_crlf_pending = true;
    }
    if (m_body_left == 0) {
      m_body_done = true;
      return std::string_view();
    }
    if (m_begin == m_end && !GPUHOST_TRY(fill()))
      return make_error(ErrorCode::io_error, "the client closed the connection in the body");
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(m_end - m_begin, m_body_left));
    std::string_view piece(m_in.get() + m_begin, n);
    m_begin += n;
    m_body_left -= n;
    if (m_body_left == 0 && !m_chunked) m_body_done = true;
    return piece;
  }

  Result<void> skip_body() {
    while (!GPUHOST_TRY(next_body_piece()).empty()) {
    }
    return {};
  }

  // A small body (XML), or nullopt when it is larger than `limit` (the rest is still read).
  Result<std::optional<std::string>> read_small_body(std::size_t limit) {
    std::string body;
    bool too_large = false;
    for (;;) {
      std::string_view piece = GPUHOST_TRY(next_body_piece());
      if (piece.empty()) break;
      if (body.size() + piece.size() > limit) too_large = true;
      if (!too_large) body += piece;
    }
    if (too_large) return std::optional<std::string>();
    return std::optional<std::string>(std::move(body));
  }

  // Streams the body into a new blob file, hashing it when ETags or Content-MD5 need it.
  // Socket errors end the connection; a file that cannot be written is an InternalError answer
  // (the body is still read so the connection stays usable): `failure` says so.
  Result<std::shared_ptr<Blob>> receive_blob(std::string& failure) {
    auto blob = std::make_shared<Blob>();
    blob->path =
        m_endpoint.dir / ("blob-" + m_endpoint.instance + "-" + std::to_string(m_endpoint.next_sequence()));
    bool hash = m_endpoint.etags == EtagMode::md5 || m_request.header("content-md5").has_value();
    platform::Md5 md5 = new_md5();
    File file(std::fopen(blob->path.c_str(), "wb"));
    if (!file) failure = "creating " + blob->path.string() + ": " + std::strerror(errno);
    if (file) std::setvbuf(file.get(), nullptr, _IONBF, 0);
    for (;;) {
      std::string_view piece = GPUHOST_TRY(next_body_piece());
      if (piece.empty()) break;
      if (hash) md5.update(piece.data(), piece.size());
      blob->size += piece.size();
      if (file && failure.empty() && std::fwrite(piece.data(), 1, piece.size(), file.get()) != piece.size())
        failure = "writing " + blob->path.string() + ": " + std::strerror(errno);
    }
    if (file && std::fclose(file.release()) != 0 && failure.empty())
      failure = "closing " + blob->path.string() + ": " + std::strerror(errno);
    if (hash) blob->md5 = md5.finish();
    return blob;
  }

  // ---- output ----

  Result<void> send_head(int status, const Headers& headers, std::uint64_t content_length) {
    m_status = status;
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
    head += "Date: " + http_date(Clock::now()) + "\r\n";
    head += "Server: gpuhost-bench-s3-endpoint\r\n";
    head += "x-amz-request-id: " + std::to_string(++m_endpoint.requests) + "\r\n";
    for (const auto& [name, value] : headers) head += name + ": " + value + "\r\n";
    head += "Content-Length: " + std::to_string(content_length) + "\r\n";
    if (m_close || (!m_body_done && m_continue_pending)) head += "Connection: close\r\n";
    head += "\r\n";
    return m_stream.send_all(head.data(), head.size());
  }

  // A whole answer in one send (headers and a small body together: no Nagle / delayed-ACK wait).
  Result<void> reply(int status, const Headers& headers, const std::string& body = "") {
    m_status = status;
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
    head += "Date: " + http_date(Clock::now()) + "\r\n";
    head += "Server: gpuhost-bench-s3-endpoint\r\n";
    head += "x-amz-request-id: " + std::to_string(++m_endpoint.requests) + "\r\n";
    for (const auto& [name, value] : headers) head += name + ": " + value + "\r\n";
    if (!body.empty()) head += "Content-Type: application/xml\r\n";
    head += "Content-Length: " + std::to_string(body.size()) + "\r\n";
    if (m_close || (!m_body_done && m_continue_pending)) head += "Connection: close\r\n";
    head += "\r\n";
    if (m_request.method != "HEAD") head += body;
    m_sent_bytes += head.size();
    return m_stream.send_all(head.data(), head.size());
  }

  Result<void> reply_xml(int status, std::string_view root, const std::string& inner,
                         const Headers& headers = {}) {
    std::string body(k_xml_declaration);
    body +=
        "<" + std::string(root) + std::string(k_s3_namespace) + ">" + inner + "</" + std::string(root) + ">";
    return reply(status, headers, body);
  }

  // ErrorResponses.html: <Error><Code/><Message/><Resource/><RequestId/></Error>.
  Result<void> reply_error(int status, std::string_view code, std::string_view message,
                           const Headers& headers = {}) {
    std::string body(k_xml_declaration);
    body += "<Error>" + element("Code", code) + element("Message", message) +
            element("Resource", "/" + m_request.bucket + (m_request.key.empty() ? "" : "/" + m_request.key)) +
            element("RequestId", std::to_string(m_endpoint.requests.load() + 1)) + "</Error>";
    return reply(status, headers, body);
  }

  bool bucket_exists() {
    std::lock_guard lock(m_endpoint.mutex);
    return m_endpoint.buckets.contains(m_request.bucket);
  }

  Result<void> no_such_bucket() {
    return reply_error(404, "NoSuchBucket", "The specified bucket does not exist");
  }
  Result<void> no_such_upload() {
    return reply_error(404, "NoSuchUpload", "The specified multipart upload does not exist");
  }
  Result<void> not_implemented() {
    return reply_error(501, "NotImplemented",
                       "this bench endpoint does not implement " + m_request.method + " " + m_request.target);
  }

  std::string etag_for(const Blob& blob) {
    return m_endpoint.etags == EtagMode::md5 ? platform::to_hex(blob.md5)
                                             : m_endpoint.opaque_etag(m_endpoint.next_sequence());
  }

  // ---- operations ----

  Result<void> dispatch() {
    const Request& r = m_request;
    const std::string& m = r.method;
    if (auto encoding = r.header("content-encoding"); encoding && contains_icase(*encoding, "aws-chunked"))
      return not_implemented();
    if (names_other_operation(r)) return not_implemented();
    if (r.bucket.empty()) return m == "GET" ? list_buckets() : not_implemented();
    if (r.key.empty()) {
      if (m == "PUT") return create_bucket();
      if (m == "HEAD") return head_bucket();
      if (m == "DELETE") return delete_bucket();
      if (m == "GET" && r.param("uploads")) return list_uploads();
      if (m == "GET") return list_objects();
      return not_implemented();
    }
    if (r.param("uploadId")) {
      if (m == "PUT" && r.header("x-amz-copy-source")) return not_implemented();  // UploadPartCopy
      if (m == "PUT") return upload_part();
      if (m == "GET") return list_parts();
      if (m == "POST") return complete_upload();
      if (m == "DELETE") return abort_upload();
      return not_implemented();
    }
    if (m == "POST" && r.param("uploads")) return create_upload();
    if (m == "PUT" && r.header("x-amz-copy-source")) return not_implemented();  // CopyObject
    if (m == "PUT") return put_object();
    if (m == "GET" || m == "HEAD") return get_object();
    if (m == "DELETE") return delete_object();
    return not_implemented();
  }

  // API_ListBuckets.
  Result<void> list_buckets() {
    std::string inner = "<Owner><ID>bench</ID><DisplayName>bench</DisplayName></Owner><Buckets>";
    {
      std::lock_guard lock(m_endpoint.mutex);
      for (const auto& [name, bucket] : m_endpoint.buckets)
        inner += "<Bucket>" + element("Name", name) +
                 element("CreationDate", format_rfc3339_utc_millis(bucket.created)) + "</Bucket>";
    }
    inner += "</Buckets>";
    return reply_xml(200, "ListAllMyBucketsResult", inner);
  }

  // API_CreateBucket: creating a bucket you already own answers 200 in us-east-1 (elsewhere
  // 409 BucketAlreadyOwnedByYou); the one region this endpoint pretends to be is us-east-1.
  // A CreateBucketConfiguration body is read and ignored.
  Result<void> create_bucket() {
    if (auto sent = skip_body(); !sent) return std::unexpected(sent.error());
    {
      std::lock_guard lock(m_endpoint.mutex);
      if (!m_endpoint.buckets.contains(m_request.bucket))
        m_endpoint.buckets[m_request.bucket].created = Clock::now();
    }
    return reply(200, {{"Location", "/" + m_request.bucket}});
  }

  Result<void> head_bucket() {
    bool exists;
    {
      std::lock_guard lock(m_endpoint.mutex);
      exists = m_endpoint.buckets.contains(m_request.bucket);
    }
    return exists ? reply(200, {{"x-amz-bucket-region", "us-east-1"}}) : no_such_bucket();
  }

  Result<void> delete_bucket() {
    std::unique_lock lock(m_endpoint.mutex);
    auto it = m_endpoint.buckets.find(m_request.bucket);
    if (it == m_endpoint.buckets.end()) {
      lock.unlock();
      return no_such_bucket();
    }
    if (!it->second.objects.empty()) {
      lock.unlock();
      return reply_error(409, "BucketNotEmpty", "The bucket you tried to delete is not empty");
    }
    m_endpoint.buckets.erase(it);
    lock.unlock();
    return reply(204, {});
  }

  // API_ListObjectsV2 (list-type=2) and API_ListObjects: keys in UTF-8 binary order from after the
  // continuation token / start-after / marker, grouped into CommonPrefixes by the delimiter.
  Result<void> list_objects() {
    const Request& r = m_request;
    const bool v2 = r.param_or("list-type") == "2";
    const std::string prefix = r.param_or("prefix");
    const std::string delimiter = r.param_or("delimiter");
    const std::string token = r.param_or("continuation-token");
    const std::string after = v2 ? (token.empty() ? r.param_or("start-after") : token) : r.param_or("marker");
    auto max_keys_value = parse_int(r.param_or("max-keys", std::to_string(k_max_list)));
    if (!max_keys_value || *max_keys_value < 0)
      return reply_error(400, "InvalidArgument", "max-keys must be a non-negative integer");
    const int max_keys = static_cast<int>(std::min<long long>(*max_keys_value, k_max_list));

    std::string contents;
    std::string prefixes;
    std::string last;
    int count = 0;
    bool truncated = false;
    bool missing = false;
    // Answers go out after the lock is released: a slow client must not hold up the others.
    {
      std::lock_guard lock(m_endpoint.mutex);
      auto b = m_endpoint.buckets.find(r.bucket);
      missing = b == m_endpoint.buckets.end();
      const std::map<std::string, ObjectPtr> none;
      const auto& objects = missing ? none : b->second.objects;
      std::string previous_prefix;
      for (auto it = objects.lower_bound(std::max(prefix, after)); it != objects.end(); ++it) {
        const std::string& key = it->first;
        if (!key.starts_with(prefix)) break;
        if (!after.empty() && key <= after) continue;
        // A token that is a common prefix (it ends with the delimiter) covers every key under it.
        if (!delimiter.empty() && after.ends_with(delimiter) && key.starts_with(after)) continue;
        std::string common;
        if (!delimiter.empty()) {
          std::size_t at = key.find(delimiter, prefix.size());
          if (at != std::string::npos) common = key.substr(0, at + delimiter.size());
        }
        if (!common.empty() && common == previous_prefix) continue;
        if (count == max_keys) {
          truncated = true;
          break;
        }
        ++count;
        if (!common.empty()) {
          previous_prefix = common;
          prefixes += "<CommonPrefixes>" + element("Prefix", common) + "</CommonPrefixes>";
          last = common;
          continue;
        }
        const Object& o = *it->second;
        contents += "<Contents>" + element("Key", key) +
                    element("LastModified", format_rfc3339_utc_millis(o.modified)) +
                    element("ETag", quote_etag(o.etag)) + element("Size", std::to_string(o.size)) +
                    element("StorageClass", "STANDARD") + "</Contents>";
        last = key;
      }
    }
    if (missing) return no_such_bucket();
    std::string inner = element("Name", r.bucket) + element("Prefix", prefix);
    if (v2) {
      if (!token.empty()) inner += element("ContinuationToken", token);
      if (auto start_after = r.param("start-after")) inner += element("StartAfter", *start_after);
      inner += element("KeyCount", std::to_string(count));
    } else {
      inner += element("Marker", after);
    }
    inner += element("MaxKeys", std::to_string(max_keys));
    if (!delimiter.empty()) inner += element("Delimiter", delimiter);
    inner += element("IsTruncated", truncated ? "true" : "false");
    if (truncated && v2) inner += element("NextContinuationToken", last);
    if (truncated && !v2 && !delimiter.empty())
      inner += element("NextMarker", last);  // only with a delimiter
    return reply_xml(200, "ListBucketResult", inner + contents + prefixes);
  }

  // API_PutObject: the body into a new blob; the ETag header answers.
  Result<void> put_object() {
    if (!bucket_exists()) return no_such_bucket();
    std::string failure;
    auto blob = GPUHOST_TRY(receive_blob(failure));
    if (!failure.empty()) return reply_error(500, "InternalError", failure);
    if (auto answer = check_content_md5(*blob); !answer)
      return std::unexpected(answer.error());
    else if (!*answer)
      return {};
    auto object = std::make_shared<Object>();
    object->size = blob->size;
    object->etag = etag_for(*blob);
    object->content_type = m_request.header("content-type").value_or("binary/octet-stream");
    object->modified = Clock::now();
    object->pieces.push_back(blob);
    std::string etag = object->etag;
    ObjectPtr replaced;  // its file goes once nobody reads it any more (Blob's destructor)
    bool missing;
    {
      std::lock_guard lock(m_endpoint.mutex);
      auto b = m_endpoint.buckets.find(m_request.bucket);
      missing = b == m_endpoint.buckets.end();
      if (!missing) {
        ObjectPtr& slot = b->second.objects[m_request.key];
        replaced = std::move(slot);
        slot = std::move(object);
      }
    }
    if (missing) return no_such_bucket();
    return reply(200, {{"ETag", quote_etag(etag)}});
  }

  // Content-MD5 (RFC 1864, base64 of the binary digest): BadDigest when the body differs. True
  // when the request may go on; false when the error was already answered.
  Result<bool> check_content_md5(const Blob& blob) {
    auto sent = m_request.header("content-md5");
    if (!sent || trim(*sent) == base64(blob.md5)) return true;
    if (auto replied =
            reply_error(400, "BadDigest", "The Content-MD5 you specified did not match what we received.");
        !replied)
      return std::unexpected(replied.error());
    return false;
  }

  // API_GetObject / API_HeadObject.
  Result<void> get_object() {
    const Request& r = m_request;
    ObjectPtr object;
    bool missing;
    {
      std::lock_guard lock(m_endpoint.mutex);
      auto b = m_endpoint.buckets.find(r.bucket);
      missing = b == m_endpoint.buckets.end();
      if (!missing) {
        auto o = b->second.objects.find(r.key);
        if (o != b->second.objects.end()) object = o->second;
      }
    }
    if (missing) return no_such_bucket();
    if (!object) return reply_error(404, "NoSuchKey", "The specified key does not exist.");
    if (auto match = r.header("if-match"); match && !etag_listed(*match, object->etag))
      return reply_error(412, "PreconditionFailed",
                         "At least one of the pre-conditions you specified did not hold");
    Headers headers = {{"ETag", quote_etag(object->etag)},
                       {"Last-Modified", http_date(object->modified)},
                       {"Accept-Ranges", "bytes"}};
    if (auto none_match = r.header("if-none-match"); none_match && etag_listed(*none_match, object->etag))
      return reply(304, headers);
    RangeAnswer range;
    if (auto header = r.header("range")) range = parse_range(*header, object->size);
    if (range.kind == RangeAnswer::Kind::unsatisfiable)
      return reply_error(416, "InvalidRange", "The requested range is not satisfiable",
                         {{"Content-Range", "bytes */" + std::to_string(object->size)}});
    int status = 200;
    if (range.kind == RangeAnswer::Kind::slice) {
      status = 206;
      headers.emplace_back("Content-Range", "bytes " + std::to_string(range.offset) + "-" +
                                                std::to_string(range.offset + range.length - 1) + "/" +
                                                std::to_string(object->size));
    } else {
      range.offset = 0;
      range.length = object->size;
    }
    headers.emplace_back("Content-Type", object->content_type);
    if (auto sent = send_head(status, headers, range.length); !sent) return std::unexpected(sent.error());
    if (r.method == "HEAD") return {};
    return send_object_bytes(*object, range.offset, range.length);
  }

  // After the headers went out, a read failure can only end the connection.
  Result<void> send_object_bytes(const Object& object, std::uint64_t offset, std::uint64_t length) {
    if (!m_out) m_out.reset(new char[k_io_bytes]);
    std::uint64_t piece_start = 0;
    for (const BlobPtr& piece : object.pieces) {
      std::uint64_t piece_end = piece_start + piece->size;
      if (length > 0 && offset < piece_end) {
        std::uint64_t from = offset - piece_start;
        std::uint64_t left = std::min(length, piece->size - from);
        File file(std::fopen(piece->path.c_str(), "rb"));
        if (!file)
          return make_error(ErrorCode::io_error,
                            "opening " + piece->path.string() + ": " + std::strerror(errno));
        std::setvbuf(file.get(), nullptr, _IONBF, 0);
        if (std::fseek(file.get(), static_cast<long>(from), SEEK_SET) != 0)
          return make_error(ErrorCode::io_error, "seeking in " + piece->path.string());
        offset += left;
        length -= left;
        while (left > 0) {
          std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, k_io_bytes));
          std::size_t got = std::fread(m_out.get(), 1, want, file.get());
          if (got != want)
            return make_error(ErrorCode::io_error, "reading " + piece->path.string() + ": short read");
          if (auto sent = m_stream.send_all(m_out.get(), got); !sent) return std::unexpected(sent.error());
          m_sent_bytes += got;
          left -= got;
        }
      }
      piece_start = piece_end;
    }
    return {};
  }

  // API_DeleteObject: 204 whether or not the key existed.
  Result<void> delete_object() {
    ObjectPtr dropped;  // its files go after the lock is released
    bool missing;
    {
      std::lock_guard lock(m_endpoint.mutex);
      auto b = m_endpoint.buckets.find(m_request.bucket);
      missing = b == m_endpoint.buckets.end();
      if (!missing) {
        if (auto o = b->second.objects.find(m_request.key); o != b->second.objects.end()) {
          dropped = std::move(o->second);
          b->second.objects.erase(o);
        }
      }
    }
    return missing ? no_such_bucket() : reply(204, {});
  }

  // API_CreateMultipartUpload: <InitiateMultipartUploadResult><Bucket/><Key/><UploadId/>.
  Result<void> create_upload() {
    if (auto sent = skip_body(); !sent) return std::unexpected(sent.error());
    std::array<std::uint8_t, 12> random{};
    if (!platform::random_bytes(random))
      return reply_error(500, "InternalError", "no random bytes for an upload id");
    std::string id;
    {
      std::lock_guard lock(m_endpoint.mutex);
      if (m_endpoint.buckets.contains(m_request.bucket)) {
        Upload upload;
        upload.bucket = m_request.bucket;
        upload.key = m_request.key;
        upload.sequence = ++m_endpoint.sequence;
        upload.content_type = m_request.header("content-type").value_or("binary/octet-stream");
        upload.initiated = Clock::now();
        id = m_endpoint.instance + std::to_string(upload.sequence) + "-" + platform::to_hex(random);
        m_endpoint.uploads.emplace(id, std::move(upload));
      }
    }
    if (id.empty()) return no_such_bucket();
    return reply_xml(
        200, "InitiateMultipartUploadResult",
        element("Bucket", m_request.bucket) + element("Key", m_request.key) + element("UploadId", id));
  }

  bool upload_exists() {
    std::lock_guard lock(m_endpoint.mutex);
    return find_upload() != nullptr;
  }

  // The upload named by ?uploadId= if it belongs to this bucket and key. REQUIRES: the lock.
  Upload* find_upload() {
    auto it = m_endpoint.uploads.find(m_request.param_or("uploadId"));
    if (it == m_endpoint.uploads.end() || it->second.bucket != m_request.bucket ||
        it->second.key != m_request.key)
      return nullptr;
    return &it->second;
  }

  // API_UploadPart: the body into a new blob; a part number sent again replaces the part.
  Result<void> upload_part() {
    auto number = parse_int(m_request.param_or("partNumber"));
    if (!number || *number < 1 || *number > k_max_part_number)
      return reply_error(400, "InvalidArgument",
                         "Part number must be an integer between 1 and 10000, inclusive");
    if (!upload_exists()) return no_such_upload();
    std::string failure;
    auto blob = GPUHOST_TRY(receive_blob(failure));
    if (!failure.empty()) return reply_error(500, "InternalError", failure);
    if (auto answer = check_content_md5(*blob); !answer)
      return std::unexpected(answer.error());
    else if (!*answer)
      return {};
    Part part{blob, etag_for(*blob), Clock::now()};
    std::string etag = part.etag;
    Part replaced;  // its file goes after the lock is released
    bool missing;
    {
      std::lock_guard lock(m_endpoint.mutex);
      Upload* upload = find_upload();  // aborted while the part streamed in?
      missing = !upload;
      if (upload) {
        Part& slot = upload->parts[static_cast<int>(*number)];
        replaced = std::move(slot);
        slot = std::move(part);
      }
    }
    return missing ? no_such_upload() : reply(200, {{"ETag", quote_etag(etag)}});
  }

  // API_ListParts: parts in ascending number after part-number-marker, max-parts per page.
  Result<void> list_parts() {
    auto marker = parse_int(m_request.param_or("part-number-marker", "0"));
    auto max_parts = parse_int(m_request.param_or("max-parts", std::to_string(k_max_list)));
    if (!marker || !max_parts || *marker < 0 || *max_parts < 0)
      return reply_error(400, "InvalidArgument",
                         "part-number-marker and max-parts must be non-negative integers");
    int limit = static_cast<int>(std::min<long long>(*max_parts, k_max_list));
    std::string parts;
    int count = 0;
    int last = 0;
    bool truncated = false;
    bool missing;
    {
      std::lock_guard lock(m_endpoint.mutex);
      Upload* upload = find_upload();
      missing = !upload;
      const std::map<int, Part> none;
      const auto& all = missing ? none : upload->parts;
      for (auto it = all.upper_bound(static_cast<int>(*marker)); it != all.end(); ++it) {
        if (count == limit) {
          truncated = true;
          break;
        }
        ++count;
        last = it->first;
        parts += "<Part>" + element("PartNumber", std::to_string(it->first)) +
                 element("LastModified", format_rfc3339_utc_millis(it->second.modified)) +
                 element("ETag", quote_etag(it->second.etag)) +
                 element("Size", std::to_string(it->second.blob->size)) + "</Part>";
      }
    }
    if (missing) return no_such_upload();
    std::string inner =
        element("Bucket", m_request.bucket) + element("Key", m_request.key) +
        element("UploadId", m_request.param_or("uploadId")) +
        element("PartNumberMarker", std::to_string(*marker)) +
        element("NextPartNumberMarker", std::to_string(last)) + element("MaxParts", std::to_string(limit)) +
        element("IsTruncated", truncated ? "true" : "false") + element("StorageClass", "STANDARD");
    return reply_xml(200, "ListPartsResult", inner + parts);
  }

  // API_CompleteMultipartUpload: the listed parts, ascending, each with the ETag it was given,
  // every one but the last at least 5 MiB, become the object; unlisted parts are dropped.
  Result<void> complete_upload() {
    auto body = GPUHOST_TRY(read_small_body(k_max_xml_bytes));
    if (!body)
      return reply_error(400, "MalformedXML", "the CompleteMultipartUpload body is larger than 8 MiB");
    auto xml = store::parse_xml(*body);
    if (!xml || xml->name != "CompleteMultipartUpload")
      return reply_error(400, "MalformedXML", "The XML you provided was not well-formed or did not validate");
    std::vector<std::pair<int, std::string>> listed;
    for (const store::XmlElement* p : xml->children_named("Part")) {
      auto number = parse_int(trim(p->child_text("PartNumber")));
      if (!number || *number < 1 || *number > k_max_part_number)
        return reply_error(400, "InvalidArgument",
                           "Part number must be an integer between 1 and 10000, inclusive");
      std::string etag(trim(p->child_text("ETag")));
      if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"')
        etag = etag.substr(1, etag.size() - 2);
      listed.emplace_back(static_cast<int>(*number), std::move(etag));
    }
    if (listed.empty())
      return reply_error(400, "MalformedXML", "The XML you provided was not well-formed or did not validate");
    for (std::size_t i = 1; i < listed.size(); ++i)
      if (listed[i].first <= listed[i - 1].first)
        return reply_error(400, "InvalidPartOrder", "The list of parts was not in ascending order.");

    auto object = std::make_shared<Object>();
    Upload finished;  // the parts not listed go with it, after the lock is released
    {
      std::unique_lock lock(m_endpoint.mutex);
      Upload* upload = find_upload();
      if (!upload) {
        lock.unlock();
        return no_such_upload();
      }
      platform::Md5 md5 = new_md5();
      for (std::size_t i = 0; i < listed.size(); ++i) {
        auto part = upload->parts.find(listed[i].first);
        if (part == upload->parts.end() || part->second.etag != listed[i].second) {
          lock.unlock();
          return reply_error(
              400, "InvalidPart",
              "One or more of the specified parts could not be found. The part might not have been "
              "uploaded, or the specified entity tag might not have matched the part's entity tag.");
        }
        const Blob& blob = *part->second.blob;
        if (i + 1 < listed.size() && blob.size < k_min_part_bytes) {
          lock.unlock();
          return reply_error(400, "EntityTooSmall",
                             "Your proposed upload is smaller than the minimum allowed size");
        }
        md5.update(blob.md5.data(), blob.md5.size());
        object->pieces.push_back(part->second.blob);
        object->size += blob.size;
      }
      std::string suffix = "-" + std::to_string(listed.size());
      object->etag = (m_endpoint.etags == EtagMode::md5 ? platform::to_hex(md5.finish())
                                                        : m_endpoint.opaque_etag(++m_endpoint.sequence)) +
                     suffix;
      object->content_type = upload->content_type;
      object->modified = Clock::now();
      auto b = m_endpoint.buckets.find(m_request.bucket);
      if (b == m_endpoint.buckets.end()) {
        lock.unlock();
        return no_such_bucket();
      }
      b->second.objects[m_request.key] = object;
      auto node = m_endpoint.uploads.extract(m_request.param_or("uploadId"));
      finished = std::move(node.mapped());
    }
    std::string host = m_request.header("host").value_or("127.0.0.1");
    return reply_xml(200, "CompleteMultipartUploadResult",
                     element("Location", "http://" + host + "/" + m_request.bucket + "/" + m_request.key) +
                         element("Bucket", m_request.bucket) + element("Key", m_request.key) +
                         element("ETag", quote_etag(object->etag)));
  }

  // API_AbortMultipartUpload: 204; NoSuchUpload when there is none.
  Result<void> abort_upload() {
    Upload dropped;  // its part files go after the lock is released
    bool missing;
    {
      std::lock_guard lock(m_endpoint.mutex);
      missing = !find_upload();
      if (!missing) dropped = std::move(m_endpoint.uploads.extract(m_request.param_or("uploadId")).mapped());
    }
    return missing ? no_such_upload() : reply(204, {});
  }

  // API_ListMultipartUploads: by key, then by initiation time, after key-marker /
  // upload-id-marker, max-uploads per page.
  Result<void> list_uploads() {
    const Request& r = m_request;
    const std::string prefix = r.param_or("prefix");
    const std::string key_marker = r.param_or("key-marker");
    const std::string id_marker = r.param_or("upload-id-marker");
    auto max_uploads = parse_int(r.param_or("max-uploads", std::to_string(k_max_list)));
    if (!max_uploads || *max_uploads < 0)
      return reply_error(400, "InvalidArgument", "max-uploads must be a non-negative integer");
    int limit = static_cast<int>(std::min<long long>(*max_uploads, k_max_list));
    struct Row {
      std::string key;
      std::uint64_t sequence;
      std::string id;
      Clock::time_point initiated;
    };
    std::vector<Row> rows;
    std::uint64_t marker_sequence = 0;
    if (!bucket_exists()) return no_such_bucket();
    {
      std::lock_guard lock(m_endpoint.mutex);
      if (auto m = m_endpoint.uploads.find(id_marker); m != m_endpoint.uploads.end())
        marker_sequence = m->second.sequence;
      for (const auto& [id, u] : m_endpoint.uploads)
        if (u.bucket == r.bucket && u.key.starts_with(prefix))
          rows.push_back({u.key, u.sequence, id, u.initiated});
    }
    std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      return std::tie(a.key, a.sequence) < std::tie(b.key, b.sequence);
    });
    std::string uploads;
    int count = 0;
    bool truncated = false;
    const Row* last = nullptr;
    for (const Row& row : rows) {
      if (!key_marker.empty()) {
        bool after = row.key > key_marker ||
                     (!id_marker.empty() && row.key == key_marker && row.sequence > marker_sequence);
        if (!after) continue;
      }
      if (count == limit) {
        truncated = true;
        break;
      }
      ++count;
      last = &row;
      uploads += "<Upload>" + element("Key", row.key) + element("UploadId", row.id) +
                 "<Initiator><ID>bench</ID><DisplayName>bench</DisplayName></Initiator>"
                 "<Owner><ID>bench</ID><DisplayName>bench</DisplayName></Owner>" +
                 element("StorageClass", "STANDARD") +
                 element("Initiated", format_rfc3339_utc_millis(row.initiated)) + "</Upload>";
    }
    std::string inner =
        element("Bucket", r.bucket) + element("KeyMarker", key_marker) +
        element("UploadIdMarker", id_marker) + element("NextKeyMarker", last ? last->key : "") +
        element("NextUploadIdMarker", last ? last->id : "") + element("Prefix", prefix) +
        element("MaxUploads", std::to_string(limit)) + element("IsTruncated", truncated ? "true" : "false");
    return reply_xml(200, "ListMultipartUploadsResult", inner + uploads);
  }

  platform::TcpStream m_stream;
  Endpoint& m_endpoint;
  std::unique_ptr<char[]> m_in;   // received bytes m_in[m_begin, m_end) not consumed yet
  std::unique_ptr<char[]> m_out;  // for object bodies, allocated by the first GET
  std::size_t m_begin = 0;
  std::size_t m_end = 0;

  Request m_request;
  // The current request's body and answer.
  std::uint64_t m_body_left = 0;  // of the body (Content-Length) or of the current chunk
  bool m_chunked = false;
  bool m_chunk_crlf_pending = false;
  bool m_body_done = true;
  bool m_continue_pending = false;  // the client waits for "100 Continue" before the body
  bool m_close = false;
  int m_status = 0;
  std::uint64_t m_sent_bytes = 0;
};

int usage(const char* problem) {
  std::fprintf(stderr,
               "s3_endpoint: %s\nusage: s3_endpoint DIR [--host 127.0.0.1] [--port 0] [--etags md5|opaque] "
               "[--verbose]\n",
               problem);
  return 2;
}

int run(const std::vector<std::string>& args) {
  Endpoint endpoint;
  std::string host = "127.0.0.1";
  long long port = 0;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool has_value = i + 1 < args.size();
    if (a == "--host" && has_value) {
      host = args[++i];
    } else if (a == "--port" && has_value) {
      auto p = parse_int(args[++i]);
      if (!p || *p < 0 || *p > 65535) return usage("--port takes 0..65535");
      port = *p;
    } else if (a == "--etags" && has_value) {
      std::string mode = args[++i];
      if (mode != "md5" && mode != "opaque") return usage("--etags takes md5 or opaque");
      endpoint.etags = mode == "md5" ? EtagMode::md5 : EtagMode::opaque;
    } else if (a == "--verbose") {
      endpoint.verbose = true;
    } else if (!a.starts_with("--") && endpoint.dir.empty()) {
      endpoint.dir = a;
    } else {
      return usage(("unknown argument " + a).c_str());
    }
  }
  if (endpoint.dir.empty()) return usage("the data directory is missing");
  std::error_code ec;
  fs::create_directories(endpoint.dir, ec);
  if (ec) {
    std::fprintf(stderr, "s3_endpoint: creating %s: %s\n", endpoint.dir.c_str(), ec.message().c_str());
    return 1;
  }
  std::array<std::uint8_t, 4> random{};
  if (!platform::random_bytes(random)) {
    std::fprintf(stderr, "s3_endpoint: no random bytes for the instance id\n");
    return 1;
  }
  endpoint.instance = platform::to_hex(random);
  auto listener = platform::TcpListener::listen(host, static_cast<std::uint16_t>(port));
  if (!listener) {
    std::fprintf(stderr, "s3_endpoint: %s\n", listener.error().message.c_str());
    return 1;
  }
  std::printf("{\"port\": %u}\n", static_cast<unsigned>(listener->port()));
  std::fflush(stdout);
  for (;;) {
    auto accepted = listener->accept(std::chrono::seconds(1));
    if (!accepted) {
      std::fprintf(stderr, "s3_endpoint: %s\n", accepted.error().message.c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // e.g. out of descriptors
      continue;
    }
    if (!*accepted) continue;
    // The endpoint outlives every connection: the process ends only when killed.
    std::thread([stream = std::move(**accepted), &endpoint]() mutable {
      Connection(std::move(stream), endpoint).serve();
    }).detach();
  }
}

}  // namespace

int main(int argc, char** argv) {
  return run(std::vector<std::string>(argv + 1, argv + argc));
}
