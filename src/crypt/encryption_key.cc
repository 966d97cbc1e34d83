#include "crypt/encryption_key.h"

#include <algorithm>
#include <utility>

#include "platform/environment.h"
#include "platform/files.h"

namespace gpuhost::crypt {
namespace {

constexpr std::string_view k_key_id_label = "gpuhost-encryption v1 key id";
constexpr std::string_view k_how_to_make_one =
    "make one with `openssl rand -hex 32 > key` and keep it private";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim(std::string_view text) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return text;
}

bool all_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return hex_value(c) >= 0; });
}

}  // namespace

Result<EncryptionKey> EncryptionKey::from_bytes(platform::ByteView raw) {
  if (raw.size() != k_bytes)
    return make_error(ErrorCode::invalid_argument, "encryption key: " + std::to_string(raw.size()) +
                                                       " bytes; a key is 32 bytes (256 bits)");
  if (std::all_of(raw.begin(), raw.end(), [&](std::uint8_t b) { return b == raw[0]; }))
    return make_error(ErrorCode::invalid_argument,
                      "encryption key: all 32 bytes are the same, a placeholder rather than a key; " +
                          std::string(k_how_to_make_one));
  EncryptionKey key;
  std::copy(raw.begin(), raw.end(), key.m_bytes.begin());
  auto id =
      platform::hmac(platform::HashAlgorithm::sha256, key.m_bytes, {platform::byte_view(k_key_id_label)});
  if (!id) return std::unexpected(with_context(id.error(), "encryption key id"));
  std::copy_n(id->begin(), key.m_id_bytes.size(), key.m_id_bytes.begin());
  key.m_id = platform::to_hex(key.m_id_bytes);
  return key;
}

Result<EncryptionKey> EncryptionKey::from_hex(std::string_view text, std::string_view origin) {
  std::string_view digits = trim(text);
  if (digits.size() != 2 * k_bytes || !all_hex(digits))
    return make_error(ErrorCode::invalid_argument, "reading the encryption key from " + std::string(origin) +
                                                       ": expected 64 hex digits, found " +
                                                       std::to_string(digits.size()) +
                                                       (all_hex(digits) ? " hex digits" : " characters") +
                                                       "; " + std::string(k_how_to_make_one));
  std::array<std::uint8_t, k_bytes> raw{};
  for (std::size_t i = 0; i < k_bytes; ++i)
    raw[i] = static_cast<std::uint8_t>(hex_value(digits[2 * i]) * 16 + hex_value(digits[2 * i + 1]));
  auto key = from_bytes(raw);
  platform::secure_zero(raw);
  if (!key)
    return std::unexpected(
        with_context(key.error(), "reading the encryption key from " + std::string(origin)));
  return key;
}

EncryptionKey::EncryptionKey(EncryptionKey&& other) noexcept
    : m_bytes(other.m_bytes), m_id_bytes(other.m_id_bytes), m_id(std::move(other.m_id)) {
  platform::secure_zero(other.m_bytes);
}

EncryptionKey& EncryptionKey::operator=(EncryptionKey&& other) noexcept {
  if (this != &other) {
    m_bytes = other.m_bytes;
    m_id_bytes = other.m_id_bytes;
    m_id = std::move(other.m_id);
    platform::secure_zero(other.m_bytes);
  }
  return *this;
}

EncryptionKey::~EncryptionKey() {
  platform::secure_zero(m_bytes);
}

Result<EncryptionKey> read_key_file(const std::filesystem::path& path) {
  std::string origin = "key file " + path.string();
  auto contents = platform::read_file(path, 4096);
  if (!contents)
    return std::unexpected(with_context(contents.error(), "reading the encryption key from " + origin));
  std::string text = std::move(*contents);
  Result<EncryptionKey> key = std::unexpected(Error{});
  // Raw bytes that happen to be all hex digits would be a 128-bit hex key: refuse rather than guess.
  if (text.size() == EncryptionKey::k_bytes && !all_hex(text)) {
    key = EncryptionKey::from_bytes(platform::byte_view(text));
    if (!key) key = std::unexpected(with_context(key.error(), "reading the encryption key from " + origin));
  } else {
    key = EncryptionKey::from_hex(text, origin);
    if (!key && trim(text).size() != 2 * EncryptionKey::k_bytes)
      key = make_error(
          ErrorCode::invalid_argument,
          "reading the encryption key from " + origin + ": it holds " + std::to_string(text.size()) +
              " bytes; a key file holds 32 raw bytes or 64 hex digits; " + std::string(k_how_to_make_one));
  }
  platform::secure_zero(std::span(reinterpret_cast<std::uint8_t*>(text.data()), text.size()));
  return key;
}

Result<EncryptionKey> load_encryption_key(const std::optional<std::filesystem::path>& key_file) {
  if (key_file) return read_key_file(*key_file);
  auto file = platform::get_env(k_key_file_env);
  auto hex = platform::get_env(k_key_env);
  if (file && !file->empty() && hex && !hex->empty())
    return make_error(ErrorCode::invalid_argument,
                      "reading the encryption key: both " + std::string(k_key_file_env) + " and " +
                          std::string(k_key_env) + " are set; unset one of them");
  if (file && !file->empty()) return read_key_file(*file);
  if (hex && !hex->empty()) {
    auto key = EncryptionKey::from_hex(*hex, k_key_env);
    platform::secure_zero(std::span(reinterpret_cast<std::uint8_t*>(hex->data()), hex->size()));
    return key;
  }
  return make_error(ErrorCode::not_found, "reading the encryption key: neither " +
                                              std::string(k_key_file_env) + " nor " + std::string(k_key_env) +
                                              " is set; " + std::string(k_how_to_make_one) + " and set " +
                                              std::string(k_key_file_env) + " to its path");
}

}  // namespace gpuhost::crypt
