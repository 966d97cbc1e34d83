#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "base/error.h"
#include "crypt/cipher_suite.h"
#include "crypt/encryption_key.h"
#include "platform/crypto.h"

namespace gpuhost::crypt {

using FileId = std::array<std::uint8_t, 16>;
using NonceBase = std::array<std::uint8_t, platform::k_aead_nonce_bytes>;

// Whether a chunk is the file's last one: bound into every chunk's tag, so a file cut at a chunk
// boundary is refused.
enum class FinalChunk : std::uint8_t { no = 0, yes = 1 };

// The keys of one encrypted file and the operations on its chunks (doc/encryption.md, "Keys" and
// "Chunks"). Keys come from HKDF over the user key with the file id as salt, so every file has
// its own keys and a nonce is never reused under one key. Move-only; seal/open/header_mac are
// const and thread-safe: worker threads share one ChunkCipher. Keys are zeroed on destruction.
class ChunkCipher {
 public:
  // REQUIRES: suite_available(suite).
  [[nodiscard]] static Result<ChunkCipher> create(const EncryptionKey& key, CipherSuite suite,
                                                  const FileId& file_id, const NonceBase& nonce_base);
  ChunkCipher(ChunkCipher&& other) noexcept;
  ChunkCipher& operator=(ChunkCipher&&) = delete;
  ChunkCipher(const ChunkCipher&) = delete;
  ChunkCipher& operator=(const ChunkCipher&) = delete;
  ~ChunkCipher();

  [[nodiscard]] CipherSuite suite() const { return m_suite; }
  [[nodiscard]] std::size_t tag_bytes() const { return suite_tag_bytes(m_suite); }

  // Encrypts `data` in place and writes its tag (tag_bytes() long).
  [[nodiscard]] Result<void> seal(std::uint64_t index, FinalChunk final, std::span<std::uint8_t> data,
                                  std::span<std::uint8_t> tag) const;
  // Checks the tag, then decrypts `data` in place. A mismatch is a parse_error ending in
  // "authentication failed", and `data` is then zeroed.
  [[nodiscard]] Result<void> open(std::uint64_t index, FinalChunk final, std::span<std::uint8_t> data,
                                  platform::ByteView tag) const;
  // HMAC of the header's first 64 bytes.
  [[nodiscard]] Result<platform::Digest32> header_mac(platform::ByteView header) const;

 private:
  ChunkCipher() = default;
  [[nodiscard]] NonceBase nonce(std::uint64_t index) const;
  [[nodiscard]] std::array<std::uint8_t, 25> aad(std::uint64_t index, FinalChunk final) const;

  CipherSuite m_suite = CipherSuite::aes_256_gcm;
  FileId m_file_id{};
  NonceBase m_nonce_base{};
  std::array<std::uint8_t, 32> m_data_key{};       // 32 bytes for AES-256, the first 16 for SM4
  std::array<std::uint8_t, 32> m_chunk_mac_key{};  // sm4-ctr-hmac-sm3 only
  std::array<std::uint8_t, 32> m_header_mac_key{};
};

// The HKDF info string of one derived key: "gpuhost-encryption v1 <suite> <purpose>".
[[nodiscard]] std::string kdf_label(CipherSuite suite, std::string_view purpose);

}  // namespace gpuhost::crypt
