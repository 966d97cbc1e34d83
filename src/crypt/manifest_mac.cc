#include "crypt/manifest_mac.h"

#include <array>

#include "crypt/chunk_cipher.h"

namespace gpuhost::crypt {
namespace {

std::string prefix(CipherSuite suite) {
  return std::string("hmac-") + platform::hash_name(suite_hash(suite)) + ":";
}

}  // namespace

Result<std::string> manifest_mac(const EncryptionKey& key, CipherSuite suite,
                                 std::string_view canonical_bytes) {
  if (auto ok = suite_available(suite); !ok)
    return std::unexpected(with_context(ok.error(), "authenticating the manifest"));
  std::array<std::uint8_t, 32> mac_key{};
  auto derived = platform::hkdf(suite_hash(suite), key.bytes(), {},
                                platform::byte_view(kdf_label(suite, "manifest mac key")), mac_key);
  if (!derived) return std::unexpected(with_context(derived.error(), "authenticating the manifest"));
  auto mac = platform::hmac(suite_hash(suite), mac_key, {platform::byte_view(canonical_bytes)});
  platform::secure_zero(mac_key);
  if (!mac) return std::unexpected(with_context(mac.error(), "authenticating the manifest"));
  return prefix(suite) + platform::to_hex(*mac);
}

Result<void> verify_manifest_mac(const EncryptionKey& key, CipherSuite suite,
                                 std::string_view canonical_bytes, std::string_view mac) {
  std::string expected = GPUHOST_TRY(manifest_mac(key, suite, canonical_bytes));
  if (!mac.starts_with(prefix(suite)))
    return make_error(ErrorCode::parse_error, "manifest authentication failed: its MAC is not " +
                                                  prefix(suite) + "<hex> as suite " + suite_name(suite) +
                                                  " requires");
  if (!platform::constant_time_equal(platform::byte_view(expected), platform::byte_view(mac)))
    return make_error(ErrorCode::parse_error,
                      "manifest authentication failed: it was modified after it was written, or written with "
                      "another key (this key's id is " +
                          key.id() + ")");
  return {};
}

}  // namespace gpuhost::crypt
