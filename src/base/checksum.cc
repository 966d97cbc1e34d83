// The only file that includes xxhash.h (Debian libxxhash-dev), header-only: XXH_INLINE_ALL makes
// every function static inline here, so nothing is linked and no symbol leaks out.
#include "base/checksum.h"

#include <array>
#include <cstring>
#include <new>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GPUHOST_CRC32_CLMUL 1
#endif

namespace gpuhost {
namespace {

// Reflected CRC-32 polynomial 0xEDB88320 (IEEE 802.3; PKWARE APPNOTE.TXT 4.4.7 for zip) and
// CRC-32C's 0x82F63B78 (Castagnoli; RFC 3720 B.4).
// Slicing-by-8 (Kounavis and Berry, "Novel Table Lookup-Based Algorithms for High-Performance
// CRC Generation", IEEE Trans. Computers 2008): table k maps a byte to its CRC contribution
// k bytes further on, so eight bytes are folded per step.
using CrcTables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr CrcTables make_crc_tables(std::uint32_t reflected_polynomial) {
  CrcTables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ reflected_polynomial : c >> 1;
    t[0][i] = c;
  }
  for (std::size_t k = 1; k < 8; ++k)
    for (std::size_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFu];
  return t;
}

constexpr CrcTables k_crc_tables = make_crc_tables(0xEDB88320u);
static_assert(k_crc_tables[0][1] == 0x77073096u, "CRC-32 table entry 1 (zlib crc32.c table)");
constexpr CrcTables k_crc32c_tables = make_crc_tables(0x82F63B78u);
static_assert(k_crc32c_tables[0][1] == 0xF26B8303u, "CRC-32C table entry 1 (RFC 4960 appendix C, crc_c[1])");

std::uint32_t load_le32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

XXH3_state_t* state_of(void* p) {
  return static_cast<XXH3_state_t*>(p);
}

#ifdef GPUHOST_CRC32_CLMUL
// Folding with carry-less multiplication: Gopal, Ozturk et al., "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ Instruction" (Intel, 2009), in the bit-reflected domain; the
// constants (x^k mod P for the fold distances, and the Barrett constants) are the paper's for
// the IEEE polynomial, as Chromium's zlib (crc32_simd.c) uses them. Four 128-bit lanes fold 64
// bytes per step, then fold into one lane, reduce 128 -> 64 -> 32 bits.
// REQUIRES: bytes >= 64 and a multiple of 16. `c` and the result are the raw (inverted) register.
#define GPUHOST_CLMUL __attribute__((target("pclmul,sse2")))

GPUHOST_CLMUL __m128i load16(const unsigned char* at) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
}

// lane * x^(fold distance) + next, with the distance's two constants in k.
GPUHOST_CLMUL __m128i fold16(__m128i lane, __m128i next, __m128i k) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(lane, k, 0x00), _mm_clmulepi64_si128(lane, k, 0x11)), next);
}

GPUHOST_CLMUL std::uint32_t crc32_fold(std::uint32_t c, const unsigned char* p, std::size_t bytes) {
  const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
  const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
  const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);
  const __m128i barrett = _mm_set_epi64x(0x01f7011641, 0x01db710641);
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);

  __m128i x1 = _mm_xor_si128(load16(p), _mm_cvtsi32_si128(static_cast<int>(c)));
  __m128i x2 = load16(p + 16), x3 = load16(p + 32), x4 = load16(p + 48);
  p += 64;
  bytes -= 64;
  for (; bytes >= 64; p += 64, bytes -= 64) {
    x1 = fold16(x1, load16(p), k1k2);
    x2 = fold16(x2, load16(p + 16), k1k2);
    x3 = fold16(x3, load16(p + 32), k1k2);
    x4 = fold16(x4, load16(p + 48), k1k2);
  }
  x1 = fold16(x1, x2, k3k4);
  x1 = fold16(x1, x3, k3k4);
  x1 = fold16(x1, x4, k3k4);
  for (; bytes >= 16; p += 16, bytes -= 16) x1 = fold16(x1, load16(p), k3k4);

  // 128 -> 64 bits, then 64 -> 32 bits.
  __m128i t = _mm_clmulepi64_si128(x1, k3k4, 0x10);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
  t = _mm_srli_si128(x1, 4);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00), t);
  // Barrett reduction to 32 bits.
  t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), barrett, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), barrett, 0x00);
  x1 = _mm_xor_si128(x1, t);
  return static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm_srli_si128(x1, 4)));
}
#undef GPUHOST_CLMUL

bool cpu_has_clmul() {
  static const bool has = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
  return has;
}
#endif

// The table-driven CRC over `bytes` bytes; `c` and the result are the raw (inverted) register.
std::uint32_t slice_by_8(const CrcTables& t, std::uint32_t c, const unsigned char* p, std::size_t bytes) {
  while (bytes >= 8) {
    std::uint32_t lo = load_le32(p) ^ c;
    std::uint32_t hi = load_le32(p + 4);
    c = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFFu] ^ t[2][(hi >> 8) & 0xFFu] ^ t[1][(hi >> 16) & 0xFFu] ^ t[0][hi >> 24];
    p += 8;
    bytes -= 8;
  }
  while (bytes-- > 0) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFFu];
  return c;
}

#ifdef GPUHOST_CRC32_CLMUL
// SSE4.2's CRC32 instruction computes CRC-32C (Intel SDM vol. 2A, "CRC32 — Accumulate CRC32
// Value": polynomial 11EDC6F41H) on the raw register, eight bytes at a time. One dependency
// chain runs at about 8 bytes per 3 cycles, well past what the event files need.
__attribute__((target("sse4.2"))) std::uint32_t crc32c_sse42(std::uint32_t c, const unsigned char* p,
                                                             std::size_t bytes) {
  std::uint64_t c64 = c;
  for (; bytes >= 8; p += 8, bytes -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c64 = _mm_crc32_u64(c64, word);
  }
  c = static_cast<std::uint32_t>(c64);
  for (; bytes > 0; --bytes) c = _mm_crc32_u8(c, *p++);
  return c;
}

bool cpu_has_sse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
#ifdef GPUHOST_CRC32_CLMUL
  if (bytes >= 64 && cpu_has_clmul()) {
    const std::size_t folded = bytes & ~std::size_t{15};
    c = crc32_fold(c, p, folded);
    p += folded;
    bytes -= folded;
  }
#endif
  return ~slice_by_8(k_crc_tables, c, p, bytes);
}

std::uint32_t crc32c_update(std::uint32_t crc, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
#ifdef GPUHOST_CRC32_CLMUL
  if (cpu_has_sse42()) return ~crc32c_sse42(~crc, p, bytes);
#endif
  return crc32c_update_portable(crc, p, bytes);
}

std::uint32_t crc32c_update_portable(std::uint32_t crc, const void* data, std::size_t bytes) {
  return ~slice_by_8(k_crc32c_tables, ~crc, static_cast<const unsigned char*>(data), bytes);
}

ContentHasher::ContentHasher() : m_state(XXH3_createState()) {
  if (m_state == nullptr) throw std::bad_alloc();
  XXH3_128bits_reset(state_of(m_state));
}

ContentHasher::ContentHasher(ContentHasher&& other) noexcept
    : m_state(std::exchange(other.m_state, nullptr)) {}

ContentHasher& ContentHasher::operator=(ContentHasher&& other) noexcept {
  if (this != &other) {
    XXH3_freeState(state_of(m_state));
    m_state = std::exchange(other.m_state, nullptr);
  }
  return *this;
}

ContentHasher::~ContentHasher() {
  XXH3_freeState(state_of(m_state));
}

void ContentHasher::update(const void* data, std::size_t bytes) {
  if (bytes > 0) XXH3_128bits_update(state_of(m_state), data, bytes);
}

std::string ContentHasher::digest() const {
  // The canonical form (big-endian, high half first) is what `xxhsum -H2` prints.
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(state_of(m_state)));
  static constexpr char k_hex[] = "0123456789abcdef";
  std::string out = "xxh3-128:";
  for (unsigned char byte : canonical.digest) {
    out.push_back(k_hex[byte >> 4]);
    out.push_back(k_hex[byte & 0xFu]);
  }
  return out;
}

}  // namespace gpuhost
