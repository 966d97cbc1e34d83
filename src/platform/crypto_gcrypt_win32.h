#pragma once
// SM3, SM4-CTR and SM4-GCM for the Windows build, from libgcrypt (GnuPG's LGPL library; Debian's
// libgcrypt-mingw-w64-dev). CNG has none of them. libgcrypt-20.dll and libgpg-error-0.dll are
// loaded at first use from gpuhost.exe's own directory (never the current one), so gpuhost.exe
// runs without them and only the SM suites become `unavailable`, with a message naming the
// missing file. Dynamic loading also keeps the LGPL's relinking freedom: users may replace the DLL.
// Internal to platform/: crypto_win32.cc implements crypto.h with these.

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "base/error.h"
#include "platform/crypto.h"

namespace gpuhost::platform::gcrypt {

// The DLL gpuhost.exe loads; packages ship it (with libgpg-error-0.dll) beside gpuhost.exe.
inline constexpr const char* k_library_file = "libgcrypt-20.dll";

// Whether libgcrypt loaded and is new enough (1.9, the first with SM4); the error is
// `unavailable` and names `what`, the missing or refused file, and the fix.
[[nodiscard]] Result<void> available(std::string_view what);
// "libgcrypt 1.10.1", or "" when it did not load.
[[nodiscard]] std::string version();

[[nodiscard]] Result<Digest32> sm3(ByteView data);
[[nodiscard]] Result<Digest32> hmac_sm3(ByteView key, std::initializer_list<ByteView> parts);
// SM4-CTR with a 128-bit big-endian counter, as OpenSSL's SM4-CTR: the key stream of
// crypto.h's sm4_ctr_xor. Sizes are checked by the caller.
[[nodiscard]] Result<void> sm4_ctr_xor(ByteView key, ByteView counter_block, ByteView in,
                                       std::span<std::uint8_t> out);
// SM4-GCM (RFC 8998) with a 96-bit nonce and a 128-bit tag; open() zeroes `plaintext` and says
// "authentication failed" when the tag does not match.
[[nodiscard]] Result<void> sm4_gcm_seal(ByteView key, ByteView nonce, ByteView aad, ByteView plaintext,
                                        std::span<std::uint8_t> ciphertext, std::span<std::uint8_t> tag);
[[nodiscard]] Result<void> sm4_gcm_open(ByteView key, ByteView nonce, ByteView aad, ByteView ciphertext,
                                        ByteView tag, std::span<std::uint8_t> plaintext);

}  // namespace gpuhost::platform::gcrypt
