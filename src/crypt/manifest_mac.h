#pragma once

#include <string>
#include <string_view>

#include "base/error.h"
#include "crypt/cipher_suite.h"
#include "crypt/encryption_key.h"

namespace gpuhost::crypt {

// Authenticates a manifest (the mirror's list of encrypted objects with their sizes and hashes)
// so an edited manifest, or one written with another key or suite, is refused before anything is
// restored. The MAC covers `canonical_bytes` exactly as given: the caller serialises the
// manifest canonically (the suite name and key id inside it) and stores the MAC beside it.
// Replaying an older, genuine manifest is not detected here (doc/encryption.md, "Limits").

// "hmac-sha256:<64 hex>" for aes-256-gcm, "hmac-sm3:<64 hex>" for the SM4 suites; the key is
// HKDF(user key, info "gpuhost-encryption v1 <suite> manifest mac key").
[[nodiscard]] Result<std::string> manifest_mac(const EncryptionKey& key, CipherSuite suite,
                                               std::string_view canonical_bytes);

// parse_error "manifest authentication failed: ..." when `mac` does not match.
[[nodiscard]] Result<void> verify_manifest_mac(const EncryptionKey& key, CipherSuite suite,
                                               std::string_view canonical_bytes, std::string_view mac);

}  // namespace gpuhost::crypt
