#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/error.h"

namespace gpuhost::store {

// Who runs the S3-compatible endpoint: decides the default endpoint, addressing style and
// quirks. `custom` is any other S3-compatible server given by endpoint=.
enum class Provider { aws, oss, cos, obs, minio, custom };

[[nodiscard]] const char* provider_name(Provider provider);

// Path style puts the bucket in the path (https://endpoint/bucket/key); virtual-hosted style
// in the host name (https://bucket.endpoint/key).
enum class AddressingStyle { path, virtual_hosted };

// Where a store lives, parsed from its URL:
//
//   s3://bucket[/prefix]?endpoint=https://host[:port]&region=R&style=path|virtual&provider=P
//   file:///absolute/path        (file:///C:/share/ckpt on Windows, file://server/share/x for UNC)
//
// Every parameter of s3:// is optional: provider=oss|cos|obs needs only region= (their
// endpoints follow from it); AWS takes its region from the caller's default; any other server
// needs endpoint=. A provider is recognised from a known endpoint host too.
struct StoreLocation {
  enum class Kind { s3, file };
  Kind kind = Kind::s3;

  // s3:
  Provider provider = Provider::aws;
  std::string bucket;
  std::string prefix;  // "" or ending in '/': keys are relative to it
  std::string endpoint_scheme = "https";
  std::string endpoint_host;        // without the bucket, e.g. "s3.us-west-2.amazonaws.com"
  std::uint16_t endpoint_port = 0;  // 0: the scheme's default
  std::string region;               // the SigV4 signing region
  AddressingStyle style = AddressingStyle::virtual_hosted;
  // OBS documents ListObjects (v1) among its S3-compatible calls, not ListObjectsV2
  // (docs.otc.t-systems.com "Compatibility of OBS REST APIs"), so its listings page by marker.
  bool list_objects_v1 = false;

  // file:
  std::filesystem::path root;

  // s3://bucket/prefix or file:///root, without parameters: for messages (holds no secret).
  [[nodiscard]] std::string display() const;
};

// Parses a store URL. `default_region` is used for AWS (and any provider whose region cannot be
// read from its endpoint) when the URL has no region=; pass the AWS_REGION / profile region.
// invalid_argument with what is wrong and how to write it.
[[nodiscard]] Result<StoreLocation> parse_store_url(std::string_view url, std::string_view default_region);

}  // namespace gpuhost::store
