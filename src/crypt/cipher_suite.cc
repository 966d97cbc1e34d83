#include "crypt/cipher_suite.h"

#include <string>

namespace gpuhost::crypt {

const char* suite_name(CipherSuite suite) {
  switch (suite) {
    case CipherSuite::aes_256_gcm: return "aes-256-gcm";
    case CipherSuite::sm4_gcm: return "sm4-gcm";
    case CipherSuite::sm4_ctr_hmac_sm3: return "sm4-ctr-hmac-sm3";
  }
  return "unknown";
}

Result<CipherSuite> parse_suite_name(std::string_view name) {
  for (CipherSuite suite : {CipherSuite::aes_256_gcm, CipherSuite::sm4_gcm, CipherSuite::sm4_ctr_hmac_sm3})
    if (name == suite_name(suite)) return suite;
  return make_error(ErrorCode::parse_error, "cipher suite \"" + std::string(name) +
                                                "\": unknown; known: aes-256-gcm, sm4-gcm, sm4-ctr-hmac-sm3");
}

Result<void> suite_available(CipherSuite suite) {
  Result<void> available;
  switch (suite) {
    case CipherSuite::aes_256_gcm:
      available = platform::aead_available(platform::AeadAlgorithm::aes_256_gcm);
      break;
    case CipherSuite::sm4_gcm:
      available = platform::aead_available(platform::AeadAlgorithm::sm4_gcm);
      if (available) available = platform::hash_available(platform::HashAlgorithm::sm3);
      break;
    case CipherSuite::sm4_ctr_hmac_sm3: available = platform::sm4_available(); break;
  }
  if (available) return {};
  return std::unexpected(with_context(available.error(), suite_name(suite)));
}

Result<CipherSuite> choose_suite(std::string_view encrypt_flag) {
  CipherSuite suite = CipherSuite::aes_256_gcm;
  if (encrypt_flag == "sm4") {
    // The SM4 suite every build reads: a checkpoint written here must restore on any host, and
    // SM4-GCM depends on the library (libgcrypt has it; Debian 12's OpenSSL 3.0 does not).
    suite = CipherSuite::sm4_ctr_hmac_sm3;
  } else if (auto named = parse_suite_name(encrypt_flag)) {
    suite = *named;
  } else {
    return make_error(ErrorCode::invalid_argument,
                      "--encrypt " + std::string(encrypt_flag) +
                          ": unknown cipher; use aes-256-gcm or sm4 (or sm4-gcm, sm4-ctr-hmac-sm3)");
  }
  if (auto available = suite_available(suite); !available)
    return std::unexpected(with_context(available.error(), "--encrypt " + std::string(encrypt_flag)));
  return suite;
}

platform::HashAlgorithm suite_hash(CipherSuite suite) {
  return suite == CipherSuite::aes_256_gcm ? platform::HashAlgorithm::sha256 : platform::HashAlgorithm::sm3;
}

std::size_t suite_tag_bytes(CipherSuite suite) {
  return suite == CipherSuite::sm4_ctr_hmac_sm3 ? std::tuple_size_v<platform::Digest32>
                                                : platform::k_aead_tag_bytes;
}

}  // namespace gpuhost::crypt
