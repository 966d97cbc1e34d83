#include "store/store_url.h"

#include <gtest/gtest.h>

namespace gpuhost::store {
namespace {

StoreLocation parse_ok(std::string_view url, std::string_view region = "") {
  auto location = parse_store_url(url, region);
  EXPECT_TRUE(location) << url << ": " << (location ? "" : location.error().message);
  return location.value_or(StoreLocation{});
}

std::string parse_error(std::string_view url) {
  auto location = parse_store_url(url, "");
  EXPECT_FALSE(location) << url;
  if (location) return {};
  EXPECT_EQ(location.error().code, ErrorCode::invalid_argument);
  return location.error().message;
}

TEST(StoreUrl, AwsDefaultsToTheRegionalEndpointAndVirtualHosting) {
  StoreLocation l = parse_ok("s3://ckpt-bucket/runs/llama", "eu-west-1");
  EXPECT_EQ(l.kind, StoreLocation::Kind::s3);
  EXPECT_EQ(l.provider, Provider::aws);
  EXPECT_EQ(l.bucket, "ckpt-bucket");
  EXPECT_EQ(l.prefix, "runs/llama/");
  EXPECT_EQ(l.region, "eu-west-1");
  EXPECT_EQ(l.endpoint_scheme, "https");
  EXPECT_EQ(l.endpoint_host, "s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(l.style, AddressingStyle::virtual_hosted);
  EXPECT_EQ(l.display(), "s3://ckpt-bucket/runs/llama/");
}

TEST(StoreUrl, AwsWithoutAnyRegionUsesUsEast1) {
  StoreLocation l = parse_ok("s3://bucket");
  EXPECT_EQ(l.region, "us-east-1");
  EXPECT_EQ(l.prefix, "");
}

TEST(StoreUrl, DottedAwsBucketsUsePathStyle) {
  EXPECT_EQ(parse_ok("s3://my.bucket/x").style, AddressingStyle::path);
}

TEST(StoreUrl, CustomEndpointDefaultsToPathStyleAndKeepsThePort) {
  StoreLocation l = parse_ok("s3://bucket/p?endpoint=http://127.0.0.1:9000", "ap-south-1");
  EXPECT_EQ(l.provider, Provider::custom);
  EXPECT_EQ(l.endpoint_scheme, "http");
  EXPECT_EQ(l.endpoint_host, "127.0.0.1");
  EXPECT_EQ(l.endpoint_port, 9000);
  EXPECT_EQ(l.style, AddressingStyle::path);
  EXPECT_EQ(l.region, "ap-south-1");
}

TEST(StoreUrl, MinioNeedsAnEndpointAndUsesPathStyle) {
  StoreLocation l = parse_ok("s3://b1b/x?provider=minio&endpoint=minio.lan:9000");
  EXPECT_EQ(l.provider, Provider::minio);
  EXPECT_EQ(l.endpoint_scheme, "https");  // a bare host:port means https
  EXPECT_EQ(l.style, AddressingStyle::path);
  EXPECT_NE(parse_error("s3://b1b?provider=minio").find("endpoint="), std::string::npos);
}

TEST(StoreUrl, OssEndpointFollowsTheRegionAndRefusesPathStyle) {
  StoreLocation l = parse_ok("s3://bucket/ckpt?provider=oss&region=cn-hangzhou");
  EXPECT_EQ(l.endpoint_host, "s3.oss-cn-hangzhou.aliyuncs.com");
  EXPECT_EQ(l.style, AddressingStyle::virtual_hosted);
  EXPECT_NE(parse_error("s3://bucket?provider=oss&region=cn-hangzhou&style=path").find("virtual-hosted"),
            std::string::npos);
  EXPECT_NE(parse_error("s3://bucket?provider=oss").find("region="), std::string::npos);
}

TEST(StoreUrl, RecognisesProvidersAndRegionsFromTheirEndpoints) {
  StoreLocation oss =
      parse_ok("s3://bucket?endpoint=https://s3.oss-cn-beijing-internal.aliyuncs.com", "us-west-2");
  EXPECT_EQ(oss.provider, Provider::oss);
  EXPECT_EQ(oss.region, "cn-beijing");
  EXPECT_EQ(oss.style, AddressingStyle::virtual_hosted);

  StoreLocation cos = parse_ok("s3://ckpt-1250000000?endpoint=cos.ap-guangzhou.myqcloud.com");
  EXPECT_EQ(cos.provider, Provider::cos);
  EXPECT_EQ(cos.region, "ap-guangzhou");

  StoreLocation obs = parse_ok("s3://bucket?endpoint=https://obs.cn-north-4.myhuaweicloud.com");
  EXPECT_EQ(obs.provider, Provider::obs);
  EXPECT_EQ(obs.region, "cn-north-4");
  EXPECT_TRUE(obs.list_objects_v1);

  StoreLocation aws = parse_ok("s3://bucket?endpoint=https://s3.us-west-2.amazonaws.com", "eu-west-1");
  EXPECT_EQ(aws.provider, Provider::aws);
  EXPECT_EQ(aws.region, "us-west-2");
}

TEST(StoreUrl, CosAndObsPresetsBuildTheirEndpoints) {
  EXPECT_EQ(parse_ok("s3://b-125?provider=cos&region=ap-shanghai").endpoint_host,
            "cos.ap-shanghai.myqcloud.com");
  EXPECT_EQ(parse_ok("s3://bkt?provider=obs&region=cn-east-3").endpoint_host,
            "obs.cn-east-3.myhuaweicloud.com");
}

TEST(StoreUrl, ExplicitStyleAndRegionWin) {
  StoreLocation l = parse_ok("s3://bucket?style=path&region=us-west-2", "eu-west-1");
  EXPECT_EQ(l.style, AddressingStyle::path);
  EXPECT_EQ(l.region, "us-west-2");
  EXPECT_EQ(parse_ok("s3://bucket?endpoint=http://127.0.0.1:5000&style=virtual").style,
            AddressingStyle::virtual_hosted);
}

TEST(StoreUrl, DecodesPercentEscapesInThePrefix) {
  EXPECT_EQ(parse_ok("s3://bucket/run%201/").prefix, "run 1/");
}

TEST(StoreUrl, SuggestsTheClosestParameterForATypo) {
  std::string message = parse_error("s3://bucket?regoin=us-east-1");
  EXPECT_NE(message.find("did you mean \"region\""), std::string::npos) << message;
  message = parse_error("s3://bucket?provider=osss&region=x");
  EXPECT_NE(message.find("did you mean \"oss\""), std::string::npos) << message;
}

TEST(StoreUrl, RejectsBadBucketsSchemesAndEndpoints) {
  parse_error("s3://UpperCase/x");
  parse_error("s3://ab");
  parse_error("gs://bucket");
  parse_error("s3://bucket?endpoint=ftp://host");
  parse_error("s3://bucket?endpoint=http://host/path");
  parse_error("s3://bucket?endpoint=http://host:0");
  parse_error("s3://bucket?style=sideways");
  parse_error("s3://bucket?region=");
  parse_error("s3://bucket/%zz");
}

TEST(StoreUrl, FileUrlsNameADirectory) {
  StoreLocation l = parse_ok("file:///mnt/share/ckpt/");
  EXPECT_EQ(l.kind, StoreLocation::Kind::file);
  EXPECT_EQ(l.root.generic_string(), "/mnt/share/ckpt");
  EXPECT_EQ(parse_ok("file:///C:/share/ckpt").root.generic_string(), "C:/share/ckpt");
  EXPECT_EQ(parse_ok("file://server/share/x").root.string(), "//server/share/x");
  EXPECT_EQ(parse_ok("file:///mnt/a%20b").root.generic_string(), "/mnt/a b");
  parse_error("file:///");
}

}  // namespace
}  // namespace gpuhost::store
