#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/error.h"
#include "crypt/cipher_suite.h"
#include "crypt/encryption_key.h"
#include "platform/crypto.h"

namespace gpuhost::crypt {

// The encrypted file format (doc/encryption.md): a 96-byte authenticated header, then the
// plaintext in fixed-size chunks, each framed as index | ciphertext | tag with its own nonce and
// a tag that binds the file id, the chunk's index and whether it is the last. Any change,
// truncation, extension, reordering or a wrong key is refused before a chunk's plaintext is
// released; decrypt_file releases nothing until every chunk has been checked.

inline constexpr std::size_t k_header_bytes = 96;
inline constexpr std::size_t k_chunk_index_bytes = 8;
inline constexpr std::uint32_t k_default_chunk_bytes = 4u << 20;
inline constexpr std::uint32_t k_min_chunk_bytes = 16;
inline constexpr std::uint32_t k_max_chunk_bytes = 64u << 20;
// Chunks in flight are threads x chunk size in memory, so threads are capped.
inline constexpr unsigned k_max_threads = 64;

struct EncryptOptions {
  CipherSuite suite = CipherSuite::aes_256_gcm;
  std::uint32_t chunk_bytes = k_default_chunk_bytes;  // plaintext bytes per chunk, the last may be shorter
  unsigned threads = 0;                               // 0: std::thread::hardware_concurrency()
};

struct DecryptOptions {
  unsigned threads = 0;  // 0: std::thread::hardware_concurrency()
  // The encrypted input's size when known (a file's): checked against the header before any
  // chunk is decrypted, so truncation is reported without decrypting the rest first.
  std::optional<std::uint64_t> input_bytes;
};

// What a header says.
struct EncryptedFileInfo {
  CipherSuite suite = CipherSuite::aes_256_gcm;
  std::uint32_t chunk_bytes = 0;
  std::uint64_t plaintext_bytes = 0;
  std::uint64_t chunk_count = 0;      // at least 1: an empty file has one empty final chunk
  std::uint64_t encrypted_bytes = 0;  // header and chunk frames: the encrypted file's exact size
  std::string key_id;                 // EncryptionKey::id() of the key it was encrypted with
  std::string file_id;                // 32 hex digits, random per file
};

// Reads a header without a key: for listing and for naming the key a file needs. Nothing in it is
// authenticated yet. parse_error when `header` (at least k_header_bytes) is not one.
[[nodiscard]] Result<EncryptedFileInfo> inspect_header(platform::ByteView header);

// Fills the buffer and returns how many bytes it wrote; fewer than the buffer's size only at the
// end of the input.
using ByteSource = std::function<Result<std::size_t>(std::span<std::uint8_t> buffer)>;
using ByteSink = std::function<Result<void>(platform::ByteView bytes)>;

// Encrypts exactly `plaintext_bytes` from `source` into `sink`; an input that ends early or runs
// longer is an error (it changed while being read). Chunks are encrypted on options.threads
// threads; source and sink are called from the calling thread only.
[[nodiscard]] Result<EncryptedFileInfo> encrypt_stream(const EncryptionKey& key,
                                                       const EncryptOptions& options,
                                                       std::uint64_t plaintext_bytes,
                                                       const ByteSource& source, const ByteSink& sink);
// Checks and decrypts into `sink`, chunk by chunk, in order. Only authenticated plaintext reaches
// the sink, but on error it may have received the chunks before the bad one: callers that hand
// the output to a trainer must discard it (decrypt_file does). Errors: invalid_argument for a
// wrong key, parse_error for a changed, truncated, extended or reordered input,
// unsupported/unavailable for a suite this build lacks.
[[nodiscard]] Result<EncryptedFileInfo> decrypt_stream(const EncryptionKey& key,
                                                       const DecryptOptions& options,
                                                       const ByteSource& source, const ByteSink& sink);

// File to file. The output appears, fsynced, under its name only when everything succeeded
// (temp file beside it, then rename); on error it is untouched and no temp file is left.
[[nodiscard]] Result<EncryptedFileInfo> encrypt_file(const EncryptionKey& key, const EncryptOptions& options,
                                                     const std::filesystem::path& plaintext,
                                                     const std::filesystem::path& encrypted);
[[nodiscard]] Result<EncryptedFileInfo> decrypt_file(const EncryptionKey& key, const DecryptOptions& options,
                                                     const std::filesystem::path& encrypted,
                                                     const std::filesystem::path& plaintext);

// In memory, for small objects (manifests) and tests.
[[nodiscard]] Result<std::string> encrypt_bytes(const EncryptionKey& key, const EncryptOptions& options,
                                                std::string_view plaintext);
[[nodiscard]] Result<std::string> decrypt_bytes(const EncryptionKey& key, const DecryptOptions& options,
                                                std::string_view encrypted);

}  // namespace gpuhost::crypt
