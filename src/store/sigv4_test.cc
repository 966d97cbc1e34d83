#include "store/sigv4.h"

#include <gtest/gtest.h>

namespace gpuhost::store {
namespace {

using std::chrono::sys_days;
using namespace std::chrono_literals;

// The AWS Signature Version 4 test suite (docs.aws.amazon.com/general/latest/gr/
// signature-v4-test-suite.html), as kept in awslabs/aws-c-auth tests/aws-signing-test-suite/v4/
// (commit 495329c2). Each case: the request, the expected canonical request
// (header-canonical-request.txt) and signature (header-signature.txt). S3 does not normalise
// paths, so of the path cases only the "-unnormalized" variants apply.
constexpr auto k_suite_time = sys_days{std::chrono::year(2015) / 8 / 30} + 12h + 36min;

Credentials suite_credentials(std::string token = {}) {
  Credentials c;
  c.access_key_id = "AKIDEXAMPLE";
  c.secret_access_key = Secret("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
  c.session_token = Secret(std::move(token));
  return c;
}

const std::string k_empty_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct SuiteCase {
  const char* name;
  std::string method;
  std::string raw_path;  // as in request.txt, encoded by uri_encode like an S3 key
  QueryParameters query;
  SignedHeaderList headers;
  std::string body;
  bool sign_body = false;  // context.json "sign_body": adds x-amz-content-sha256
  std::string token;
  std::string canonical_request;
  std::string signature;
};

std::vector<SuiteCase> suite() {
  const std::string host = "host:example.amazonaws.com\n";
  const std::string date = "x-amz-date:20150830T123600Z\n";
  return {
      {"get-vanilla",
       "GET",
       "/",
       {},
       {},
       "",
       false,
       "",
       "GET\n/\n\n" + host + date + "\nhost;x-amz-date\n" + k_empty_hash,
       "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
      {"get-vanilla-query-order-key-case",
       "GET",
       "/",
       {{"Param2", "value2"}, {"Param1", "value1"}},
       {},
       "",
       false,
       "",
       "GET\n/\nParam1=value1&Param2=value2\n" + host + date + "\nhost;x-amz-date\n" + k_empty_hash,
       "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
      {"get-vanilla-query-order-encoded",
       "GET",
       "/",
       {{"Param-3", "Value3"}, {"Param", "Value2"}, {"\xE1\x88\xB4", "Value1"}},
       {},
       "",
       false,
       "",
       "GET\n/\n%E1%88%B4=Value1&Param=Value2&Param-3=Value3\n" + host + date + "\nhost;x-amz-date\n" +
           k_empty_hash,
       "371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac"},
      {"get-vanilla-query-unreserved",
       "GET",
       "/",
       {{"-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
         "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"}},
       {},
       "",
       false,
       "",
       "GET\n/\n-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz="
       "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\n" +
           host + date + "\nhost;x-amz-date\n" + k_empty_hash,
       "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"},
      {"get-vanilla-utf8-query",
       "GET",
       "/",
       {{"\xE1\x88\xB4", "bar"}},
       {},
       "",
       false,
       "",
       "GET\n/\n%E1%88%B4=bar\n" + host + date + "\nhost;x-amz-date\n" + k_empty_hash,
       "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"},
      {"get-unreserved",
       "GET",
       "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
       {},
       {},
       "",
       false,
       "",
       "GET\n/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\n\n" + host + date +
           "\nhost;x-amz-date\n" + k_empty_hash,
       "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"},
      {"get-utf8",
       "GET",
       "/\xE1\x88\xB4",
       {},
       {},
       "",
       false,
       "",
       "GET\n/%E1%88%B4\n\n" + host + date + "\nhost;x-amz-date\n" + k_empty_hash,
       "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"},
      {"get-space-unnormalized",
       "GET",
       "/example space/",
       {},
       {},
       "",
       false,
       "",
       "GET\n/example%20space/\n\n" + host + date + "\nhost;x-amz-date\n" + k_empty_hash,
       "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"},
      {"get-slashes-unnormalized",
       "GET",
       "//example//",
       {},
       {},
       "",
       false,
       "",
       "GET\n//example//\n\n" + host + date + "\nhost;x-amz-date\n" + k_empty_hash,
       "87cca117541a147f6df867677d98a7d80dff226d2bfca9e4ffa899665623c7e5"},
      {"get-relative-relative-unnormalized",
       "GET",
       "/example1/example2/../..",
       {},
       {},
       "",
       false,
       "",
       "GET\n/example1/example2/../..\n\n" + host + date + "\nhost;x-amz-date\n" + k_empty_hash,
       "dc33e0856fd4baca4d7aa2146c38958283844764f38c74252a333df5e613003b"},
      {"get-header-key-duplicate",
       "GET",
       "/",
       {},
       {{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}},
       "",
       false,
       "",
       "GET\n/\n\n" + host + "my-header1:value2,value2,value1\n" + date + "\nhost;my-header1;x-amz-date\n" +
           k_empty_hash,
       "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"},
      {"get-header-value-order",
       "GET",
       "/",
       {},
       {{"My-Header1", "value4"},
        {"My-Header1", "value1"},
        {"My-Header1", "value3"},
        {"My-Header1", "value2"}},
       "",
       false,
       "",
       "GET\n/\n\n" + host + "my-header1:value4,value1,value3,value2\n" + date +
           "\nhost;my-header1;x-amz-date\n" + k_empty_hash,
       "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"},
      {"get-header-value-trim",
       "GET",
       "/",
       {},
       {{"My-Header1", " value1"}, {"My-Header2", " \"a   b   c\""}},
       "",
       false,
       "",
       "GET\n/\n\n" + host + "my-header1:value1\nmy-header2:\"a b c\"\n" + date +
           "\nhost;my-header1;my-header2;x-amz-date\n" + k_empty_hash,
       "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"},
      {"get-vanilla-with-session-token",
       "GET",
       "/",
       {},
       {},
       "",
       false,
       "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267",
       "GET\n/\n\n" + host + date +
           "x-amz-security-token:6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267\n"
           "\nhost;x-amz-date;x-amz-security-token\n" +
           k_empty_hash,
       "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"},
      {"post-vanilla",
       "POST",
       "/",
       {},
       {},
       "",
       false,
       "",
       "POST\n/\n\n" + host + date + "\nhost;x-amz-date\n" + k_empty_hash,
       "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
      {"post-vanilla-query",
       "POST",
       "/",
       {{"Param1", "value1"}},
       {},
       "",
       false,
       "",
       "POST\n/\nParam1=value1\n" + host + date + "\nhost;x-amz-date\n" + k_empty_hash,
       "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"},
      {"post-header-key-sort",
       "POST",
       "/",
       {},
       {{"My-Header1", "value1"}},
       "",
       false,
       "",
       "POST\n/\n\n" + host + "my-header1:value1\n" + date + "\nhost;my-header1;x-amz-date\n" + k_empty_hash,
       "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"},
      {"post-header-value-case",
       "POST",
       "/",
       {},
       {{"My-Header1", "VALUE1"}},
       "",
       false,
       "",
       "POST\n/\n\n" + host + "my-header1:VALUE1\n" + date + "\nhost;my-header1;x-amz-date\n" + k_empty_hash,
       "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"},
      {"post-sts-header-before",
       "POST",
       "/",
       {},
       {},
       "",
       false,
       "AQoDYXdzEPT//////////"
       "wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUu"
       "wthAx7mSEI/qkPpKPi/"
       "kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQc"
       "HNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+"
       "scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/"
       "oLxBA==",
       "POST\n/\n\n" + host + date +
           "x-amz-security-token:AQoDYXdzEPT//////////"
           "wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXm"
           "xfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/"
           "kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXD"
           "vp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+"
           "scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYv"
           "KTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==\n"
           "\nhost;x-amz-date;x-amz-security-token\n" +
           k_empty_hash,
       "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"},
      {"post-x-www-form-urlencoded",
       "POST",
       "/",
       {},
       {{"Content-Type", "application/x-www-form-urlencoded"}, {"Content-Length", "13"}},
       "Param1=value1",
       true,
       "",
       "POST\n/\n\ncontent-length:13\ncontent-type:application/x-www-form-urlencoded\n" + host +
           "x-amz-content-sha256:9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e\n" + date +
           "\ncontent-length;content-type;host;x-amz-content-sha256;x-amz-date\n"
           "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e",
       "d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b"},
  };
}

TEST(SigV4, MatchesTheAwsTestSuite) {
  for (const SuiteCase& c : suite()) {
    SCOPED_TRACE(c.name);
    SignableRequest request;
    request.method = c.method;
    request.host = "example.amazonaws.com";
    request.canonical_uri = uri_encode(c.raw_path, SlashEncoding::keep);
    request.query = c.query;
    request.headers = c.headers;
    request.payload_hash = sha256_hex(c.body);
    if (c.sign_body) request.headers.emplace_back("x-amz-content-sha256", request.payload_hash);
    Signature s = sign(request, suite_credentials(c.token), {"us-east-1", "service"}, k_suite_time);
    EXPECT_EQ(s.canonical_request, c.canonical_request);
    EXPECT_EQ(s.signature, c.signature);
  }
}

TEST(SigV4, BuildsTheAuthorizationAndDateHeaders) {
  SignableRequest request{"GET", "example.amazonaws.com", "/", {}, {}, k_empty_hash};
  Signature s = sign(request, suite_credentials(), {"us-east-1", "service"}, k_suite_time);
  ASSERT_EQ(s.headers_to_add.size(), 2u);
  EXPECT_EQ(s.headers_to_add[0], (std::pair<std::string, std::string>("x-amz-date", "20150830T123600Z")));
  EXPECT_EQ(s.headers_to_add[1].second,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            "SignedHeaders=host;x-amz-date, "
            "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
            "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
}

// The worked S3 example "GET Object" with a Range header, from docs.aws.amazon.com/AmazonS3/
// latest/API/sig-v4-header-based-auth.html (examplebucket, 20130524, key AKIAIOSFODNN7EXAMPLE).
TEST(SigV4, MatchesTheS3GetObjectExample) {
  Credentials c;
  c.access_key_id = "AKIAIOSFODNN7EXAMPLE";
  c.secret_access_key = Secret("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
  SignableRequest request;
  request.method = "GET";
  request.host = "examplebucket.s3.amazonaws.com";
  request.canonical_uri = "/test.txt";
  request.headers = {{"Range", "bytes=0-9"}, {"x-amz-content-sha256", k_empty_hash}};
  request.payload_hash = k_empty_hash;
  auto t = sys_days{std::chrono::year(2013) / 5 / 24};
  Signature s = sign(request, c, {"us-east-1", "s3"}, t);
  EXPECT_EQ(s.signed_headers, "host;range;x-amz-content-sha256;x-amz-date");
  EXPECT_EQ(s.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4, SecretNeverAppearsInWhatItReturns) {
  SignableRequest request{"PUT", "b.s3.amazonaws.com", "/k", {{"partNumber", "1"}}, {}, k_empty_hash};
  Signature s = sign(request, suite_credentials(), {"us-east-1", "s3"}, k_suite_time);
  const std::string secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
  for (const std::string* text : {&s.canonical_request, &s.string_to_sign, &s.signature})
    EXPECT_EQ(text->find(secret), std::string::npos);
  for (const auto& [name, value] : s.headers_to_add) EXPECT_EQ(value.find(secret), std::string::npos) << name;
}

TEST(UriEncode, KeepsUnreservedAndOptionallySlashes) {
  EXPECT_EQ(uri_encode("a b/c~d+e=f", SlashEncoding::keep), "a%20b/c~d%2Be%3Df");
  EXPECT_EQ(uri_encode("a b/c", SlashEncoding::encode), "a%20b%2Fc");
  EXPECT_EQ(uri_encode("\xC3\xA9", SlashEncoding::encode), "%C3%A9");
}

TEST(CanonicalQuery, SortsEncodedNamesAndKeepsEmptyValues) {
  EXPECT_EQ(canonical_query({{"uploads", ""}, {"prefix", "a b/"}}), "prefix=a%20b%2F&uploads=");
  EXPECT_EQ(canonical_query({}), "");
}

TEST(AmzDate, FormatsUtcWithoutSeparators) {
  EXPECT_EQ(amz_date(k_suite_time + 59s), "20150830T123659Z");
}

}  // namespace
}  // namespace gpuhost::store
