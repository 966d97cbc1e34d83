#include "base/checksum.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpuhost {
namespace {

// xxHash's sanity-check buffer (Cyan4973/xxHash cli/xsum_sanity_check.c, XSUM_fillTestBuffer).
std::vector<unsigned char> xxhash_sanity_buffer(std::size_t len) {
  std::vector<unsigned char> buffer(len);
  std::uint64_t byte_gen = 2654435761u;  // PRIME32
  for (auto& b : buffer) {
    b = static_cast<unsigned char>(byte_gen >> 56);
    byte_gen *= 11400714785074694797ull;  // PRIME64
  }
  return buffer;
}

std::string hash_of(const void* data, std::size_t bytes) {
  ContentHasher hasher;
  hasher.update(data, bytes);
  return hasher.digest();
}

// The CRC-32 definition itself, one bit at a time (reflected polynomial 0xEDB88320).
std::uint32_t bitwise_crc32(const unsigned char* p, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

TEST(Crc32, MatchesTheStandardCheckValue) {
  // The "check" value of CRC-32/ISO-HDLC (Greg Cook's CRC catalogue; zlib crc32()).
  EXPECT_EQ(crc32("123456789"), 0xCBF43926u);
  EXPECT_EQ(crc32(""), 0u);
  EXPECT_EQ(crc32("a"), 0xE8B7BE43u);
  EXPECT_EQ(crc32("The quick brown fox jumps over the lazy dog"), 0x414FA339u);
}

TEST(Crc32, IncrementalEqualsOneShotAtEverySplit) {
  auto data = xxhash_sanity_buffer(203);  // odd length: exercises the 8-byte loop and the tail
  std::uint32_t whole = crc32_update(0, data.data(), data.size());
  for (std::size_t split = 0; split <= data.size(); ++split) {
    std::uint32_t crc = crc32_update(0, data.data(), split);
    crc = crc32_update(crc, data.data() + split, data.size() - split);
    ASSERT_EQ(crc, whole) << "split at " << split;
  }
}

TEST(Crc32, MatchesTheBitwiseDefinitionAtEveryLengthAndAlignment) {
  // Covers the folding path (64 bytes and up, where the CPU has it), its 16-byte steps and the
  // table path for the tail.
  auto data = xxhash_sanity_buffer(1100);
  for (std::size_t offset = 0; offset < 4; ++offset)
    for (std::size_t n = 0; n + offset <= data.size(); n += (n < 300 ? 1 : 37))
      ASSERT_EQ(crc32_update(0, data.data() + offset, n), bitwise_crc32(data.data() + offset, n))
          << "length " << n << " at offset " << offset;
  auto big = xxhash_sanity_buffer(1 << 20);
  EXPECT_EQ(crc32_update(0, big.data(), big.size()), bitwise_crc32(big.data(), big.size()));
}

TEST(Crc32, UnalignedStartGivesTheSameValue) {
  auto data = xxhash_sanity_buffer(100);
  std::vector<unsigned char> shifted(data.size() + 3);
  std::copy(data.begin(), data.end(), shifted.begin() + 3);
  EXPECT_EQ(crc32_update(0, shifted.data() + 3, data.size()), crc32_update(0, data.data(), data.size()));
}

// CRC-32C one bit at a time (reflected polynomial 0x82F63B78).
std::uint32_t bitwise_crc32c(const unsigned char* p, std::size_t n) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

// Both paths (SSE4.2 where the CPU has it, and the tables), which must agree.
std::uint32_t crc32c_of(const std::vector<unsigned char>& bytes) {
  const std::uint32_t crc = crc32c_update(0, bytes.data(), bytes.size());
  EXPECT_EQ(crc32c_update_portable(0, bytes.data(), bytes.size()), crc);
  return crc;
}

TEST(Crc32c, MatchesTheIscsiExamplesOfRfc3720) {
  // RFC 3720 appendix B.4 "CRC Examples"; the RFC lists the CRC bytes as sent, least significant
  // byte first (aa 36 91 8a is 0x8A9136AA).
  EXPECT_EQ(crc32c_of(std::vector<unsigned char>(32, 0x00)), 0x8A9136AAu);
  EXPECT_EQ(crc32c_of(std::vector<unsigned char>(32, 0xFF)), 0x62A8AB43u);
  std::vector<unsigned char> ascending(32), descending(32);
  for (unsigned i = 0; i < 32; ++i) {
    ascending[i] = static_cast<unsigned char>(i);
    descending[i] = static_cast<unsigned char>(31 - i);
  }
  EXPECT_EQ(crc32c_of(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c_of(descending), 0x113FDB5Cu);
  const std::vector<unsigned char> read_pdu = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
      0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(crc32c_of(read_pdu), 0xD9963A56u);
}

TEST(Crc32c, MatchesTheCatalogueCheckValue) {
  // "check" of CRC-32/ISCSI in Greg Cook's CRC catalogue.
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_NE(crc32c("123456789"), crc32("123456789"));
}

TEST(Crc32c, MatchesTheBitwiseDefinitionAtEveryLengthAlignmentAndSplit) {
  auto data = xxhash_sanity_buffer(700);
  for (std::size_t offset = 0; offset < 8; ++offset)
    for (std::size_t n = 0; n + offset <= data.size(); n += (n < 100 ? 1 : 29)) {
      const std::uint32_t want = bitwise_crc32c(data.data() + offset, n);
      ASSERT_EQ(crc32c_update(0, data.data() + offset, n), want) << "length " << n << " at " << offset;
      ASSERT_EQ(crc32c_update_portable(0, data.data() + offset, n), want) << "tables, length " << n;
    }
  std::uint32_t whole = crc32c_update(0, data.data(), data.size());
  for (std::size_t split = 0; split <= data.size(); split += 3) {
    std::uint32_t crc = crc32c_update(0, data.data(), split);
    ASSERT_EQ(crc32c_update(crc, data.data() + split, data.size() - split), whole) << split;
    crc = crc32c_update_portable(0, data.data(), split);
    ASSERT_EQ(crc32c_update_portable(crc, data.data() + split, data.size() - split), whole) << split;
  }
}

TEST(ContentHasher, MatchesXxhashSanityVectors) {
  // XSUM_XXH128_testdata in xxHash's cli/xsum_sanity_check.c, printed in canonical form
  // (high 64 bits first), as `xxhsum -H2` does.
  EXPECT_EQ(hash_of(nullptr, 0), "xxh3-128:99aa06d3014798d86001c324468d497f");
  auto buffer = xxhash_sanity_buffer(2367);
  EXPECT_EQ(hash_of(buffer.data(), 222), "xxh3-128:337e09641b948717f1aebd597cec6b3a");
  EXPECT_EQ(hash_of(buffer.data(), 2048), "xxh3-128:f736557fd47073a5dd59e2c3a5f038e0");
  EXPECT_EQ(hash_of(buffer.data(), 2367), "xxh3-128:e89c0f6ff369b427cb37aeb9e5d361ed");
}

TEST(ContentHasher, IncrementalEqualsOneShot) {
  auto buffer = xxhash_sanity_buffer(2367);
  std::string whole = hash_of(buffer.data(), buffer.size());
  for (std::size_t chunk : {1u, 7u, 64u, 255u, 1000u}) {
    ContentHasher hasher;
    for (std::size_t pos = 0; pos < buffer.size(); pos += chunk)
      hasher.update(buffer.data() + pos, std::min(chunk, buffer.size() - pos));
    EXPECT_EQ(hasher.digest(), whole) << "chunk " << chunk;
  }
}

TEST(ContentHasher, OneFlippedBitChangesTheDigest) {
  auto buffer = xxhash_sanity_buffer(4096);
  std::string before = hash_of(buffer.data(), buffer.size());
  buffer[1234] ^= 0x10;
  EXPECT_NE(hash_of(buffer.data(), buffer.size()), before);
}

TEST(ContentHasher, DigestDoesNotEndTheStreamAndMovesKeepState) {
  ContentHasher hasher;
  hasher.update("abc", 3);
  std::string first = hasher.digest();
  EXPECT_EQ(hasher.digest(), first);
  ContentHasher moved = std::move(hasher);
  moved.update("def", 3);
  EXPECT_EQ(moved.digest(), hash_of("abcdef", 6));
  ContentHasher assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.digest(), hash_of("abcdef", 6));
}

}  // namespace
}  // namespace gpuhost
