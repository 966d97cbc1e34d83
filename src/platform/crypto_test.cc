#include "platform/crypto.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "platform/system_info.h"
#include "platform/test_support.h"

namespace gpuhost::platform {
namespace {

using test_support::on_windows;

std::vector<std::uint8_t> hex(std::string_view text) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2)
    out.push_back(static_cast<std::uint8_t>(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
  return out;
}

std::string hex_of(const Result<Digest32>& digest) {
  return digest ? to_hex(*digest) : "error: " + digest.error().message;
}

// FIPS 180-2, Appendix B.1-B.3 (SHA-256 examples).
TEST(Sha256, MatchesTheFips180_2Examples) {
  EXPECT_EQ(to_hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  std::string thousand(1000, 'a');
  for (int i = 0; i < 1000; ++i) million.update(thousand);
  EXPECT_EQ(to_hex(million.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(hex_of(hash(HashAlgorithm::sha256, byte_view("abc"))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, KeepsItsStateWhenMoved) {
  Sha256 first;
  first.update("ab");
  Sha256 second = std::move(first);
  second.update("c");
  EXPECT_EQ(to_hex(second.finish()), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

std::string md5_hex(std::string_view text) {
  auto digest = md5(byte_view(text));
  return digest ? to_hex(*digest) : "error: " + digest.error().message;
}

// RFC 1321, Appendix A.5 ("test suite"): the whole suite, on both OSes (OpenSSL and CNG).
TEST(Md5, MatchesTheRfc1321TestSuite) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_hex("a"), "0cc175b9c0f1b6a831c399e269772661");
  EXPECT_EQ(md5_hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_hex("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
  EXPECT_EQ(md5_hex("abcdefghijklmnopqrstuvwxyz"), "c3fcd3d76192e4007dfb496cca67e13b");
  EXPECT_EQ(md5_hex("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"),
            "d174ab98d277d9f5a5611c2c9f419d9f");
  EXPECT_EQ(md5_hex("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
            "57edf4a22be3c955ac49da2e2107b67a");
}

TEST(Md5, StreamingInPiecesMatchesOneShot) {
  auto hasher = Md5::create();
  ASSERT_TRUE(hasher) << hasher.error().message;
  const std::string text = "12345678901234567890123456789012345678901234567890123456789012345678901234567890";
  for (std::size_t at = 0; at < text.size(); at += 7) hasher->update(text.data() + at, std::min<std::size_t>(7, text.size() - at));
  EXPECT_EQ(to_hex(hasher->finish()), "57edf4a22be3c955ac49da2e2107b67a");
}

// RFC 4231 §4.2, §4.3, §4.7: HMAC-SHA256 test cases 1, 2 and 6 (key longer than a block).
TEST(HmacSha256, MatchesRfc4231) {
  EXPECT_EQ(to_hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(
      to_hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256, OverPartsEqualsOverTheirConcatenation) {
  auto parts = hmac(HashAlgorithm::sha256, byte_view("Jefe"),
                    {byte_view("what do ya "), ByteView(), byte_view("want for nothing?")});
  EXPECT_EQ(hex_of(parts), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

// RFC 5869 Appendix A.1 and A.3 (HKDF-SHA256; A.3 has an empty salt and info).
TEST(Hkdf, MatchesRfc5869) {
  std::vector<std::uint8_t> ikm(22, 0x0b);
  std::vector<std::uint8_t> okm(42);
  ASSERT_TRUE(
      hkdf(HashAlgorithm::sha256, ikm, hex("000102030405060708090a0b0c"), hex("f0f1f2f3f4f5f6f7f8f9"), okm));
  EXPECT_EQ(to_hex(okm),
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865");
  ASSERT_TRUE(hkdf(HashAlgorithm::sha256, ikm, {}, {}, okm));
  EXPECT_EQ(to_hex(okm),
            "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8");
}

TEST(Hkdf, RefusesMoreThan255Blocks) {
  std::vector<std::uint8_t> okm(255 * 32 + 1);
  auto result = hkdf(HashAlgorithm::sha256, hex("00"), {}, {}, okm);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::invalid_argument);
}

// NIST GCM test vectors: McGrew & Viega, "The Galois/Counter Mode of Operation (GCM)", rev. 2005,
// test cases 13-16 (AES-256).
struct GcmCase {
  const char* name;
  const char* key;
  const char* iv;
  const char* aad;
  const char* plaintext;
  const char* ciphertext;
  const char* tag;
};
constexpr const char* k_gcm_key15 = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308";
constexpr const char* k_gcm_plain15 =
    "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5"
    "aa0de65"
    "7ba637b391aafd255";
const GcmCase k_gcm_cases[] = {
    {"13", "0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000", "",
     "", "", "530f8afbc74536b9a963b4f1c4cb738b"},
    {"14", "0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000", "",
     "00000000000000000000000000000000", "cea7403d4d606b6e074ec5d3baf39d18",
     "d0d1c8a799996bf0265b98b5d48ab919"},
    {"15", k_gcm_key15, "cafebabefacedbaddecaf888", "", k_gcm_plain15,
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6"
     "393ba7a"
     "0abcc9f662898015ad",
     "b094dac5d93471bdec1a502270e3cc6c"},
    {"16", k_gcm_key15, "cafebabefacedbaddecaf888", "feedfacedeadbeeffeedfacedeadbeefabaddad2",
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf"
     "5aa0de65"
     "7ba637b39",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6"
     "393ba7a"
     "0abcc9f662",
     "76fc6ece0f4e1768cddf8853bb2d551b"},
};

TEST(Aes256Gcm, MatchesTheGcmSpecTestCases) {
  ASSERT_TRUE(aead_available(AeadAlgorithm::aes_256_gcm));
  for (const GcmCase& c : k_gcm_cases) {
    SCOPED_TRACE(std::string("test case ") + c.name);
    auto plain = hex(c.plaintext);
    std::vector<std::uint8_t> sealed(plain.size());
    std::vector<std::uint8_t> tag(k_aead_tag_bytes);
    auto sealed_ok =
        aead_seal(AeadAlgorithm::aes_256_gcm, hex(c.key), hex(c.iv), hex(c.aad), plain, sealed, tag);
    ASSERT_TRUE(sealed_ok) << sealed_ok.error().message;
    EXPECT_EQ(to_hex(sealed), c.ciphertext);
    EXPECT_EQ(to_hex(tag), c.tag);

    std::vector<std::uint8_t> opened(plain.size());
    auto opened_ok = aead_open(AeadAlgorithm::aes_256_gcm, hex(c.key), hex(c.iv), hex(c.aad),
                               hex(c.ciphertext), hex(c.tag), opened);
    ASSERT_TRUE(opened_ok) << opened_ok.error().message;
    EXPECT_EQ(to_hex(opened), c.plaintext);
  }
}

TEST(Aes256Gcm, EncryptsInPlace) {
  const GcmCase& c = k_gcm_cases[2];
  auto buffer = hex(c.plaintext);
  std::vector<std::uint8_t> tag(k_aead_tag_bytes);
  ASSERT_TRUE(aead_seal(AeadAlgorithm::aes_256_gcm, hex(c.key), hex(c.iv), {}, buffer, buffer, tag));
  EXPECT_EQ(to_hex(buffer), c.ciphertext);
  ASSERT_TRUE(aead_open(AeadAlgorithm::aes_256_gcm, hex(c.key), hex(c.iv), {}, buffer, tag, buffer));
  EXPECT_EQ(to_hex(buffer), c.plaintext);
}

TEST(Aes256Gcm, RefusesAChangedCiphertextTagAadNonceOrKey) {
  const GcmCase& c = k_gcm_cases[3];
  auto key = hex(c.key), iv = hex(c.iv), aad = hex(c.aad), sealed = hex(c.ciphertext), tag = hex(c.tag);
  auto flipped = [](std::vector<std::uint8_t> bytes, std::size_t at) {
    bytes[at] ^= 0x01;
    return bytes;
  };
  struct Variant {
    const char* what;
    std::vector<std::uint8_t> key, iv, aad, sealed, tag;
  };
  const Variant variants[] = {
      {"ciphertext", key, iv, aad, flipped(sealed, 59), tag},
      {"tag", key, iv, aad, sealed, flipped(tag, 0)},
      {"aad", key, iv, flipped(aad, 3), sealed, tag},
      {"nonce", key, flipped(iv, 11), aad, sealed, tag},
      {"key", flipped(key, 31), iv, aad, sealed, tag},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.what);
    std::vector<std::uint8_t> opened(sealed.size(), 0xee);
    auto result = aead_open(AeadAlgorithm::aes_256_gcm, v.key, v.iv, v.aad, v.sealed, v.tag, opened);
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().code, ErrorCode::parse_error);
    EXPECT_NE(result.error().message.find("authentication failed"), std::string::npos)
        << result.error().message;
    EXPECT_EQ(opened, std::vector<std::uint8_t>(sealed.size(), 0)) << "unauthenticated plaintext left behind";
  }
}

// GB/T 32905-2016 (SM3), Appendix A examples 1 and 2: OpenSSL on Linux, libgcrypt on Windows.
TEST(Sm3, MatchesTheGbT32905Examples) {
  auto abc = hash(HashAlgorithm::sm3, byte_view("abc"));
  EXPECT_EQ(hex_of(abc), "66c7f0f462eeedd9d1f2d46bdc10e4e24167c4875cf2f7a2297da02b8f4ba8e0");
  std::string abcd;
  for (int i = 0; i < 16; ++i) abcd += "abcd";
  EXPECT_EQ(hex_of(hash(HashAlgorithm::sm3, byte_view(abcd))),
            "debe9ff92275b8a138604889c18e5a4d6fdb70e5387e5765293dcba39c0c5732");
}

// HMAC-SM3 and HKDF-SM3 have no published vectors; these were computed by pyca/cryptography 48
// with its own bundled OpenSSL 4.0 (RFC 4231 case 1 and RFC 5869 A.1 inputs, SM3 as the hash).
TEST(Sm3, HmacAndHkdfAgreeWithAnIndependentBuild) {
  std::vector<std::uint8_t> key(20, 0x0b);
  EXPECT_EQ(hex_of(hmac(HashAlgorithm::sm3, key, {byte_view("Hi There")})),
            "51b00d1fb49832bfb01c3ce27848e59f871d9ba938dc563b338ca964755cce70");
  std::vector<std::uint8_t> okm(42);
  ASSERT_TRUE(hkdf(HashAlgorithm::sm3, std::vector<std::uint8_t>(22, 0x0b), hex("000102030405060708090a0b0c"),
                   hex("f0f1f2f3f4f5f6f7f8f9"), okm));
  EXPECT_EQ(to_hex(okm),
            "c69fe91b7aaee2dd5718d72dcaee0cce93f1b8e41f792da51261b6a517e68b36ed2c595572b01dfa359b");
}

// GB/T 32907-2016 (SM4), Appendix A example 1: key = plaintext = 0123456789abcdeffedcba9876543210.
// In CTR mode the first key-stream block is SM4_key(counter), so a zero block XORed with the
// counter set to the example's plaintext yields the example's ciphertext.
TEST(Sm4Ctr, MatchesTheGbT32907Example) {
  auto key = hex("0123456789abcdeffedcba9876543210");
  std::vector<std::uint8_t> block(16, 0);
  auto result = sm4_ctr_xor(key, key, block, block);
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(to_hex(block), "681edf34d206965e86b3e94f536e4246");
}

// draft-ribose-cfrg-sm4-10, Appendix A.2.5.1 (SM4-CTR example 1): the counter crosses blocks.
TEST(Sm4Ctr, MatchesTheRiboseDraftExample) {
  auto plain =
      hex("aaaaaaaaaaaaaaaabbbbbbbbbbbbbbbbccccccccccccccccddddddddddddddddeeeeeeeeeeeeeeeeffffffffffffffffaa"
          "aaaaaaaaaaaaaa"
          "bbbbbbbbbbbbbbbb");
  std::vector<std::uint8_t> out(plain.size());
  ASSERT_TRUE(sm4_ctr_xor(hex("0123456789abcdeffedcba9876543210"), hex("000102030405060708090a0b0c0d0e0f"),
                          plain, out));
  EXPECT_EQ(to_hex(out),
            "ac3236cb970cc20791364c395a1342d1a3cbc1878c6f30cd074cce385cdd70c7f234bc0e24c11980fd1286310ce37b92"
            "6e02fcd0faa0"
            "baf38b2933851d824514");
}

// RFC 8998 Appendix A.1 (SM4-GCM). libgcrypt (the Windows build) has SM4-GCM; OpenSSL 3.0 (Debian
// 12's, the Linux build) lacks it, and then the error must say so.
TEST(Sm4Gcm, MatchesRfc8998WhereTheLibraryProvidesIt) {
  auto available = aead_available(AeadAlgorithm::sm4_gcm);
  if (on_windows()) {
    ASSERT_TRUE(available) << available.error().message;
  }
  if (!available) {
    EXPECT_EQ(available.error().code, ErrorCode::unavailable);
    EXPECT_NE(available.error().message.find("SM4-GCM"), std::string::npos) << available.error().message;
    GTEST_SKIP() << available.error().message;
  }
  auto plain =
      hex("aaaaaaaaaaaaaaaabbbbbbbbbbbbbbbbccccccccccccccccddddddddddddddddeeeeeeeeeeeeeeeeffffffffffffffffee"
          "eeeeeeeeeeeeee"
          "aaaaaaaaaaaaaaaa");
  std::vector<std::uint8_t> sealed(plain.size()), tag(k_aead_tag_bytes);
  ASSERT_TRUE(aead_seal(AeadAlgorithm::sm4_gcm, hex("0123456789abcdeffedcba9876543210"),
                        hex("00001234567800000000abcd"), hex("feedfacedeadbeeffeedfacedeadbeefabaddad2"),
                        plain, sealed, tag));
  EXPECT_EQ(to_hex(sealed),
            "17f399f08c67d5ee19d0dc9969c4bb7d5fd46fd3756489069157b282bb200735d82710ca5c22f0ccfa7cbf93d496ac15"
            "a56834cbcf"
            "98c397b4024a2691233b8d");
  EXPECT_EQ(to_hex(tag), "83de3541e4c2b58177e065a9bf7b62ec");

  std::vector<std::uint8_t> opened(sealed.size(), 0xee);
  ASSERT_TRUE(aead_open(AeadAlgorithm::sm4_gcm, hex("0123456789abcdeffedcba9876543210"),
                        hex("00001234567800000000abcd"), hex("feedfacedeadbeeffeedfacedeadbeefabaddad2"),
                        sealed, tag, opened));
  EXPECT_EQ(opened, plain);
  // One changed ciphertext bit: refused, and nothing of the plaintext is left.
  sealed[7] ^= 0x01;
  auto refused = aead_open(AeadAlgorithm::sm4_gcm, hex("0123456789abcdeffedcba9876543210"),
                           hex("00001234567800000000abcd"), hex("feedfacedeadbeeffeedfacedeadbeefabaddad2"),
                           sealed, tag, opened);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::parse_error);
  EXPECT_NE(refused.error().message.find("authentication failed"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(opened, std::vector<std::uint8_t>(plain.size(), 0));
}

TEST(RandomBytes, FillsTheBufferDifferentlyEachTime) {
  std::vector<std::uint8_t> a(32, 0), b(32, 0);
  ASSERT_TRUE(random_bytes(a));
  ASSERT_TRUE(random_bytes(b));
  EXPECT_NE(a, std::vector<std::uint8_t>(32, 0));
  EXPECT_NE(a, b);
}

TEST(ConstantTimeEqual, ComparesContentAndLength) {
  EXPECT_TRUE(constant_time_equal(byte_view("tag"), byte_view("tag")));
  EXPECT_FALSE(constant_time_equal(byte_view("tag"), byte_view("taG")));
  EXPECT_FALSE(constant_time_equal(byte_view("tag"), byte_view("ta")));
  EXPECT_TRUE(constant_time_equal({}, {}));
}

TEST(SecureZero, ClearsTheBytes) {
  std::vector<std::uint8_t> secret = hex("00112233");
  secure_zero(secret);
  EXPECT_EQ(secret, std::vector<std::uint8_t>(4, 0));
}

TEST(CryptoLibrary, NamesTheLibrary) {
  EXPECT_NE(crypto_library().find(on_windows() ? "CNG" : "OpenSSL"), std::string::npos) << crypto_library();
  // The Windows build names the library its SM3/SM4 came from once it has loaded.
  if (on_windows() && hash(HashAlgorithm::sm3, byte_view(""))) {
    EXPECT_NE(crypto_library().find("libgcrypt 1."), std::string::npos) << crypto_library();
  }
}

}  // namespace
}  // namespace gpuhost::platform
