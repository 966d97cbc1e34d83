#include "store/store_url.h"

#include <cctype>
#include <optional>
#include <vector>

#include "base/strings.h"

namespace gpuhost::store {
namespace {

// Decodes %XX escapes into `out`; false at a '%' not followed by two hex digits.
bool decode_into(std::string_view text, std::string& out) {
  out.clear();
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(text[i + 2])))
      return false;
    out += static_cast<char>(parse_int(text.substr(i + 1, 2), 16).value_or(0));
    i += 2;
  }
  return true;
}

Result<std::string> percent_decode(std::string_view text, std::string_view what) {
  std::string out;
  if (!decode_into(text, out))
    return make_error(ErrorCode::invalid_argument,
                      "parsing " + std::string(what) + ": a '%' must be followed by two hex digits");
  return out;
}

bool ends_with_domain(std::string_view host, std::string_view domain) {
  return host.size() > domain.size() && host.ends_with(domain) &&
         host[host.size() - domain.size() - 1] == '.';
}

// The region a provider's endpoint names, e.g. "s3.oss-cn-hangzhou-internal.aliyuncs.com" ->
// "cn-hangzhou"; empty when the host does not follow the provider's pattern.
std::string region_from_endpoint(Provider provider, std::string_view host) {
  auto between = [&](std::string_view head, std::string_view tail) -> std::string {
    if (!host.starts_with(head) || !host.ends_with(tail) || host.size() <= head.size() + tail.size())
      return {};
    std::string_view middle = host.substr(head.size(), host.size() - head.size() - tail.size());
    if (middle.find('.') != std::string_view::npos) return {};
    return std::string(middle);
  };
  switch (provider) {
    case Provider::aws: return between("s3.", ".amazonaws.com");
    case Provider::oss: {
      std::string region = between("s3.oss-", ".aliyuncs.com");
      if (region.empty()) region = between("oss-", ".aliyuncs.com");
      if (region.ends_with("-internal")) region.resize(region.size() - 9);
      return region;
    }
    case Provider::cos: return between("cos.", ".myqcloud.com");
    case Provider::obs: return between("obs.", ".myhuaweicloud.com");
    case Provider::minio:
    case Provider::custom: return {};
  }
  return {};
}

Provider provider_from_host(std::string_view host) {
  if (ends_with_domain(host, "amazonaws.com")) return Provider::aws;
  if (ends_with_domain(host, "aliyuncs.com")) return Provider::oss;
  if (ends_with_domain(host, "myqcloud.com")) return Provider::cos;
  if (ends_with_domain(host, "myhuaweicloud.com")) return Provider::obs;
  return Provider::custom;
}

// The public endpoint host for a region, from each provider's documentation.
std::string endpoint_for(Provider provider, std::string_view region) {
  std::string r(region);
  switch (provider) {
    // docs.aws.amazon.com/general/latest/gr/s3.html (regional endpoints s3.<region>.amazonaws.com)
    case Provider::aws: return "s3." + r + ".amazonaws.com";
    // help.aliyun.com/en/oss/developer-reference/use-aws-sdks-to-access-oss
    case Provider::oss: return "s3.oss-" + r + ".aliyuncs.com";
    // tencentcloud.com/document/product/436/57456 (<BucketName-APPID>.cos.<Region>.myqcloud.com)
    case Provider::cos: return "cos." + r + ".myqcloud.com";
    // support.huaweicloud.com/en-us/devg-obs/obs_06_0007.html (obs.<region>.myhuaweicloud.com)
    case Provider::obs: return "obs." + r + ".myhuaweicloud.com";
    case Provider::minio:
    case Provider::custom: return {};
  }
  return {};
}

Result<void> check_bucket(std::string_view bucket, std::string_view url) {
  // docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html: 3-63 characters of
  // lower-case letters, digits, dots and hyphens, starting and ending with a letter or digit.
  auto alnum = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c));
  };
  bool ok = bucket.size() >= 3 && bucket.size() <= 63 && alnum(bucket.front()) && alnum(bucket.back());
  for (char c : bucket) ok = ok && (alnum(c) || c == '.' || c == '-');
  if (!ok)
    return make_error(ErrorCode::invalid_argument,
                      "parsing store URL \"" + std::string(url) + "\": \"" + std::string(bucket) +
                          "\" is not a valid bucket name (3-63 lower-case letters, digits, '.' and '-')");
  return {};
}

// "/C:/..." : a Windows drive path written as a URL path.
bool names_a_drive(std::string_view path) {
  return path.size() >= 3 && path.front() == '/' && std::isalpha(static_cast<unsigned char>(path[1])) &&
         path[2] == ':';
}

Result<StoreLocation> parse_file_url(std::string_view url) {
  StoreLocation location;
  location.kind = StoreLocation::Kind::file;
  std::string path;
  if (!decode_into(url.substr(7), path))
    return make_error(ErrorCode::invalid_argument, "parsing store URL \"" + std::string(url) +
                                                       "\": a '%' must be followed by two hex digits");
  // file:///C:/x -> C:/x ; file:///mnt/x -> /mnt/x ; file://server/share -> //server/share (UNC)
  if (names_a_drive(path))
    path.erase(0, 1);
  else if (!path.empty() && path[0] != '/')
    path.insert(0, "//");
  if (path.empty() || path == "/" || path == "//")
    return make_error(ErrorCode::invalid_argument, "parsing store URL \"" + std::string(url) +
                                                       "\": no directory; write file:///absolute/path");
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  location.root = std::filesystem::path(path);
  return location;
}

}  // namespace

const char* provider_name(Provider provider) {
  switch (provider) {
    case Provider::aws: return "aws";
    case Provider::oss: return "oss";
    case Provider::cos: return "cos";
    case Provider::obs: return "obs";
    case Provider::minio: return "minio";
    case Provider::custom: return "custom";
  }
  return "?";
}

std::string StoreLocation::display() const {
  if (kind == Kind::file) return "file://" + root.generic_string();
  return "s3://" + bucket + "/" + prefix;
}

Result<StoreLocation> parse_store_url(std::string_view url, std::string_view default_region) {
  std::string quoted = "store URL \"" + std::string(url) + "\"";
  auto bad = [&](const std::string& why) {
    return make_error(ErrorCode::invalid_argument, "parsing " + quoted + ": " + why);
  };
  if (url.starts_with("file://")) return parse_file_url(url);
  if (!url.starts_with("s3://"))
    return bad("expected s3://bucket/prefix?... or file:///path (see doc/object-store.md)");

  std::string_view rest = url.substr(5);
  std::string_view query;
  if (std::size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::size_t slash = rest.find('/');
  StoreLocation location;
  location.bucket = std::string(rest.substr(0, slash));
  if (auto valid = check_bucket(location.bucket, url); !valid) return std::unexpected(valid.error());
  if (slash != std::string_view::npos) {
    std::string prefix = GPUHOST_TRY(percent_decode(rest.substr(slash + 1), quoted));
    while (!prefix.empty() && prefix.front() == '/') prefix.erase(0, 1);
    if (!prefix.empty() && prefix.back() != '/') prefix += '/';
    location.prefix = prefix;
  }

  std::optional<std::string> endpoint, region, style, provider;
  static const std::vector<std::string> k_parameters = {"endpoint", "region", "style", "provider"};
  for (const std::string& pair : split(query, '&')) {
    if (pair.empty()) continue;
    std::size_t eq = pair.find('=');
    std::string name = pair.substr(0, eq);
    std::string value =
        eq == std::string::npos ? "" : GPUHOST_TRY(percent_decode(pair.substr(eq + 1), quoted));
    std::optional<std::string>* slot = name == "endpoint"   ? &endpoint
                                       : name == "region"   ? &region
                                       : name == "style"    ? &style
                                       : name == "provider" ? &provider
                                                            : nullptr;
    if (!slot) {
      auto guess = closest_match(name, k_parameters);
      return bad("unknown parameter \"" + name + "\"" + (guess ? " (did you mean \"" + *guess + "\"?)" : "") +
                 "; known: endpoint, region, style, provider");
    }
    if (value.empty()) return bad("parameter \"" + name + "\" has no value");
    *slot = value;
  }

  location.provider = Provider::aws;
  bool provider_given = provider.has_value();
  if (provider) {
    static const std::vector<std::string> k_providers = {"aws", "oss", "cos", "obs", "minio"};
    std::string p = to_lower(*provider);
    if (p == "aws")
      location.provider = Provider::aws;
    else if (p == "oss")
      location.provider = Provider::oss;
    else if (p == "cos")
      location.provider = Provider::cos;
    else if (p == "obs")
      location.provider = Provider::obs;
    else if (p == "minio")
      location.provider = Provider::minio;
    else {
      auto guess = closest_match(p, k_providers);
      return bad("unknown provider \"" + *provider + "\"" +
                 (guess ? " (did you mean \"" + *guess + "\"?)" : "") + "; known: aws, oss, cos, obs, minio");
    }
  }

  if (endpoint) {
    std::string e = *endpoint;
    if (e.find("://") == std::string::npos) e = "https://" + e;
    std::size_t colon = e.find("://");
    location.endpoint_scheme = to_lower(e.substr(0, colon));
    if (location.endpoint_scheme != "http" && location.endpoint_scheme != "https")
      return bad("endpoint must be http:// or https://");
    std::string authority = e.substr(colon + 3);
    while (!authority.empty() && authority.back() == '/') authority.pop_back();
    if (authority.find_first_of("/?#@") != std::string::npos)
      return bad("endpoint must be scheme://host[:port] without a path (the bucket goes in s3://bucket)");
    std::size_t port_colon = authority.rfind(':');
    if (port_colon != std::string::npos && authority.find(']', port_colon) == std::string::npos) {
      auto port = parse_int(authority.substr(port_colon + 1));
      if (!port || *port < 1 || *port > 65535) return bad("endpoint has a bad port");
      location.endpoint_port = static_cast<std::uint16_t>(*port);
      authority.resize(port_colon);
    }
    if (authority.empty()) return bad("endpoint has no host");
    location.endpoint_host = to_lower(authority);
    if (!provider_given) location.provider = provider_from_host(location.endpoint_host);
  } else if (location.provider == Provider::minio) {
    return bad("provider=minio needs endpoint=http(s)://host:port of the MinIO server");
  }

  if (region) {
    location.region = *region;
  } else if (endpoint) {
    location.region = region_from_endpoint(location.provider, location.endpoint_host);
  }
  bool china_provider = location.provider == Provider::oss || location.provider == Provider::cos ||
                        location.provider == Provider::obs;
  if (location.region.empty()) {
    if (china_provider)
      return bad(std::string("provider=") + provider_name(location.provider) +
                 " needs region= (for example region=" +
                 (location.provider == Provider::oss   ? "cn-hangzhou"
                  : location.provider == Provider::cos ? "ap-guangzhou"
                                                       : "cn-north-4") +
                 ") or its endpoint=");
    location.region = default_region.empty() ? "us-east-1" : std::string(default_region);
  }
  if (!endpoint) location.endpoint_host = endpoint_for(location.provider, location.region);

  // Defaults: virtual-hosted for the clouds (OSS accepts nothing else; COS buckets created since
  // 2024-01-01 neither: tencentcloud.com/document/product/436/57456); path style for MinIO
  // ("by default only path-style requests are allowed": minio/minio#5705, MINIO_DOMAIN) and for
  // other servers, as s5cmd does for custom endpoints (research/02 §5).
  bool cloud = location.provider == Provider::aws || china_provider;
  location.style = cloud ? AddressingStyle::virtual_hosted : AddressingStyle::path;
  // A dotted bucket name cannot be a TLS-valid virtual host (the certificate is *.endpoint):
  // AWS's bucket naming rules say to use path style for those.
  if (location.provider == Provider::aws && location.bucket.find('.') != std::string::npos)
    location.style = AddressingStyle::path;
  if (style) {
    std::string s = to_lower(*style);
    if (s == "path")
      location.style = AddressingStyle::path;
    else if (s == "virtual")
      location.style = AddressingStyle::virtual_hosted;
    else
      return bad("style must be path or virtual, not \"" + *style + "\"");
  }
  if (location.provider == Provider::oss && location.style == AddressingStyle::path)
    return bad(
        "Alibaba OSS accepts only virtual-hosted style (it answers path style with "
        "SecondLevelDomainForbidden); drop style=path");
  location.list_objects_v1 = location.provider == Provider::obs;
  return location;
}

}  // namespace gpuhost::store
