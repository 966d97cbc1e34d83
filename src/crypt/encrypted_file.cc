#include "crypt/encrypted_file.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <system_error>
#include <thread>
#include <vector>

#include "crypt/chunk_cipher.h"
#include "platform/files.h"

namespace gpuhost::crypt {
namespace {

constexpr std::array<std::uint8_t, 8> k_magic = {'G', 'P', 'U', 'H', 'E', 'N', 'C', 0};
constexpr std::uint8_t k_version = 1;
constexpr std::size_t k_header_mac_offset = 64;

void put_le(std::uint8_t* out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(value >> (8 * i));
}

std::uint64_t get_le(const std::uint8_t* in, int bytes) {
  std::uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | in[i];
  return value;
}

std::string size_text(std::uint64_t bytes) {
  return std::to_string(bytes) + " bytes";
}

// Header fields (doc/encryption.md, "Header"); the MAC over them follows at byte 64.
struct Header {
  CipherSuite suite = CipherSuite::aes_256_gcm;
  std::uint32_t chunk_bytes = 0;
  std::uint64_t plaintext_bytes = 0;
  std::array<std::uint8_t, 8> key_id{};
  FileId file_id{};
  NonceBase nonce_base{};
};

std::array<std::uint8_t, k_header_bytes> encode_fields(const Header& h) {
  std::array<std::uint8_t, k_header_bytes> out{};
  std::copy(k_magic.begin(), k_magic.end(), out.begin());
  out[8] = k_version;
  out[9] = static_cast<std::uint8_t>(h.suite);
  put_le(out.data() + 12, h.chunk_bytes, 4);
  put_le(out.data() + 16, h.plaintext_bytes, 8);
  std::copy(h.key_id.begin(), h.key_id.end(), out.begin() + 24);
  std::copy(h.file_id.begin(), h.file_id.end(), out.begin() + 32);
  std::copy(h.nonce_base.begin(), h.nonce_base.end(), out.begin() + 48);
  return out;
}

Result<Header> parse_fields(platform::ByteView bytes) {
  if (bytes.size() < k_header_bytes)
    return make_error(ErrorCode::parse_error, "not an encrypted gpuhost file: " + size_text(bytes.size()) +
                                                  ", shorter than the 96-byte header");
  if (!std::equal(k_magic.begin(), k_magic.end(), bytes.begin()))
    return make_error(ErrorCode::parse_error,
                      "not an encrypted gpuhost file: it does not start with \"GPUHENC\"");
  if (bytes[8] != k_version)
    return make_error(ErrorCode::parse_error, "format version " + std::to_string(bytes[8]) +
                                                  ": this gpuhost reads version 1; use a newer gpuhost");
  Header h;
  std::uint8_t suite = bytes[9];
  if (suite < 1 || suite > 3)
    return make_error(ErrorCode::parse_error, "unknown cipher suite number " + std::to_string(suite) +
                                                  " (written by a newer gpuhost?)");
  h.suite = static_cast<CipherSuite>(suite);
  if (bytes[10] != 0 || bytes[11] != 0 || get_le(bytes.data() + 60, 4) != 0)
    return make_error(ErrorCode::parse_error, "reserved header bytes are not zero: the header was modified");
  h.chunk_bytes = static_cast<std::uint32_t>(get_le(bytes.data() + 12, 4));
  if (h.chunk_bytes < k_min_chunk_bytes || h.chunk_bytes > k_max_chunk_bytes)
    return make_error(ErrorCode::parse_error, "chunk size " + size_text(h.chunk_bytes) +
                                                  " is outside 16 bytes..64 MiB: the header was modified");
  h.plaintext_bytes = get_le(bytes.data() + 16, 8);
  // Bounds the arithmetic below; no real file comes near 2^62 bytes.
  if (h.plaintext_bytes > (std::uint64_t{1} << 62))
    return make_error(ErrorCode::parse_error, "plaintext size " + size_text(h.plaintext_bytes) +
                                                  " is impossible: the header was modified");
  std::copy_n(bytes.begin() + 24, 8, h.key_id.begin());
  std::copy_n(bytes.begin() + 32, h.file_id.size(), h.file_id.begin());
  std::copy_n(bytes.begin() + 48, h.nonce_base.size(), h.nonce_base.begin());
  return h;
}

// Where each chunk lies. Every chunk holds chunk_bytes of plaintext except the last, which holds
// the rest: 1..chunk_bytes bytes, or 0 for an empty file (one empty final chunk).
struct Layout {
  std::uint64_t chunk_count = 1;
  std::uint64_t chunk_bytes = 0;
  std::uint64_t last_chunk_bytes = 0;
  std::uint64_t tag_bytes = 0;
  std::uint64_t encrypted_bytes = 0;

  explicit Layout(const Header& h) : chunk_bytes(h.chunk_bytes), tag_bytes(suite_tag_bytes(h.suite)) {
    chunk_count = h.plaintext_bytes == 0 ? 1 : (h.plaintext_bytes + chunk_bytes - 1) / chunk_bytes;
    last_chunk_bytes = h.plaintext_bytes - (chunk_count - 1) * chunk_bytes;
    encrypted_bytes = k_header_bytes + chunk_count * (k_chunk_index_bytes + tag_bytes) + h.plaintext_bytes;
  }
  [[nodiscard]] std::uint64_t data_bytes(std::uint64_t index) const {
    return index + 1 == chunk_count ? last_chunk_bytes : chunk_bytes;
  }
  [[nodiscard]] std::uint64_t frame_bytes(std::uint64_t index) const {
    return k_chunk_index_bytes + data_bytes(index) + tag_bytes;
  }
  [[nodiscard]] std::uint64_t full_frame_bytes() const {
    return k_chunk_index_bytes + chunk_bytes + tag_bytes;
  }
  [[nodiscard]] FinalChunk final(std::uint64_t index) const {
    return index + 1 == chunk_count ? FinalChunk::yes : FinalChunk::no;
  }
};

EncryptedFileInfo info_of(const Header& h) {
  Layout layout(h);
  EncryptedFileInfo info;
  info.suite = h.suite;
  info.chunk_bytes = h.chunk_bytes;
  info.plaintext_bytes = h.plaintext_bytes;
  info.chunk_count = layout.chunk_count;
  info.encrypted_bytes = layout.encrypted_bytes;
  info.key_id = platform::to_hex(h.key_id);
  info.file_id = platform::to_hex(h.file_id);
  return info;
}

unsigned worker_count(unsigned requested, std::uint64_t chunks) {
  unsigned threads = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, k_max_threads);
  return static_cast<unsigned>(std::min<std::uint64_t>(threads, chunks));
}

// Runs job(0..n-1) on up to `threads` threads, the caller's included; returns the error of the
// lowest failing index, so the message names the first bad chunk whatever the scheduling.
Result<void> parallel_for(std::size_t n, unsigned threads,
                          const std::function<Result<void>(std::size_t)>& job) {
  std::vector<Result<void>> results(n);
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) results[i] = job(i);
  };
  std::vector<std::thread> pool;
  try {
    for (unsigned t = 1; t < threads && t < n; ++t) pool.emplace_back(worker);
  } catch (const std::system_error&) {
    // Fewer threads than asked for (a process or container limit): the ones running finish the work.
  }
  worker();
  for (std::thread& thread : pool) thread.join();
  for (Result<void>& result : results)
    if (!result) return result;
  return {};
}

// Reads until `buffer` is full or the source is exhausted; returns the bytes read.
Result<std::size_t> read_full(const ByteSource& source, std::span<std::uint8_t> buffer) {
  std::size_t done = 0;
  while (done < buffer.size()) {
    std::size_t n = GPUHOST_TRY(source(buffer.subspan(done)));
    if (n == 0) break;
    done += n;
  }
  return done;
}

Result<bool> source_has_more(const ByteSource& source) {
  std::uint8_t probe = 0;
  std::size_t n = GPUHOST_TRY(read_full(source, std::span(&probe, 1)));
  return n > 0;
}

Result<EncryptedFileInfo> encrypt_impl(const EncryptionKey& key, const EncryptOptions& options,
                                       std::uint64_t plaintext_bytes, const ByteSource& source,
                                       const ByteSink& sink) {
  if (options.chunk_bytes < k_min_chunk_bytes || options.chunk_bytes > k_max_chunk_bytes)
    return make_error(ErrorCode::invalid_argument,
                      "chunk size " + size_text(options.chunk_bytes) + " is outside 16 bytes..64 MiB");
  if (auto ok = suite_available(options.suite); !ok) return std::unexpected(ok.error());

  Header h;
  h.suite = options.suite;
  h.chunk_bytes = options.chunk_bytes;
  h.plaintext_bytes = plaintext_bytes;
  h.key_id = key.id_bytes();
  if (auto ok = platform::random_bytes(h.file_id); !ok) return std::unexpected(ok.error());
  if (auto ok = platform::random_bytes(h.nonce_base); !ok) return std::unexpected(ok.error());
  ChunkCipher cipher = GPUHOST_TRY(ChunkCipher::create(key, h.suite, h.file_id, h.nonce_base));

  auto header = encode_fields(h);
  auto mac = GPUHOST_TRY(cipher.header_mac(platform::ByteView(header).first(k_header_mac_offset)));
  std::copy(mac.begin(), mac.end(), header.begin() + k_header_mac_offset);
  if (auto ok = sink(header); !ok) return std::unexpected(ok.error());

  Layout layout(h);
  unsigned threads = worker_count(options.threads, layout.chunk_count);
  const std::size_t frame = layout.full_frame_bytes();
  auto buffer = std::make_unique_for_overwrite<std::uint8_t[]>(threads * frame);
  std::uint64_t read_so_far = 0;
  for (std::uint64_t first = 0; first < layout.chunk_count; first += threads) {
    std::size_t batch =
        static_cast<std::size_t>(std::min<std::uint64_t>(threads, layout.chunk_count - first));
    std::size_t batch_bytes = 0;
    for (std::size_t i = 0; i < batch; ++i) {
      std::uint8_t* slot = buffer.get() + i * frame;
      std::span<std::uint8_t> data(slot + k_chunk_index_bytes, layout.data_bytes(first + i));
      put_le(slot, first + i, 8);
      std::size_t n = GPUHOST_TRY(read_full(source, data));
      read_so_far += n;
      if (n < data.size())
        return make_error(ErrorCode::io_error, "the input ended after " + size_text(read_so_far) + " of " +
                                                   size_text(plaintext_bytes) +
                                                   ": it changed while being read");
      batch_bytes = i * frame + layout.frame_bytes(first + i);
    }
    auto sealed = parallel_for(batch, threads, [&](std::size_t i) {
      std::uint8_t* slot = buffer.get() + i * frame;
      std::size_t n = layout.data_bytes(first + i);
      return cipher.seal(first + i, layout.final(first + i), std::span(slot + k_chunk_index_bytes, n),
                         std::span(slot + k_chunk_index_bytes + n, layout.tag_bytes));
    });
    if (!sealed) return std::unexpected(sealed.error());
    if (auto ok = sink(platform::ByteView(buffer.get(), batch_bytes)); !ok)
      return std::unexpected(ok.error());
  }
  if (GPUHOST_TRY(source_has_more(source)))
    return make_error(ErrorCode::io_error,
                      "the input grew past " + size_text(plaintext_bytes) + " while being read");
  return info_of(h);
}

Result<EncryptedFileInfo> decrypt_impl(const EncryptionKey& key, const DecryptOptions& options,
                                       const ByteSource& source, const ByteSink& sink) {
  std::array<std::uint8_t, k_header_bytes> header{};
  std::size_t got = GPUHOST_TRY(read_full(source, header));
  Header h = GPUHOST_TRY(parse_fields(platform::ByteView(header).first(got)));
  if (auto ok = suite_available(h.suite); !ok)
    return std::unexpected(
        with_context(ok.error(), "the file was encrypted with " + std::string(suite_name(h.suite))));
  if (h.key_id != key.id_bytes())
    return make_error(ErrorCode::invalid_argument,
                      "wrong key: the file was encrypted with the key whose id is " +
                          platform::to_hex(h.key_id) + ", the key given has id " + key.id());
  ChunkCipher cipher = GPUHOST_TRY(ChunkCipher::create(key, h.suite, h.file_id, h.nonce_base));
  auto mac = GPUHOST_TRY(cipher.header_mac(platform::ByteView(header).first(k_header_mac_offset)));
  if (!platform::constant_time_equal(mac, platform::ByteView(header).subspan(k_header_mac_offset)))
    return make_error(ErrorCode::parse_error,
                      "the header failed authentication: it was modified after encryption");

  Layout layout(h);
  if (options.input_bytes && *options.input_bytes != layout.encrypted_bytes)
    return make_error(ErrorCode::parse_error,
                      std::string(*options.input_bytes < layout.encrypted_bytes ? "truncated" : "extended") +
                          ": the input is " + size_text(*options.input_bytes) + ", its header describes " +
                          size_text(layout.encrypted_bytes) + " (" + std::to_string(layout.chunk_count) +
                          " chunks)");

  unsigned threads = worker_count(options.threads, layout.chunk_count);
  const std::size_t frame = layout.full_frame_bytes();
  auto buffer = std::make_unique_for_overwrite<std::uint8_t[]>(threads * frame);
  std::uint64_t read_so_far = k_header_bytes;
  for (std::uint64_t first = 0; first < layout.chunk_count; first += threads) {
    std::size_t batch =
        static_cast<std::size_t>(std::min<std::uint64_t>(threads, layout.chunk_count - first));
    for (std::size_t i = 0; i < batch; ++i) {
      std::uint64_t index = first + i;
      std::span<std::uint8_t> slot(buffer.get() + i * frame, layout.frame_bytes(index));
      std::size_t n = GPUHOST_TRY(read_full(source, slot));
      read_so_far += n;
      if (n < slot.size())
        return make_error(ErrorCode::parse_error, "truncated: the input ends after " +
                                                      size_text(read_so_far) + ", inside chunk " +
                                                      std::to_string(index) + "; its header describes " +
                                                      size_text(layout.encrypted_bytes));
      std::uint64_t carried = get_le(slot.data(), 8);
      if (carried != index)
        return make_error(ErrorCode::parse_error, "chunk " + std::to_string(index) + " of 0.." +
                                                      std::to_string(layout.chunk_count - 1) +
                                                      " carries index " + std::to_string(carried) +
                                                      ": chunks were reordered, duplicated or replaced");
    }
    auto opened = parallel_for(batch, threads, [&](std::size_t i) -> Result<void> {
      std::uint64_t index = first + i;
      std::uint8_t* slot = buffer.get() + i * frame;
      std::size_t n = layout.data_bytes(index);
      auto ok = cipher.open(index, layout.final(index), std::span(slot + k_chunk_index_bytes, n),
                            platform::ByteView(slot + k_chunk_index_bytes + n, layout.tag_bytes));
      if (!ok && ok.error().code == ErrorCode::parse_error)
        return make_error(ErrorCode::parse_error,
                          "chunk " + std::to_string(index) + " of 0.." +
                              std::to_string(layout.chunk_count - 1) + " (plaintext bytes from " +
                              std::to_string(index * layout.chunk_bytes) +
                              ") failed authentication: its bytes were changed after encryption");
      return ok;
    });
    if (!opened) return std::unexpected(opened.error());
    for (std::size_t i = 0; i < batch; ++i) {
      platform::ByteView plain(buffer.get() + i * frame + k_chunk_index_bytes, layout.data_bytes(first + i));
      if (auto ok = sink(plain); !ok) return std::unexpected(ok.error());
    }
  }
  if (GPUHOST_TRY(source_has_more(source)))
    return make_error(
        ErrorCode::parse_error,
        "extended: bytes follow the final chunk; the header describes " + size_text(layout.encrypted_bytes));
  return info_of(h);
}

// The output of encrypt_file/decrypt_file while it is written: a temp file beside the target,
// renamed over it by commit() after an fsync, removed otherwise.
class StagedFile {
 public:
  static Result<StagedFile> create(const std::filesystem::path& target) {
    std::array<std::uint8_t, 6> suffix{};
    if (auto ok = platform::random_bytes(suffix); !ok) return std::unexpected(ok.error());
    std::filesystem::path temp =
        target.parent_path() / ("." + target.filename().string() + ".partial-" + platform::to_hex(suffix));
    auto file = platform::AppendFile::open(temp);
    if (!file) return std::unexpected(file.error());
    return StagedFile(target, temp, std::move(*file));
  }
  StagedFile(StagedFile&& other) noexcept
      : m_target(std::move(other.m_target)),
        m_temp(std::move(other.m_temp)),
        m_file(std::move(other.m_file)) {
    other.m_temp.clear();
  }
  StagedFile& operator=(StagedFile&&) = delete;
  ~StagedFile() {
    m_file.reset();
    std::error_code ignored;
    if (!m_temp.empty()) std::filesystem::remove(m_temp, ignored);
  }

  Result<void> append(platform::ByteView bytes) {
    return m_file->append(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }

  Result<void> commit() {
    if (auto ok = m_file->sync(); !ok) return ok;
    m_file.reset();
    std::error_code ec;
    std::filesystem::rename(m_temp, m_target, ec);
    if (ec)
      return make_error(ErrorCode::io_error, "renaming the finished output into place: " + ec.message());
    m_temp.clear();
    std::filesystem::path dir = m_target.parent_path();
    return platform::sync_directory(dir.empty() ? std::filesystem::path(".") : dir);
  }

 private:
  StagedFile(std::filesystem::path target, std::filesystem::path temp, platform::AppendFile file)
      : m_target(std::move(target)), m_temp(std::move(temp)), m_file(std::move(file)) {}
  std::filesystem::path m_target;
  std::filesystem::path m_temp;
  std::optional<platform::AppendFile> m_file;
};

Result<std::uint64_t> input_size(const std::filesystem::path& path) {
  std::error_code ec;
  std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec)
    return make_error(ec == std::errc::no_such_file_or_directory ? ErrorCode::not_found : ErrorCode::io_error,
                      "reading " + path.string() + ": " + ec.message());
  return size;
}

Result<void> check_distinct(const std::filesystem::path& in, const std::filesystem::path& out) {
  std::error_code ec;
  if (std::filesystem::equivalent(in, out, ec))
    return make_error(ErrorCode::invalid_argument, "the output is the input file; write to another path");
  return {};
}

ByteSource file_source(std::ifstream& in, const std::filesystem::path& path) {
  return [&in, path](std::span<std::uint8_t> buffer) -> Result<std::size_t> {
    in.read(reinterpret_cast<char*>(buffer.data()), static_cast<std::streamsize>(buffer.size()));
    if (in.bad()) return make_error(ErrorCode::io_error, "reading " + path.string() + " failed");
    return static_cast<std::size_t>(in.gcount());
  };
}

template <typename Run>
Result<EncryptedFileInfo> file_to_file(const std::filesystem::path& from, const std::filesystem::path& to,
                                       Run run) {
  if (auto ok = check_distinct(from, to); !ok) return std::unexpected(ok.error());
  std::uint64_t size = GPUHOST_TRY(input_size(from));
  std::ifstream in(from, std::ios::binary);
  if (!in) return make_error(ErrorCode::io_error, "opening " + from.string() + " for reading failed");
  StagedFile out = GPUHOST_TRY(StagedFile::create(to));
  EncryptedFileInfo info = GPUHOST_TRY(
      run(size, file_source(in, from), [&](platform::ByteView bytes) { return out.append(bytes); }));
  if (auto ok = out.commit(); !ok) return std::unexpected(ok.error());
  return info;
}

ByteSource memory_source(std::string_view bytes) {
  auto offset = std::make_shared<std::size_t>(0);
  return [bytes, offset](std::span<std::uint8_t> buffer) -> Result<std::size_t> {
    std::size_t n = std::min(buffer.size(), bytes.size() - *offset);
    std::copy_n(bytes.data() + *offset, n, buffer.data());
    *offset += n;
    return n;
  };
}

ByteSink memory_sink(std::string& out) {
  return [&out](platform::ByteView bytes) -> Result<void> {
    out.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return {};
  };
}

}  // namespace

Result<EncryptedFileInfo> inspect_header(platform::ByteView header) {
  Header h = GPUHOST_TRY(parse_fields(header));
  return info_of(h);
}

Result<EncryptedFileInfo> encrypt_stream(const EncryptionKey& key, const EncryptOptions& options,
                                         std::uint64_t plaintext_bytes, const ByteSource& source,
                                         const ByteSink& sink) {
  auto info = encrypt_impl(key, options, plaintext_bytes, source, sink);
  if (!info) return std::unexpected(with_context(info.error(), "encrypting"));
  return info;
}

Result<EncryptedFileInfo> decrypt_stream(const EncryptionKey& key, const DecryptOptions& options,
                                         const ByteSource& source, const ByteSink& sink) {
  auto info = decrypt_impl(key, options, source, sink);
  if (!info) return std::unexpected(with_context(info.error(), "decrypting"));
  return info;
}

Result<EncryptedFileInfo> encrypt_file(const EncryptionKey& key, const EncryptOptions& options,
                                       const std::filesystem::path& plaintext,
                                       const std::filesystem::path& encrypted) {
  auto info = file_to_file(plaintext, encrypted,
                           [&](std::uint64_t size, const ByteSource& source, const ByteSink& sink) {
                             return encrypt_impl(key, options, size, source, sink);
                           });
  if (!info) return std::unexpected(with_context(info.error(), "encrypting " + plaintext.string()));
  return info;
}

Result<EncryptedFileInfo> decrypt_file(const EncryptionKey& key, const DecryptOptions& options,
                                       const std::filesystem::path& encrypted,
                                       const std::filesystem::path& plaintext) {
  auto info = file_to_file(encrypted, plaintext,
                           [&](std::uint64_t size, const ByteSource& source, const ByteSink& sink) {
                             DecryptOptions with_size = options;
                             with_size.input_bytes = size;
                             return decrypt_impl(key, with_size, source, sink);
                           });
  if (!info) return std::unexpected(with_context(info.error(), "decrypting " + encrypted.string()));
  return info;
}

Result<std::string> encrypt_bytes(const EncryptionKey& key, const EncryptOptions& options,
                                  std::string_view plaintext) {
  std::string out;
  if (options.chunk_bytes >= k_min_chunk_bytes) {
    std::size_t chunks =
        plaintext.empty() ? 1 : (plaintext.size() + options.chunk_bytes - 1) / options.chunk_bytes;
    out.reserve(k_header_bytes + chunks * (k_chunk_index_bytes + suite_tag_bytes(options.suite)) +
                plaintext.size());
  }
  if (auto info = encrypt_stream(key, options, plaintext.size(), memory_source(plaintext), memory_sink(out));
      !info)
    return std::unexpected(info.error());
  return out;
}

Result<std::string> decrypt_bytes(const EncryptionKey& key, const DecryptOptions& options,
                                  std::string_view encrypted) {
  DecryptOptions with_size = options;
  with_size.input_bytes = encrypted.size();
  std::string out;
  out.reserve(encrypted.size());
  if (auto info = decrypt_stream(key, with_size, memory_source(encrypted), memory_sink(out)); !info)
    return std::unexpected(info.error());
  return out;
}

}  // namespace gpuhost::crypt
