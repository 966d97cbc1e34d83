#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "platform/crypto.h"

namespace gpuhost::crypt {

// Where load_encryption_key looks when no key file is given. Never the command line: Linux shows
// every process's arguments to every local user (/proc/<pid>/cmdline is 0444; research/05 §5.3).
inline constexpr std::string_view k_key_file_env = "GPUHOST_ENCRYPTION_KEY_FILE";
inline constexpr std::string_view k_key_env = "GPUHOST_ENCRYPTION_KEY";

// The user's 256-bit key. It is never shown: there is no way to print it, messages about it
// name only its origin and id(), and its bytes are zeroed on destruction. Move-only;
// thread-safe for concurrent reads.
class EncryptionKey {
 public:
  static constexpr std::size_t k_bytes = 32;

  // Exactly 32 bytes, not all the same (a placeholder such as all zeros is refused).
  [[nodiscard]] static Result<EncryptionKey> from_bytes(platform::ByteView raw);
  // 64 hex digits, surrounding whitespace ignored. `origin` names the source for messages
  // ("GPUHOST_ENCRYPTION_KEY"); the text itself never appears in one.
  [[nodiscard]] static Result<EncryptionKey> from_hex(std::string_view text, std::string_view origin);

  EncryptionKey(EncryptionKey&& other) noexcept;
  EncryptionKey& operator=(EncryptionKey&& other) noexcept;
  EncryptionKey(const EncryptionKey&) = delete;
  EncryptionKey& operator=(const EncryptionKey&) = delete;
  ~EncryptionKey();

  [[nodiscard]] platform::ByteView bytes() const { return m_bytes; }
  // 16 hex digits naming the key without revealing it: the first 8 bytes of
  // HMAC-SHA256(key, "gpuhost-encryption v1 key id"). Stored in every file header, so a wrong
  // key is reported as such.
  [[nodiscard]] const std::string& id() const { return m_id; }
  [[nodiscard]] const std::array<std::uint8_t, 8>& id_bytes() const { return m_id_bytes; }

 private:
  EncryptionKey() = default;
  std::array<std::uint8_t, k_bytes> m_bytes{};
  std::array<std::uint8_t, 8> m_id_bytes{};
  std::string m_id;
};

// A key file holds 32 raw bytes (`openssl rand 32 > key`) or 64 hex digits and an optional
// newline (`openssl rand -hex 32 > key`). 32 hex digits (a 128-bit key) are refused.
[[nodiscard]] Result<EncryptionKey> read_key_file(const std::filesystem::path& path);

// The key from `key_file` when given (a --key-file flag), else the file named by
// GPUHOST_ENCRYPTION_KEY_FILE, else the 64 hex digits in GPUHOST_ENCRYPTION_KEY. Both variables
// set is an error (which one was meant?); neither is not_found, with how to make a key.
[[nodiscard]] Result<EncryptionKey> load_encryption_key(
    const std::optional<std::filesystem::path>& key_file = std::nullopt);

}  // namespace gpuhost::crypt
