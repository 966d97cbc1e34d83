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

// The worked example of developers.cloudflare.com/r2/objects/multipart-objects (R2 mimics S3),
// and values from Python's hashlib: md5(bytes.fromhex(e1) + bytes.fromhex(e2) + ...) + "-N".
TEST(S3Multipart, ExpectedEtagIsTheMd5OfThePartMd5s) {
  std::vector<PartInfo> r2 = {{1, "bce6bf66aeb76c7040fdd5f4eccb78e6", 5, ""},
                              {2, "8165449fc15bbf43d3b674595cbcc406", 1, ""}};
  EXPECT_EQ(expected_multipart_etag(r2), "f77dc0eecdebcd774a2a22cb393ad2ff-2");
  std::vector<PartInfo> one = {{1, "900150983cd24fb0d6963f7d28e17f72", 3, ""}};  // MD5("abc")
  EXPECT_EQ(expected_multipart_etag(one), "af5da9f45af7a300e3aded972f8ff687-1");
  std::vector<PartInfo> three = {{1, "900150983CD24FB0D6963F7D28E17F72", 3, ""},  // case does not matter
                                 {2, "d41d8cd98f00b204e9800998ecf8427e", 0, ""},
                                 {3, "0cc175b9c0f1b6a831c399e269772661", 1, ""}};
  EXPECT_EQ(expected_multipart_etag(three), "3db3406f1cd3837350d247a05cfc14cd-3");
}

TEST(S3Multipart, NoExpectedEtagWhenAPartEtagIsNotAnMd5) {
  // SSE-KMS parts carry opaque ETags; one is enough to make the object's ETag unpredictable.
  std::vector<PartInfo> parts = {{1, "bce6bf66aeb76c7040fdd5f4eccb78e6", 5, ""}, {2, "e2", 1, ""}};
  EXPECT_FALSE(expected_multipart_etag(parts));
  parts[1].etag = "8165449fc15bbf43d3b674595cbcc40g";  // 32 characters, one not hex
  EXPECT_FALSE(expected_multipart_etag(parts));
  parts[1].etag = "8165449fc15bbf43d3b674595cbcc406-1";
  EXPECT_FALSE(expected_multipart_etag(parts));
}

TEST(S3Multipart, ACompletedObjectMustHaveThePartsSizeAndEtag) {
  std::vector<PartInfo> parts = {{1, "bce6bf66aeb76c7040fdd5f4eccb78e6", 5, ""},
                                 {2, "8165449fc15bbf43d3b674595cbcc406", 1, ""}};
  EXPECT_EQ(completed_object_mismatch({"k", 6, "f77dc0eecdebcd774a2a22cb393ad2ff-2", ""}, parts), "");
  EXPECT_EQ(completed_object_mismatch({"k", 6, "F77DC0EECDEBCD774A2A22CB393AD2FF-2", ""}, parts), "");
  EXPECT_EQ(completed_object_mismatch({"k", 7, "f77dc0eecdebcd774a2a22cb393ad2ff-2", ""}, parts),
            "it holds 7 bytes, the parts 6");
  // Same size and part count, other content: only the exact ETag tells them apart.
  std::string other = completed_object_mismatch({"k", 6, "00000000000000000000000000000000-2", ""}, parts);
  EXPECT_NE(other.find("f77dc0eecdebcd774a2a22cb393ad2ff-2"), std::string::npos) << other;
  EXPECT_NE(completed_object_mismatch({"k", 6, "bce6bf66aeb76c7040fdd5f4eccb78e6", ""}, parts), "");
}

TEST(S3Multipart, OpaquePartEtagsFallBackToSizeAndPartCount) {
  std::vector<PartInfo> parts = {{1, "kms-1", 5, ""}, {2, "kms-2", 1, ""}};
  EXPECT_EQ(completed_object_mismatch({"k", 6, "opaque-2", ""}, parts), "");
  EXPECT_NE(completed_object_mismatch({"k", 6, "opaque-3", ""}, parts), "");
  EXPECT_NE(completed_object_mismatch({"k", 6, "bce6bf66aeb76c7040fdd5f4eccb78e6", ""}, parts), "");
  EXPECT_NE(completed_object_mismatch({"k", 5, "opaque-2", ""}, parts), "");
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
