#include "store/s3_protocol.h"

#include <gtest/gtest.h>

namespace gpuhost::store {
namespace {

// Shaped like docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-authenticating-requests.html's
// SignatureDoesNotMatch answer: it echoes the string to sign and the canonical request.
const char* k_signature_mismatch =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SignatureDoesNotMatch</Code>"
    "<Message>The request signature we calculated does not match the signature you provided.</Message>"
    "<AWSAccessKeyId>AKIAIOSFODNN7EXAMPLE</AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256\n20130524T000000Z</"
    "StringToSign>"
    "<SignatureProvided>deadbeef</SignatureProvided><CanonicalRequest>GET\n/</CanonicalRequest>"
    "<RequestId>4442587FB7D0A2F9</RequestId><HostId>host-id</HostId></Error>";

TEST(S3Error, KeepsCodeMessageAndRequestIdOnly) {
  S3Error e = parse_s3_error(403, k_signature_mismatch, "header-id");
  EXPECT_EQ(e.code, "SignatureDoesNotMatch");
  EXPECT_EQ(e.request_id, "4442587FB7D0A2F9");  // the body's id wins over the header's
  std::string text = describe_s3_error(e);
  EXPECT_NE(text.find("SignatureDoesNotMatch: The request signature we calculated"), std::string::npos)
      << text;
  EXPECT_NE(text.find("HTTP 403, request id 4442587FB7D0A2F9"), std::string::npos) << text;
  EXPECT_NE(text.find("check the secret access key"), std::string::npos) << text;
  for (const char* echoed : {"StringToSign", "20130524T000000Z", "deadbeef", "CanonicalRequest", "GET\n/"})
    EXPECT_EQ(text.find(echoed), std::string::npos) << echoed;
  EXPECT_EQ(s3_error_code(e), ErrorCode::permission_denied);
  EXPECT_FALSE(s3_error_is_transient(e));
}

TEST(S3Error, ABodilessAnswerUsesTheStatusAndTheRequestIdHeader) {
  S3Error e = parse_s3_error(503, "", "RID");
  EXPECT_EQ(describe_s3_error(e), "HTTP 503 (request id RID)");
  EXPECT_EQ(describe_s3_error(parse_s3_error(502, "", "")), "HTTP 502");
  EXPECT_TRUE(s3_error_is_transient(e));
  EXPECT_EQ(s3_error_code(e), ErrorCode::unavailable);
}

TEST(S3Error, ClassifiesTransientAndMissing) {
  EXPECT_TRUE(s3_error_is_transient(parse_s3_error(503, "<Error><Code>SlowDown</Code></Error>", "")));
  EXPECT_TRUE(s3_error_is_transient(parse_s3_error(400, "<Error><Code>RequestTimeout</Code></Error>", "")));
  EXPECT_TRUE(s3_error_is_transient(parse_s3_error(200, "<Error><Code>InternalError</Code></Error>", "")));
  EXPECT_FALSE(s3_error_is_transient(parse_s3_error(400, "<Error><Code>EntityTooSmall</Code></Error>", "")));
  EXPECT_EQ(s3_error_code(parse_s3_error(404, "<Error><Code>NoSuchUpload</Code></Error>", "")),
            ErrorCode::not_found);
  EXPECT_EQ(s3_error_code(parse_s3_error(400, "<Error><Code>InvalidPart</Code></Error>", "")),
            ErrorCode::invalid_argument);
}

TEST(S3Error, NamesOssDiagnosticCodesAndTheirFix) {
  S3Error e = parse_s3_error(403,
                             "<Error><Code>AccessDenied</Code><Message>x</Message><RequestId>R</"
                             "RequestId><EC>0002-00000033</EC></Error>",
                             "");
  EXPECT_EQ(e.oss_ec, "0002-00000033");
  EXPECT_NE(describe_s3_error(e).find("OSS EC 0002-00000033"), std::string::npos);
}

TEST(S3Listing, ParsesListObjectsV2AndStripsThePrefix) {
  auto page = parse_list_objects_v2(
      "<ListBucketResult><Name>b</Name><Prefix>run/</Prefix><KeyCount>2</KeyCount><IsTruncated>true</"
      "IsTruncated>"
      "<NextContinuationToken>tok==</NextContinuationToken>"
      "<Contents><Key>run/a.pt</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>"
      "<ETag>&quot;abc-2&quot;</ETag><Size>10485760</Size></Contents>"
      "<Contents><Key>run/b/c</Key><ETag>\"d\"</ETag><Size>0</Size></Contents></ListBucketResult>",
      "run/");
  ASSERT_TRUE(page) << page.error().message;
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "a.pt");
  EXPECT_EQ(page->objects[0].etag, "abc-2");
  EXPECT_EQ(page->objects[0].size, 10485760u);
  EXPECT_EQ(page->objects[1].key, "b/c");
  EXPECT_EQ(page->next, "tok==");

  auto last =
      parse_list_objects_v2("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>", "");
  ASSERT_TRUE(last);
  EXPECT_FALSE(last->next);
  EXPECT_FALSE(
      parse_list_objects_v2("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>", ""));
  EXPECT_FALSE(parse_list_objects_v2("<Error/>", ""));
  EXPECT_FALSE(parse_list_objects_v2(
      "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>", ""));
}

TEST(S3Listing, ListObjectsV1PagesByTheLastKey) {
  auto page = parse_list_objects_v1(
      "<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>p/a</Key><Size>1</Size></Contents>"
      "<Contents><Key>p/b</Key><Size>2</Size></Contents></ListBucketResult>",
      "p/");
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->next, "p/b");
}

TEST(S3Multipart, ParsesCreateListPartsAndUploads) {
  auto id = parse_create_multipart(
      "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>VXBsb2FkSUQ</UploadId>"
      "</InitiateMultipartUploadResult>");
  ASSERT_TRUE(id);
  EXPECT_EQ(*id, "VXBsb2FkSUQ");
  EXPECT_FALSE(parse_create_multipart("<InitiateMultipartUploadResult/>"));

  auto parts = parse_list_parts(
      "<ListPartsResult><IsTruncated>true</IsTruncated><NextPartNumberMarker>2</NextPartNumberMarker>"
      "<Part><PartNumber>1</PartNumber><ETag>\"e1\"</ETag><Size>5242880</Size></Part>"
      "<Part><PartNumber>2</PartNumber><ETag>\"e2\"</ETag><Size>5242880</Size></Part></ListPartsResult>");
  ASSERT_TRUE(parts) << parts.error().message;
  ASSERT_EQ(parts->parts.size(), 2u);
  EXPECT_EQ(parts->parts[1].number, 2);
  EXPECT_EQ(parts->parts[1].etag, "e2");
  EXPECT_EQ(parts->next_marker, "2");
  EXPECT_FALSE(
      parse_list_parts("<ListPartsResult><Part><PartNumber>0</PartNumber></Part></ListPartsResult>"));

  auto uploads = parse_list_multipart_uploads(
      "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>"
      "<Upload><Key>pre/x</Key><UploadId>U1</UploadId><Initiated>2026-01-01T00:00:00.000Z</Initiated></"
      "Upload>"
      "<Upload><Key>other</Key><UploadId>U2</UploadId></Upload></ListMultipartUploadsResult>",
      "pre/");
  ASSERT_TRUE(uploads) << uploads.error().message;
  ASSERT_EQ(uploads->uploads.size(), 1u);
  EXPECT_EQ(uploads->uploads[0].key, "x");
  EXPECT_EQ(uploads->uploads[0].upload_id, "U1");
  EXPECT_FALSE(uploads->next);
}

TEST(S3Multipart, CompleteBodyListsQuotedEscapedEtagsInOrder) {
  std::vector<PartInfo> parts = {{1, "aa", 5, ""}, {2, "bb", 1, ""}};
  EXPECT_EQ(complete_multipart_body(parts),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;aa&quot;</ETag></Part>"
            "<Part><PartNumber>2</PartNumber><ETag>&quot;bb&quot;</ETag></Part></CompleteMultipartUpload>");
}

TEST(S3Multipart, ACompleteAnswerOf200CanHoldAnError) {
  auto ok = parse_complete_multipart(
      "\n\n<CompleteMultipartUploadResult><ETag>\"3858f62230ac3c915f300c664312c11f-9\"</ETag>"
      "</CompleteMultipartUploadResult>");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->etag, "3858f62230ac3c915f300c664312c11f-9");
  EXPECT_FALSE(ok->error);

  auto failed =
      parse_complete_multipart("<Error><Code>InternalError</Code><Message>try again</Message></Error>");
  ASSERT_TRUE(failed);
  ASSERT_TRUE(failed->error);
  EXPECT_EQ(failed->error->code, "InternalError");
  EXPECT_TRUE(s3_error_is_transient(*failed->error));
}

TEST(S3Time, ParsesWholeAndFractionalSeconds) {
  using namespace std::chrono;
  auto expected = sys_days{year(2026) / 1 / 2} + hours(3) + minutes(4) + seconds(5);
  EXPECT_EQ(parse_iso8601_utc("2026-01-02T03:04:05Z"), expected);
  EXPECT_EQ(parse_iso8601_utc("2026-01-02T03:04:05.678Z"), expected);
  EXPECT_FALSE(parse_iso8601_utc("2026-13-02T03:04:05Z"));
  EXPECT_FALSE(parse_iso8601_utc("2026-01-02 03:04:05"));
  EXPECT_FALSE(parse_iso8601_utc("2026-01-02T03:04:05.Z"));
}

TEST(S3Etag, RemovesQuotesAndWeakMarkers) {
  EXPECT_EQ(unquote_etag("\"abc\""), "abc");
  EXPECT_EQ(unquote_etag("W/\"abc\""), "abc");
  EXPECT_EQ(unquote_etag("abc"), "abc");
}

}  // namespace
}  // namespace gpuhost::store
