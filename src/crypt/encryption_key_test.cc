#include "crypt/encryption_key.h"

#include <fstream>

#include <gtest/gtest.h>

#include "crypt/test_support.h"
#include "platform/scoped_env.h"

namespace gpuhost::crypt {
namespace {

using platform::ScopedEnv;
using testing::ScratchDir;

constexpr const char* k_hex_key = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

void write(const std::filesystem::path& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary) << contents;
}

// The id is the first 8 bytes of HMAC-SHA256(key, "gpuhost-encryption v1 key id"), computed here
// with Python's hmac module for key bytes 00..1f.
TEST(EncryptionKey, IdIsTheDocumentedHmacPrefix) {
  auto key = EncryptionKey::from_hex(k_hex_key, "test");
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(key->id(), "b2a86aff27ac3e70");
  EXPECT_EQ(platform::to_hex(key->bytes()), k_hex_key);
  EXPECT_NE(testing::test_key(1).id(), key->id());
}

TEST(EncryptionKey, HexMayCarryWhitespaceAndUpperCase) {
  std::string upper = k_hex_key;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto key = EncryptionKey::from_hex("  " + upper + "\r\n", "test");
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(key->id(), "b2a86aff27ac3e70");
}

TEST(EncryptionKey, MalformedTextIsRefusedWithoutEchoingIt) {
  const std::string secret_ish = std::string(k_hex_key).substr(0, 63) + "g";
  for (const std::string& text : {std::string(k_hex_key).substr(0, 32), secret_ish, std::string("hunter2")}) {
    auto key = EncryptionKey::from_hex(text, "GPUHOST_ENCRYPTION_KEY");
    ASSERT_FALSE(key);
    EXPECT_EQ(key.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(key.error().message.find("expected 64 hex digits"), std::string::npos) << key.error().message;
    EXPECT_EQ(key.error().message.find(text), std::string::npos)
        << "the key text leaked into: " << key.error().message;
  }
}

TEST(EncryptionKey, APlaceholderKeyIsRefused) {
  auto key = EncryptionKey::from_hex(std::string(64, '0'), "test");
  ASSERT_FALSE(key);
  EXPECT_NE(key.error().message.find("placeholder"), std::string::npos) << key.error().message;
}

TEST(ReadKeyFile, TakesRawBytesOrHexWithANewline) {
  ScratchDir dir("keyfile");
  std::string raw;
  for (int i = 0; i < 32; ++i) raw.push_back(static_cast<char>(i));
  write(dir.path() / "raw", raw);
  write(dir.path() / "hex", std::string(k_hex_key) + "\n");
  for (const char* name : {"raw", "hex"}) {
    auto key = read_key_file(dir.path() / name);
    ASSERT_TRUE(key) << key.error().message;
    EXPECT_EQ(key->id(), "b2a86aff27ac3e70") << name;
  }
}

TEST(ReadKeyFile, RefusesA128BitHexKeyAndOtherSizes) {
  ScratchDir dir("keyfile-bad");
  write(dir.path() / "short-hex", std::string(k_hex_key).substr(0, 32));
  write(dir.path() / "passphrase", "correct horse battery staple\n");
  for (const char* name : {"short-hex", "passphrase"}) {
    auto key = read_key_file(dir.path() / name);
    ASSERT_FALSE(key) << name;
    EXPECT_EQ(key.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(key.error().message.find("32 raw bytes or 64 hex digits"), std::string::npos)
        << key.error().message;
    EXPECT_EQ(key.error().message.find("horse"), std::string::npos) << key.error().message;
  }
  auto missing = read_key_file(dir.path() / "absent");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::not_found);
}

TEST(LoadEncryptionKey, ReadsTheFileVariableThenTheHexVariable) {
  ScratchDir dir("load");
  write(dir.path() / "key", std::string(k_hex_key) + "\n");
  {
    ScopedEnv file{std::string(k_key_file_env), (dir.path() / "key").string()};
    ScopedEnv hex{std::string(k_key_env), std::nullopt};
    auto key = load_encryption_key();
    ASSERT_TRUE(key) << key.error().message;
    EXPECT_EQ(key->id(), "b2a86aff27ac3e70");
  }
  {
    ScopedEnv file{std::string(k_key_file_env), std::nullopt};
    ScopedEnv hex{std::string(k_key_env), std::string(k_hex_key)};
    auto key = load_encryption_key();
    ASSERT_TRUE(key) << key.error().message;
    EXPECT_EQ(key->id(), "b2a86aff27ac3e70");
  }
}

TEST(LoadEncryptionKey, AGivenKeyFileWinsOverTheEnvironment) {
  ScratchDir dir("load-flag");
  write(dir.path() / "key", std::string(k_hex_key));
  ScopedEnv hex{std::string(k_key_env), std::string(64, 'a')};
  auto key = load_encryption_key(dir.path() / "key");
  ASSERT_TRUE(key) << key.error().message;
  EXPECT_EQ(key->id(), "b2a86aff27ac3e70");
}

TEST(LoadEncryptionKey, BothVariablesOrNeitherIsAClearError) {
  {
    ScopedEnv file{std::string(k_key_file_env), "/some/key"};
    ScopedEnv hex{std::string(k_key_env), std::string(k_hex_key)};
    auto key = load_encryption_key();
    ASSERT_FALSE(key);
    EXPECT_EQ(key.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(key.error().message.find("unset one"), std::string::npos) << key.error().message;
    EXPECT_EQ(key.error().message.find(k_hex_key), std::string::npos) << key.error().message;
  }
  {
    ScopedEnv file{std::string(k_key_file_env), std::nullopt};
    ScopedEnv hex{std::string(k_key_env), std::nullopt};
    auto key = load_encryption_key();
    ASSERT_FALSE(key);
    EXPECT_EQ(key.error().code, ErrorCode::not_found);
    EXPECT_NE(key.error().message.find("openssl rand -hex 32"), std::string::npos) << key.error().message;
  }
}

}  // namespace
}  // namespace gpuhost::crypt
