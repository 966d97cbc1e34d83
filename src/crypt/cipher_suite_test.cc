#include "crypt/cipher_suite.h"

#include <gtest/gtest.h>

#include "crypt/test_support.h"

namespace gpuhost::crypt {
namespace {

using testing::on_windows;

TEST(CipherSuite, NamesParseBack) {
  for (CipherSuite suite : {CipherSuite::aes_256_gcm, CipherSuite::sm4_gcm, CipherSuite::sm4_ctr_hmac_sm3}) {
    auto parsed = parse_suite_name(suite_name(suite));
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(*parsed, suite);
  }
  auto unknown = parse_suite_name("aes-128-cbc");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("aes-256-gcm"), std::string::npos) << unknown.error().message;
}

TEST(ChooseSuite, AesIsAvailableEverywhere) {
  auto suite = choose_suite("aes-256-gcm");
  ASSERT_TRUE(suite) << suite.error().message;
  EXPECT_EQ(*suite, CipherSuite::aes_256_gcm);
}

// The suite every build reads, on both OSes, whatever SM4-GCM this build's library has: a
// checkpoint written on one host restores on any other.
TEST(ChooseSuite, Sm4IsTheSuiteEveryBuildReads) {
  auto suite = choose_suite("sm4");
  ASSERT_TRUE(suite) << suite.error().message;
  EXPECT_EQ(*suite, CipherSuite::sm4_ctr_hmac_sm3);
}

TEST(ChooseSuite, AnExactSm4SuiteCanBeForced) {
  auto ctr = choose_suite("sm4-ctr-hmac-sm3");
  ASSERT_TRUE(ctr) << ctr.error().message;
  auto gcm = choose_suite("sm4-gcm");
  // libgcrypt (Windows) has SM4-GCM; Debian 12's OpenSSL 3.0 (Linux) has not, and says so.
  EXPECT_EQ(gcm.has_value(), on_windows());
  if (!gcm) {
    EXPECT_EQ(gcm.error().code, ErrorCode::unavailable);
    EXPECT_NE(gcm.error().message.find("--encrypt sm4-gcm"), std::string::npos) << gcm.error().message;
    EXPECT_NE(gcm.error().message.find("SM4-GCM"), std::string::npos) << gcm.error().message;
  }
}

TEST(ChooseSuite, AnUnknownCipherNamesTheChoices) {
  auto suite = choose_suite("rot13");
  ASSERT_FALSE(suite);
  EXPECT_EQ(suite.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(suite.error().message,
            "--encrypt rot13: unknown cipher; use aes-256-gcm or sm4 (or sm4-gcm, sm4-ctr-hmac-sm3)");
}

TEST(CipherSuite, TagSizesAndHashes) {
  EXPECT_EQ(suite_tag_bytes(CipherSuite::aes_256_gcm), 16u);
  EXPECT_EQ(suite_tag_bytes(CipherSuite::sm4_gcm), 16u);
  EXPECT_EQ(suite_tag_bytes(CipherSuite::sm4_ctr_hmac_sm3), 32u);
  EXPECT_EQ(suite_hash(CipherSuite::aes_256_gcm), platform::HashAlgorithm::sha256);
  EXPECT_EQ(suite_hash(CipherSuite::sm4_ctr_hmac_sm3), platform::HashAlgorithm::sm3);
}

}  // namespace
}  // namespace gpuhost::crypt
