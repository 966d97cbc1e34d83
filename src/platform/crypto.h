#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "base/error.h"

namespace gpuhost::platform {

// Cryptographic primitives from the OS's library: OpenSSL 3 (libcrypto) on Linux, CNG (BCrypt)
// on Windows. No primitive is implemented by hand; HKDF (RFC 5869) is composed here from HMAC.
// The free functions are thread-safe: each call uses its own library context.

using Sha256Digest = std::array<std::uint8_t, 32>;

// Streaming SHA-256. Move-only; not thread-safe.
class Sha256 {
 public:
  Sha256();
  Sha256(Sha256&& other) noexcept;
  Sha256& operator=(Sha256&& other) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  ~Sha256();

  void update(const void* data, std::size_t bytes);
  void update(std::string_view data) { update(data.data(), data.size()); }
  // The digest of everything so far; the object must not be updated afterwards.
  [[nodiscard]] Sha256Digest finish();

 private:
  void* m_state = nullptr;
};

[[nodiscard]] Sha256Digest sha256(std::string_view data);
[[nodiscard]] Sha256Digest hmac_sha256(std::string_view key, std::string_view data);

// MD5 (RFC 1321), one shot. NOT for security: MD5 is broken for collisions. It exists only to
// recompute the ETags S3-compatible servers derive from MD5 (a multipart object's ETag is the
// MD5 of its parts' binary MD5s), so the store can recognise an object it completed. The error
// is `unavailable` when the library refuses MD5 (an OpenSSL in FIPS mode).
using Md5Digest = std::array<std::uint8_t, 16>;
[[nodiscard]] Result<Md5Digest> md5(std::span<const std::uint8_t> data);
// Streaming MD5, for the same ETag purpose only. Move-only; not thread-safe.
class Md5 {
 public:
  [[nodiscard]] static Result<Md5> create();  // unavailable as md5() is
  Md5(Md5&& other) noexcept;
  Md5& operator=(Md5&& other) noexcept;
  Md5(const Md5&) = delete;
  Md5& operator=(const Md5&) = delete;
  ~Md5();

  void update(const void* data, std::size_t bytes);
  // The digest of everything so far; the object must not be updated afterwards.
  [[nodiscard]] Md5Digest finish();

 private:
  explicit Md5(void* state) : m_state(state) {}
  void* m_state = nullptr;
};
[[nodiscard]] std::string to_hex(std::span<const std::uint8_t> bytes);  // lowercase

using ByteView = std::span<const std::uint8_t>;
[[nodiscard]] inline ByteView byte_view(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

// "OpenSSL 3.0.19 27 Jan 2026" or "Windows CNG (bcrypt.dll)": for messages and benchmarks.
[[nodiscard]] std::string crypto_library();

// Fills `out` from the OS's cryptographically secure generator (RAND_bytes; BCryptGenRandom).
[[nodiscard]] Result<void> random_bytes(std::span<std::uint8_t> out);

// Overwrites secrets so they do not linger in freed memory (OPENSSL_cleanse; SecureZeroMemory).
void secure_zero(std::span<std::uint8_t> bytes);

// Compares in time independent of where the bytes differ (for tags and MACs).
[[nodiscard]] bool constant_time_equal(ByteView a, ByteView b);

// SHA-256 everywhere; SM3 (GB/T 32905) only with OpenSSL. Both digests are 32 bytes.
enum class HashAlgorithm { sha256, sm3 };
using Digest32 = std::array<std::uint8_t, 32>;
[[nodiscard]] const char* hash_name(HashAlgorithm algorithm);  // "sha256", "sm3"

// Whether this build can compute `algorithm`; the error says why not and what to do instead
// (unsupported: SM3 on Windows).
[[nodiscard]] Result<void> hash_available(HashAlgorithm algorithm);
[[nodiscard]] Result<Digest32> hash(HashAlgorithm algorithm, ByteView data);
// HMAC (RFC 2104) over the concatenation of `parts`.
[[nodiscard]] Result<Digest32> hmac(HashAlgorithm algorithm, ByteView key,
                                    std::initializer_list<ByteView> parts);
// HKDF extract-and-expand (RFC 5869) into `out` (at most 255 * 32 bytes). An empty salt means
// 32 zero bytes, as the RFC says.
[[nodiscard]] Result<void> hkdf(HashAlgorithm algorithm, ByteView input_key, ByteView salt, ByteView info,
                                std::span<std::uint8_t> out);

// Authenticated encryption with a 96-bit nonce and a 128-bit tag (NIST SP 800-38D GCM).
// AES-256-GCM everywhere (32-byte key); SM4-GCM (RFC 8998, 16-byte key) only where the OpenSSL
// build provides it: OpenSSL 3.0 does not (EVP_CIPHER_fetch("SM4-GCM") fails), later ones do.
enum class AeadAlgorithm { aes_256_gcm, sm4_gcm };
inline constexpr std::size_t k_aead_nonce_bytes = 12;
inline constexpr std::size_t k_aead_tag_bytes = 16;
[[nodiscard]] std::size_t aead_key_bytes(AeadAlgorithm algorithm);  // 32 or 16

// Whether this build can run `algorithm`: unavailable (an OpenSSL without SM4-GCM) or
// unsupported (SM4 on Windows), with a message naming the fix.
[[nodiscard]] Result<void> aead_available(AeadAlgorithm algorithm);

// Encrypts `plaintext` into `ciphertext` (same size; may be the same memory) and writes the tag.
// REQUIRES: key is aead_key_bytes long, nonce k_aead_nonce_bytes, tag k_aead_tag_bytes; a nonce
// is never used twice with one key.
[[nodiscard]] Result<void> aead_seal(AeadAlgorithm algorithm, ByteView key, ByteView nonce, ByteView aad,
                                     ByteView plaintext, std::span<std::uint8_t> ciphertext,
                                     std::span<std::uint8_t> tag);
// Decrypts and checks the tag. A mismatch (wrong key, changed bytes, other nonce or aad) is a
// parse_error reading "authentication failed"; `plaintext` is then zeroed, never half-valid.
[[nodiscard]] Result<void> aead_open(AeadAlgorithm algorithm, ByteView key, ByteView nonce, ByteView aad,
                                     ByteView ciphertext, ByteView tag, std::span<std::uint8_t> plaintext);

// SM4 (GB/T 32907) in counter mode (NIST SP 800-38A): `out` = `in` XOR SM4_key(counter),
// SM4_key(counter + 1), ..., the 16-byte counter block incremented as a big-endian integer.
// Only with OpenSSL; unsupported on Windows. No integrity: pair it with hmac(). `out` may be `in`.
[[nodiscard]] Result<void> sm4_available();
inline constexpr std::size_t k_sm4_key_bytes = 16;
[[nodiscard]] Result<void> sm4_ctr_xor(ByteView key, ByteView counter_block, ByteView in,
                                       std::span<std::uint8_t> out);

}  // namespace gpuhost::platform
