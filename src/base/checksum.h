#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpuhost {

// CRC-32 (IEEE 802.3, the zip and PNG polynomial). `crc32_update(0, ...)` starts a new one; pass
// the previous result to continue over more bytes. Carry-less multiply folding (PCLMULQDQ) on
// x86-64 CPUs that have it, slicing-by-8 tables elsewhere and for the tail. Thread-safe.
[[nodiscard]] std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes);
[[nodiscard]] inline std::uint32_t crc32(std::string_view data) {
  return crc32_update(0, data.data(), data.size());
}

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the iSCSI checksum (RFC 3720 B.4), also
// the one TensorBoard's event-file record framing uses. Same calling convention as crc32_update.
// The SSE4.2 CRC32 instruction on x86-64 CPUs that have it, slicing-by-8 tables elsewhere.
// Thread-safe.
[[nodiscard]] std::uint32_t crc32c_update(std::uint32_t crc, const void* data, std::size_t bytes);
[[nodiscard]] inline std::uint32_t crc32c(std::string_view data) {
  return crc32c_update(0, data.data(), data.size());
}
// The table path alone, whatever the CPU has: what non-x86 hosts run; tests compare the two.
[[nodiscard]] std::uint32_t crc32c_update_portable(std::uint32_t crc, const void* data, std::size_t bytes);

// XXH3-128 of a stream of bytes (xxHash, Debian libxxhash-dev, header only). Not cryptographic:
// it detects corruption and change, not tampering. Move-only; not thread-safe.
class ContentHasher {
 public:
  ContentHasher();
  ContentHasher(ContentHasher&& other) noexcept;
  ContentHasher& operator=(ContentHasher&& other) noexcept;
  ContentHasher(const ContentHasher&) = delete;
  ContentHasher& operator=(const ContentHasher&) = delete;
  ~ContentHasher();

  void update(const void* data, std::size_t bytes);
  // "xxh3-128:<32 lowercase hex digits>". The hasher may be updated further afterwards.
  [[nodiscard]] std::string digest() const;

 private:
  void* m_state = nullptr;  // XXH3_state_t, kept opaque so xxhash.h stays in one .cc
};

}  // namespace gpuhost
