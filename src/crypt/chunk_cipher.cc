#include "crypt/chunk_cipher.h"

#include <algorithm>

namespace gpuhost::crypt {
namespace {

void put_le64(std::uint8_t* out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

}  // namespace

std::string kdf_label(CipherSuite suite, std::string_view purpose) {
  return std::string("gpuhost-encryption v1 ") + suite_name(suite) + " " + std::string(purpose);
}

Result<ChunkCipher> ChunkCipher::create(const EncryptionKey& key, CipherSuite suite, const FileId& file_id,
                                        const NonceBase& nonce_base) {
  ChunkCipher cipher;
  cipher.m_suite = suite;
  cipher.m_file_id = file_id;
  cipher.m_nonce_base = nonce_base;
  platform::HashAlgorithm hash = suite_hash(suite);
  std::size_t data_key_bytes = suite == CipherSuite::aes_256_gcm ? 32 : platform::k_sm4_key_bytes;
  auto derive = [&](std::string_view purpose, std::span<std::uint8_t> out) {
    return platform::hkdf(hash, key.bytes(), file_id, platform::byte_view(kdf_label(suite, purpose)), out);
  };
  if (auto ok = derive("data key", std::span(cipher.m_data_key).first(data_key_bytes)); !ok)
    return std::unexpected(ok.error());
  if (suite == CipherSuite::sm4_ctr_hmac_sm3)
    if (auto ok = derive("chunk mac key", cipher.m_chunk_mac_key); !ok) return std::unexpected(ok.error());
  if (auto ok = derive("header mac key", cipher.m_header_mac_key); !ok) return std::unexpected(ok.error());
  return cipher;
}

ChunkCipher::ChunkCipher(ChunkCipher&& other) noexcept
    : m_suite(other.m_suite),
      m_file_id(other.m_file_id),
      m_nonce_base(other.m_nonce_base),
      m_data_key(other.m_data_key),
      m_chunk_mac_key(other.m_chunk_mac_key),
      m_header_mac_key(other.m_header_mac_key) {
  platform::secure_zero(other.m_data_key);
  platform::secure_zero(other.m_chunk_mac_key);
  platform::secure_zero(other.m_header_mac_key);
}

ChunkCipher::~ChunkCipher() {
  platform::secure_zero(m_data_key);
  platform::secure_zero(m_chunk_mac_key);
  platform::secure_zero(m_header_mac_key);
}

// The chunk index, big-endian in the last 8 bytes, XORed into the per-file base: TLS 1.3's
// per-record nonce (RFC 8446 §5.3). Distinct for every index below 2^64.
NonceBase ChunkCipher::nonce(std::uint64_t index) const {
  NonceBase out = m_nonce_base;
  for (int i = 0; i < 8; ++i) out[out.size() - 1 - i] ^= static_cast<std::uint8_t>(index >> (8 * i));
  return out;
}

// file id (16) | chunk index, little-endian (8) | final flag (1).
std::array<std::uint8_t, 25> ChunkCipher::aad(std::uint64_t index, FinalChunk final) const {
  std::array<std::uint8_t, 25> out{};
  std::copy(m_file_id.begin(), m_file_id.end(), out.begin());
  put_le64(out.data() + 16, index);
  out[24] = static_cast<std::uint8_t>(final);
  return out;
}

Result<void> ChunkCipher::seal(std::uint64_t index, FinalChunk final, std::span<std::uint8_t> data,
                               std::span<std::uint8_t> tag) const {
  auto nonce_bytes = nonce(index);
  auto aad_bytes = aad(index, final);
  switch (m_suite) {
    case CipherSuite::aes_256_gcm:
    case CipherSuite::sm4_gcm: {
      auto algorithm = m_suite == CipherSuite::aes_256_gcm ? platform::AeadAlgorithm::aes_256_gcm
                                                           : platform::AeadAlgorithm::sm4_gcm;
      platform::ByteView key(m_data_key.data(), platform::aead_key_bytes(algorithm));
      return platform::aead_seal(algorithm, key, nonce_bytes, aad_bytes, data, data, tag);
    }
    case CipherSuite::sm4_ctr_hmac_sm3: {
      // Counter block: the 12-byte chunk nonce, then a 32-bit block counter from zero.
      std::array<std::uint8_t, 16> counter{};
      std::copy(nonce_bytes.begin(), nonce_bytes.end(), counter.begin());
      platform::ByteView key(m_data_key.data(), platform::k_sm4_key_bytes);
      if (auto ok = platform::sm4_ctr_xor(key, counter, data, data); !ok) return std::unexpected(ok.error());
      auto mac = platform::hmac(platform::HashAlgorithm::sm3, m_chunk_mac_key, {aad_bytes, data});
      if (!mac) return std::unexpected(mac.error());
      std::copy(mac->begin(), mac->end(), tag.begin());
      return {};
    }
  }
  return make_error(ErrorCode::internal, "sealing a chunk: unknown cipher suite");
}

Result<void> ChunkCipher::open(std::uint64_t index, FinalChunk final, std::span<std::uint8_t> data,
                               platform::ByteView tag) const {
  auto nonce_bytes = nonce(index);
  auto aad_bytes = aad(index, final);
  switch (m_suite) {
    case CipherSuite::aes_256_gcm:
    case CipherSuite::sm4_gcm: {
      auto algorithm = m_suite == CipherSuite::aes_256_gcm ? platform::AeadAlgorithm::aes_256_gcm
                                                           : platform::AeadAlgorithm::sm4_gcm;
      platform::ByteView key(m_data_key.data(), platform::aead_key_bytes(algorithm));
      return platform::aead_open(algorithm, key, nonce_bytes, aad_bytes, data, tag, data);
    }
    case CipherSuite::sm4_ctr_hmac_sm3: {
      // Encrypt-then-MAC: the MAC is checked before a byte is decrypted.
      auto mac = platform::hmac(platform::HashAlgorithm::sm3, m_chunk_mac_key, {aad_bytes, data});
      if (!mac) return std::unexpected(mac.error());
      if (!platform::constant_time_equal(*mac, tag)) {
        platform::secure_zero(data);
        return make_error(ErrorCode::parse_error, "SM4-CTR with HMAC-SM3: authentication failed");
      }
      std::array<std::uint8_t, 16> counter{};
      std::copy(nonce_bytes.begin(), nonce_bytes.end(), counter.begin());
      platform::ByteView key(m_data_key.data(), platform::k_sm4_key_bytes);
      return platform::sm4_ctr_xor(key, counter, data, data);
    }
  }
  return make_error(ErrorCode::internal, "opening a chunk: unknown cipher suite");
}

Result<platform::Digest32> ChunkCipher::header_mac(platform::ByteView header) const {
  return platform::hmac(suite_hash(m_suite), m_header_mac_key, {header});
}

}  // namespace gpuhost::crypt
