#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "platform/crypto.h"

namespace gpuhost::crypt {

// How a file is encrypted: the `suite` byte of its header (doc/encryption.md). Values are
// stable: never renumber one.
enum class CipherSuite : std::uint8_t {
  aes_256_gcm = 1,       // AES-256-GCM; keys from HKDF-SHA256
  sm4_gcm = 2,           // SM4-GCM (RFC 8998); keys from HKDF-SM3
  sm4_ctr_hmac_sm3 = 3,  // SM4-CTR, then HMAC-SM3 over aad and ciphertext (encrypt-then-MAC); HKDF-SM3
};

// "aes-256-gcm", "sm4-gcm", "sm4-ctr-hmac-sm3": the names manifests and messages use.
[[nodiscard]] const char* suite_name(CipherSuite suite);
// The inverse of suite_name; parse_error naming the known names otherwise.
[[nodiscard]] Result<CipherSuite> parse_suite_name(std::string_view name);

// What `--encrypt NAME` means on this host. "aes-256-gcm"; "sm4": SM4-CTR with HMAC-SM3, the SM4
// suite every build can read (OpenSSL 3.0 on Linux, libgcrypt on Windows); or an exact suite
// name (`sm4-gcm` where this build's library has it). invalid_argument for an unknown name;
// unavailable, with the fix, for a suite this build cannot run (SM4-GCM on OpenSSL 3.0, SM4 on
// Windows without libgcrypt-20.dll).
[[nodiscard]] Result<CipherSuite> choose_suite(std::string_view encrypt_flag);

// Whether this build can encrypt and decrypt `suite`; the error says what to do instead.
[[nodiscard]] Result<void> suite_available(CipherSuite suite);

// The hash behind the suite's key derivation and MACs: SHA-256 for AES, SM3 for SM4.
[[nodiscard]] platform::HashAlgorithm suite_hash(CipherSuite suite);
// Bytes of each chunk's tag: 16 (GCM) or 32 (HMAC-SM3).
[[nodiscard]] std::size_t suite_tag_bytes(CipherSuite suite);

}  // namespace gpuhost::crypt
