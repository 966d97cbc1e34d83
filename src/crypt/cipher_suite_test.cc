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

TEST(ChooseSuite, Sm4IsGcmWhereOpenSslHasItElseCtrWithHmacSm3) {
  auto suite = choose_suite("sm4");
  if (on_windows()) {
    ASSERT_FALSE(suite);
    EXPECT_EQ(suite.error().code, ErrorCode::unsupported);
    EXPECT_NE(suite.error().message.find("--encrypt sm4"), std::string::npos) << suite.error().message;
    EXPECT_NE(suite.error().message.find("use AES-256-GCM"), std::string::npos) << suite.error().message;
    return;
  }
  ASSERT_TRUE(suite) << suite.error().message;
  bool has_sm4_gcm = platform::aead_available(platform::AeadAlgorithm::sm4_gcm).has_value();
  EXPECT_EQ(*suite, has_sm4_gcm ? CipherSuite::sm4_gcm : CipherSuite::sm4_ctr_hmac_sm3);
}

TEST(ChooseSuite, AnExactSm4SuiteCanBeForced) {
  auto ctr = choose_suite("sm4-ctr-hmac-sm3");
  EXPECT_EQ(ctr.has_value(), !on_windows());
  auto gcm = choose_suite("sm4-gcm");
  EXPECT_EQ(gcm.has_value(), platform::aead_available(platform::AeadAlgorithm::sm4_gcm).has_value());
  if (!gcm) {
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
