// The OS-neutral parts of crypto.h: hex, constant-time comparison, the one-shot SHA-256 helpers
// and HKDF, all built on the per-OS primitives in crypto_posix.cc / crypto_win32.cc.
#include "platform/crypto.h"

#include <algorithm>
#include <stdexcept>

namespace gpuhost::platform {

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::uint8_t b : bytes) {
    out.push_back(k_digits[b >> 4]);
    out.push_back(k_digits[b & 0x0f]);
  }
  return out;
}

bool constant_time_equal(ByteView a, ByteView b) {
  if (a.size() != b.size()) return false;
  // volatile keeps the compiler from stopping at the first difference.
  volatile std::uint8_t diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = static_cast<std::uint8_t>(diff | (a[i] ^ b[i]));
  return diff == 0;
}

const char* hash_name(HashAlgorithm algorithm) {
  return algorithm == HashAlgorithm::sm3 ? "sm3" : "sha256";
}

Sha256Digest sha256(std::string_view data) {
  Sha256 hasher;
  hasher.update(data);
  return hasher.finish();
}

Sha256Digest hmac_sha256(std::string_view key, std::string_view data) {
  auto mac = hmac(HashAlgorithm::sha256, byte_view(key), {byte_view(data)});
  // SHA-256 is in every build; failing here means the library is broken or out of memory.
  if (!mac) throw std::runtime_error("HMAC-SHA256: " + mac.error().message);
  return *mac;
}

// RFC 5869 §2.2-2.3: PRK = HMAC(salt, IKM); T(i) = HMAC(PRK, T(i-1) | info | i); OKM = T(1) | T(2)...
Result<void> hkdf(HashAlgorithm algorithm, ByteView input_key, ByteView salt, ByteView info,
                  std::span<std::uint8_t> out) {
  constexpr std::size_t k_hash_bytes = std::tuple_size_v<Digest32>;
  if (out.size() > 255 * k_hash_bytes)
    return make_error(ErrorCode::invalid_argument, "HKDF: at most 255 * 32 output bytes (RFC 5869)");
  static constexpr Digest32 k_zero_salt{};
  Digest32 prk = GPUHOST_TRY(hmac(algorithm, salt.empty() ? ByteView(k_zero_salt) : salt, {input_key}));
  Digest32 block{};
  std::size_t done = 0;
  for (std::uint8_t counter = 1; done < out.size(); ++counter) {
    ByteView previous = counter == 1 ? ByteView() : ByteView(block);
    auto next = hmac(algorithm, prk, {previous, info, ByteView(&counter, 1)});
    if (!next) {
      secure_zero(prk);
      return std::unexpected(next.error());
    }
    block = *next;
    std::size_t n = std::min(block.size(), out.size() - done);
    std::copy_n(block.begin(), n, out.begin() + static_cast<std::ptrdiff_t>(done));
    done += n;
  }
  secure_zero(prk);
  secure_zero(block);
  return {};
}

}  // namespace gpuhost::platform
