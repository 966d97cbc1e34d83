#include "crypt/manifest_mac.h"

#include <gtest/gtest.h>

#include "crypt/test_support.h"

namespace gpuhost::crypt {
namespace {

using testing::test_key;

constexpr std::string_view k_manifest = R"({"objects":[]})";

// Expected values computed with Python (pyca/cryptography HKDF, hashlib/pyca HMAC) from the
// derivation in doc/encryption.md, key bytes 00..1f.
TEST(ManifestMac, IsTheDocumentedHkdfAndHmac) {
  auto mac = manifest_mac(test_key(), CipherSuite::aes_256_gcm, k_manifest);
  ASSERT_TRUE(mac) << mac.error().message;
  EXPECT_EQ(*mac, "hmac-sha256:2e9fe45919b09d733f7d3594eb2a0bda3ecc6d8ac2d328e977374f694c49c405");
  auto sm3 = manifest_mac(test_key(), CipherSuite::sm4_ctr_hmac_sm3, k_manifest);
  ASSERT_TRUE(sm3) << sm3.error().message;
  EXPECT_EQ(*sm3, "hmac-sm3:e0860f6e6df990787788927b05521f5071c2136bc6366d470956969527f60d92");
}

TEST(ManifestMac, VerifiesTheManifestItWasMadeFor) {
  auto mac = manifest_mac(test_key(), CipherSuite::aes_256_gcm, k_manifest);
  ASSERT_TRUE(mac);
  EXPECT_TRUE(verify_manifest_mac(test_key(), CipherSuite::aes_256_gcm, k_manifest, *mac));
}

TEST(ManifestMac, RefusesAnEditedManifest) {
  auto mac = manifest_mac(test_key(), CipherSuite::aes_256_gcm, k_manifest);
  ASSERT_TRUE(mac);
  auto edited = verify_manifest_mac(test_key(), CipherSuite::aes_256_gcm, R"({"objects":[1]})", *mac);
  ASSERT_FALSE(edited);
  EXPECT_EQ(edited.error().code, ErrorCode::parse_error);
  EXPECT_EQ(
      edited.error().message,
      "manifest authentication failed: it was modified after it was written, or written with another key "
      "(this key's id is " +
          test_key().id() + ")");
}

TEST(ManifestMac, RefusesAnotherKeyOrAnEditedMac) {
  auto mac = manifest_mac(test_key(), CipherSuite::aes_256_gcm, k_manifest);
  ASSERT_TRUE(mac);
  auto wrong_key = verify_manifest_mac(test_key(7), CipherSuite::aes_256_gcm, k_manifest, *mac);
  ASSERT_FALSE(wrong_key);
  EXPECT_NE(wrong_key.error().message.find("manifest authentication failed"), std::string::npos);
  std::string flipped = *mac;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  EXPECT_FALSE(verify_manifest_mac(test_key(), CipherSuite::aes_256_gcm, k_manifest, flipped));
  EXPECT_FALSE(verify_manifest_mac(test_key(), CipherSuite::aes_256_gcm, k_manifest, ""));
}

TEST(ManifestMac, RefusesAManifestClaimingAnotherSuite) {
  auto mac = manifest_mac(test_key(), CipherSuite::sm4_ctr_hmac_sm3, k_manifest);
  ASSERT_TRUE(mac);
  auto downgraded = verify_manifest_mac(test_key(), CipherSuite::aes_256_gcm, k_manifest, *mac);
  ASSERT_FALSE(downgraded);
  EXPECT_NE(downgraded.error().message.find("as suite aes-256-gcm requires"), std::string::npos)
      << downgraded.error().message;
}

}  // namespace
}  // namespace gpuhost::crypt
