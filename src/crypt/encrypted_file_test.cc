#include "crypt/encrypted_file.h"

#include <fstream>

#include <gtest/gtest.h>

#include "crypt/chunk_cipher.h"
#include "crypt/test_support.h"
#include "platform/files.h"

namespace gpuhost::crypt {
namespace {

using testing::on_windows;
using testing::ScratchDir;
using testing::test_bytes;
using testing::test_key;

constexpr std::uint32_t k_chunk = 16;  // small chunks keep multi-chunk cases readable
constexpr std::size_t k_gcm_frame = k_chunk_index_bytes + k_chunk + 16;

std::vector<CipherSuite> runnable_suites() {
  std::vector<CipherSuite> suites;
  for (CipherSuite s : {CipherSuite::aes_256_gcm, CipherSuite::sm4_gcm, CipherSuite::sm4_ctr_hmac_sm3})
    if (suite_available(s)) suites.push_back(s);
  return suites;
}

EncryptOptions options(CipherSuite suite = CipherSuite::aes_256_gcm, unsigned threads = 0) {
  EncryptOptions o;
  o.suite = suite;
  o.chunk_bytes = k_chunk;
  o.threads = threads;
  return o;
}

std::string encrypt(std::string_view plain, CipherSuite suite = CipherSuite::aes_256_gcm) {
  auto sealed = encrypt_bytes(test_key(), options(suite), plain);
  EXPECT_TRUE(sealed) << sealed.error().message;
  return sealed.value_or("");
}

std::string decrypt_error(std::string_view sealed, const EncryptionKey& key = test_key()) {
  auto opened = decrypt_bytes(key, {}, sealed);
  if (opened) return "decrypted without error";
  return opened.error().message;
}

std::size_t frame_offset(std::size_t index, std::size_t frame = k_gcm_frame) {
  return k_header_bytes + index * frame;
}

TEST(EncryptedFile, RoundTripsEveryShapeWithEverySuiteAndThreadCount) {
  ASSERT_FALSE(runnable_suites().empty());
  for (CipherSuite suite : runnable_suites()) {
    for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{k_chunk}, std::size_t{3 * k_chunk},
                             std::size_t{3 * k_chunk + 5}, std::size_t{257 * k_chunk + 1}}) {
      for (unsigned threads : {1u, 4u}) {
        SCOPED_TRACE(std::string(suite_name(suite)) + ", " + std::to_string(size) + " bytes, " +
                     std::to_string(threads) + " threads");
        std::string plain = test_bytes(size);
        auto sealed = encrypt_bytes(test_key(), options(suite, threads), plain);
        ASSERT_TRUE(sealed) << sealed.error().message;
        std::size_t chunks = size == 0 ? 1 : (size + k_chunk - 1) / k_chunk;
        EXPECT_EQ(sealed->size(), k_header_bytes + chunks * (8 + suite_tag_bytes(suite)) + size);
        DecryptOptions decrypt_options;
        decrypt_options.threads = 5 - threads;
        auto opened = decrypt_bytes(test_key(), decrypt_options, *sealed);
        ASSERT_TRUE(opened) << opened.error().message;
        EXPECT_EQ(*opened, plain);
      }
    }
  }
}

TEST(EncryptedFile, TheDefaultChunkIs4MiB) {
  std::string plain = test_bytes((4u << 20) + 3);
  auto sealed = encrypt_bytes(test_key(), {}, plain);
  ASSERT_TRUE(sealed) << sealed.error().message;
  auto info = inspect_header(platform::byte_view(*sealed));
  ASSERT_TRUE(info);
  EXPECT_EQ(info->chunk_bytes, 4u << 20);
  EXPECT_EQ(info->chunk_count, 2u);
  EXPECT_EQ(decrypt_bytes(test_key(), {}, *sealed).value_or(""), plain);
}

TEST(EncryptedFile, SamePlaintextEncryptsDifferentlyEachTime) {
  std::string plain = test_bytes(40);
  std::string a = encrypt(plain), b = encrypt(plain);
  auto info_a = inspect_header(platform::byte_view(a)), info_b = inspect_header(platform::byte_view(b));
  ASSERT_TRUE(info_a && info_b);
  EXPECT_NE(info_a->file_id, info_b->file_id);
  EXPECT_NE(a.substr(k_header_bytes), b.substr(k_header_bytes));
}

TEST(EncryptedFile, HeaderNamesSuiteSizesAndKeyWithoutTheKey) {
  auto info = inspect_header(platform::byte_view(encrypt(test_bytes(40))));
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->suite, CipherSuite::aes_256_gcm);
  EXPECT_EQ(info->chunk_bytes, k_chunk);
  EXPECT_EQ(info->plaintext_bytes, 40u);
  EXPECT_EQ(info->chunk_count, 3u);
  EXPECT_EQ(info->encrypted_bytes, 208u);
  EXPECT_EQ(info->key_id, test_key().id());
  EXPECT_EQ(info->file_id.size(), 32u);
}

// Decodes a file with platform primitives only, following doc/encryption.md, so the document and
// the code cannot drift apart.
TEST(EncryptedFile, LayoutAndKeysAreTheDocumentedOnes) {
  std::string plain = test_bytes(40);
  std::string sealed = encrypt(plain);
  auto bytes = platform::byte_view(sealed);
  ASSERT_EQ(sealed.substr(0, 8), std::string("GPUHENC\0", 8));
  EXPECT_EQ(bytes[8], 1);  // version
  EXPECT_EQ(bytes[9], 1);  // aes-256-gcm
  EXPECT_EQ(bytes[12] | bytes[13] << 8, 16);
  EXPECT_EQ(bytes[16], 40);
  EXPECT_EQ(platform::to_hex(bytes.subspan(24, 8)), test_key().id());
  auto file_id = bytes.subspan(32, 16);
  auto nonce_base = bytes.subspan(48, 12);

  auto derive = [&](const char* info, std::size_t n) {
    std::vector<std::uint8_t> out(n);
    EXPECT_TRUE(platform::hkdf(platform::HashAlgorithm::sha256, test_key().bytes(), file_id,
                               platform::byte_view(info), out));
    return out;
  };
  auto data_key = derive("gpuhost-encryption v1 aes-256-gcm data key", 32);
  auto header_key = derive("gpuhost-encryption v1 aes-256-gcm header mac key", 32);
  auto header_mac = platform::hmac(platform::HashAlgorithm::sha256, header_key, {bytes.first(64)});
  ASSERT_TRUE(header_mac);
  EXPECT_EQ(platform::to_hex(*header_mac), platform::to_hex(bytes.subspan(64, 32)));

  std::string opened;
  for (std::uint64_t index = 0; index < 3; ++index) {
    std::size_t at = frame_offset(index);
    std::size_t size = index == 2 ? 8 : 16;
    EXPECT_EQ(bytes[at], index);
    std::vector<std::uint8_t> nonce(nonce_base.begin(), nonce_base.end());
    nonce[11] ^= static_cast<std::uint8_t>(index);
    std::vector<std::uint8_t> aad(file_id.begin(), file_id.end());
    for (int i = 0; i < 8; ++i) aad.push_back(static_cast<std::uint8_t>(index >> (8 * i)));
    aad.push_back(index == 2 ? 1 : 0);
    std::vector<std::uint8_t> out(size);
    auto ok = platform::aead_open(platform::AeadAlgorithm::aes_256_gcm, data_key, nonce, aad,
                                  bytes.subspan(at + 8, size), bytes.subspan(at + 8 + size, 16), out);
    ASSERT_TRUE(ok) << "chunk " << index << ": " << ok.error().message;
    opened.append(out.begin(), out.end());
  }
  EXPECT_EQ(opened, plain);
}

std::string from_hex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

// Written by an independent encoder from doc/encryption.md alone (Python, pyca/cryptography 48
// with its bundled OpenSSL 4.0, which has SM4-GCM): key bytes 00..1f, file id a0..af, nonce base
// c0..cb, 16-byte chunks, the 40-byte plaintext below. Where this build lacks the suite, the
// error must say so.
TEST(EncryptedFile, DecryptsGoldenFilesFromAnIndependentEncoder) {
  struct Golden {
    CipherSuite suite;
    const char* hex;
  };
  const Golden goldens[] = {
      {CipherSuite::aes_256_gcm,
       "47505548454e430001010000100000002800000000000000b2a86aff27ac3e70a0a1a2a3a4a5a6a7a8a9aaabacadaeafc0c1"
       "c2c3c4c5c6c7c8c9cacb0000000014fbe37fe7fb96938366c9d065ba896a73afe9e639edfd935744e985ef1f6e4200000000"
       "000000005ccb0915f6e92ad2874993ae324f142d111b70fe97cf8d8e496beec4c1255ba901000000000000006214a845fe3c"
       "a9ae302b46dbec71767a8a39913b17f97d6be3d239e0356b4bd0020000000000000005224291c7171b4974e33a588be11b07"
       "4a17f82f342e3116"},
      {CipherSuite::sm4_gcm,
       "47505548454e430001020000100000002800000000000000b2a86aff27ac3e70a0a1a2a3a4a5a6a7a8a9aaabacadaeafc0c1"
       "c2c3c4c5c6c7c8c9cacb0000000076eecaa0c3c5ff4b641b95108df64c656bd1dd45a4f3925566c2eff81c26c30600000000"
       "000000008b4a52028c94ace5f365f9138b7302d6e2de34eb8dea2abcd76728bdceff032b01000000000000003c2b6ecf6f09"
       "0968d608f82bb8ad6a27851d87282911665690339bcea9ce55e00200000000000000f88409f2326b5452ec83d7058d4b9e19"
       "9df8901da055e571"},
      {CipherSuite::sm4_ctr_hmac_sm3,
       "47505548454e430001030000100000002800000000000000b2a86aff27ac3e70a0a1a2a3a4a5a6a7a8a9aaabacadaeafc0c1"
       "c2c3c4c5c6c7c8c9cacb00000000537acab9ae458c647d2524cf81713bcba98c293645721d54cfa0610ad885050b00000000"
       "00000000af5133229e5f5e3351f7bf5b1e0a8a78fe7c87642f6048b2ecdd92e0154c86e7ce01e7c5dcf3312479e4600c1467"
       "39aa0100000000000000a9efdb37a3d489603b2dd4dd3c152e9e39053e4cc3cfd367a1a189e2bb7819039172ef410a6d00ed"
       "2220b1d1741c47910200000000000000433ca1e80ad7d6e28db8133d370f2d74c6a9cc33635ee39354b3449711df88d033fb"
       "aa5ee62c6b1b"},
  };
  for (const Golden& golden : goldens) {
    SCOPED_TRACE(suite_name(golden.suite));
    auto opened = decrypt_bytes(test_key(), {}, from_hex(golden.hex));
    if (suite_available(golden.suite)) {
      ASSERT_TRUE(opened) << opened.error().message;
      EXPECT_EQ(*opened, "gpuhost golden file: forty bytes long!!!");
    } else {
      ASSERT_FALSE(opened);
      EXPECT_FALSE(on_windows()) << "libgcrypt runs every suite";
      EXPECT_EQ(opened.error().code, ErrorCode::unavailable);
      EXPECT_NE(
          opened.error().message.find("the file was encrypted with " + std::string(suite_name(golden.suite))),
          std::string::npos)
          << opened.error().message;
    }
  }
}

// Tamper cases: each must be refused with a message that says what happened.
TEST(EncryptedFile, RefusesAFlippedBitInAChunk) {
  std::string sealed = encrypt(test_bytes(40));
  sealed[frame_offset(1) + 8 + 3] ^= 0x10;
  EXPECT_EQ(
      decrypt_error(sealed),
      "decrypting: chunk 1 of 0..2 (plaintext bytes from 16) failed authentication: its bytes were changed "
      "after encryption");
}

TEST(EncryptedFile, RefusesAFlippedBitInATag) {
  std::string sealed = encrypt(test_bytes(40));
  sealed[frame_offset(0) + 8 + 16] ^= 0x01;
  EXPECT_NE(decrypt_error(sealed).find("chunk 0 of 0..2 (plaintext bytes from 0) failed authentication"),
            std::string::npos);
}

TEST(EncryptedFile, RefusesATruncatedChunk) {
  std::string sealed = encrypt(test_bytes(40));
  sealed.resize(sealed.size() - 5);
  EXPECT_EQ(decrypt_error(sealed),
            "decrypting: truncated: the input is 203 bytes, its header describes 208 bytes (3 chunks)");
}

TEST(EncryptedFile, RefusesAFileCutAtAChunkBoundary) {
  std::string sealed = encrypt(test_bytes(48));
  sealed.resize(frame_offset(2));
  EXPECT_NE(decrypt_error(sealed).find("truncated"), std::string::npos) << decrypt_error(sealed);
}

TEST(EncryptedFile, RefusesTruncationEvenWhenTheSizeIsNotKnownAhead) {
  std::string sealed = encrypt(test_bytes(40));
  sealed.resize(sealed.size() - 5);
  std::size_t offset = 0;
  auto source = [&](std::span<std::uint8_t> buffer) -> Result<std::size_t> {
    std::size_t n = std::min(buffer.size(), sealed.size() - offset);
    std::copy_n(sealed.data() + offset, n, buffer.data());
    offset += n;
    return n;
  };
  std::string released;
  auto sink = [&](platform::ByteView bytes) -> Result<void> {
    released.append(bytes.begin(), bytes.end());
    return {};
  };
  auto result = decrypt_stream(test_key(), {}, source, sink);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().message,
            "decrypting: truncated: the input ends after 203 bytes, inside chunk 2; its header describes 208 "
            "bytes");
}

TEST(EncryptedFile, RefusesAnExtendedFile) {
  std::string sealed = encrypt(test_bytes(40)) + "x";
  EXPECT_EQ(decrypt_error(sealed),
            "decrypting: extended: the input is 209 bytes, its header describes 208 bytes (3 chunks)");
}

TEST(EncryptedFile, RefusesSwappedChunks) {
  std::string sealed = encrypt(test_bytes(48));
  std::string first = sealed.substr(frame_offset(0), k_gcm_frame);
  sealed.replace(frame_offset(0), k_gcm_frame, sealed.substr(frame_offset(1), k_gcm_frame));
  sealed.replace(frame_offset(1), k_gcm_frame, first);
  EXPECT_EQ(decrypt_error(sealed),
            "decrypting: chunk 0 of 0..2 carries index 1: chunks were reordered, duplicated or replaced");
}

TEST(EncryptedFile, RefusesSwappedChunksWhoseVisibleIndexWasRewritten) {
  std::string sealed = encrypt(test_bytes(48));
  std::string first = sealed.substr(frame_offset(0), k_gcm_frame);
  sealed.replace(frame_offset(0), k_gcm_frame, sealed.substr(frame_offset(1), k_gcm_frame));
  sealed.replace(frame_offset(1), k_gcm_frame, first);
  sealed[frame_offset(0)] = 0;
  sealed[frame_offset(1)] = 1;
  EXPECT_NE(decrypt_error(sealed).find("chunk 0 of 0..2 (plaintext bytes from 0) failed authentication"),
            std::string::npos)
      << decrypt_error(sealed);
}

TEST(EncryptedFile, RefusesAChunkFromAnotherFileUnderTheSameKey) {
  std::string sealed = encrypt(test_bytes(48, 1));
  std::string other = encrypt(test_bytes(48, 2));
  sealed.replace(frame_offset(1), k_gcm_frame, other.substr(frame_offset(1), k_gcm_frame));
  EXPECT_NE(decrypt_error(sealed).find("chunk 1 of 0..2 (plaintext bytes from 16) failed authentication"),
            std::string::npos);
}

TEST(EncryptedFile, RefusesAWrongKeyNamingBothKeys) {
  std::string sealed = encrypt(test_bytes(40));
  auto other = test_key(9);
  auto opened = decrypt_bytes(other, {}, sealed);
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(opened.error().message,
            "decrypting: wrong key: the file was encrypted with the key whose id is " + test_key().id() +
                ", the key given has id " + other.id());
}

TEST(EncryptedFile, RefusesAWrongKeyEvenWithAForgedKeyId) {
  std::string sealed = encrypt(test_bytes(40));
  auto other = test_key(9);
  std::copy(other.id_bytes().begin(), other.id_bytes().end(), sealed.begin() + 24);
  EXPECT_EQ(decrypt_error(sealed, other),
            "decrypting: the header failed authentication: it was modified after encryption");
}

TEST(EncryptedFile, RefusesAnEditedHeader) {
  struct Edit {
    const char* what;
    std::size_t at;
    const char* message;
  };
  const Edit edits[] = {
      {"plaintext size", 16, "the header failed authentication"},
      {"chunk size", 12, "the header failed authentication"},
      {"file id", 40, "the header failed authentication"},
      {"nonce base", 50, "the header failed authentication"},
      {"header mac", 80, "the header failed authentication"},
      {"version", 8, "format version 0: this gpuhost reads version 1"},
      {"reserved", 61, "reserved header bytes are not zero"},
      {"magic", 0, "not an encrypted gpuhost file"},
  };
  for (const Edit& edit : edits) {
    SCOPED_TRACE(edit.what);
    std::string sealed = encrypt(test_bytes(40));
    sealed[edit.at] ^= 0x01;
    std::string message = decrypt_error(sealed);
    EXPECT_NE(message.find(edit.message), std::string::npos) << message;
  }
}

TEST(EncryptedFile, RefusesADowngradedSuite) {
  std::string sealed = encrypt(test_bytes(40), CipherSuite::sm4_ctr_hmac_sm3);
  sealed[9] = static_cast<char>(CipherSuite::aes_256_gcm);
  EXPECT_EQ(decrypt_error(sealed),
            "decrypting: the header failed authentication: it was modified after encryption");
}

TEST(EncryptedFile, RefusesInputThatIsNotEncrypted) {
  EXPECT_EQ(decrypt_error("PK\x03\x04 a zip"),
            "decrypting: not an encrypted gpuhost file: 10 bytes, shorter than the 96-byte header");
  EXPECT_EQ(decrypt_error(std::string(200, 'a')),
            "decrypting: not an encrypted gpuhost file: it does not start with \"GPUHENC\"");
}

TEST(EncryptedFile, TamperedSm4ChunksAreRefusedToo) {
  std::string sealed = encrypt(test_bytes(40), CipherSuite::sm4_ctr_hmac_sm3);
  constexpr std::size_t k_frame = 8 + 16 + 32;
  sealed[k_header_bytes + k_frame + 8] ^= 0x01;
  EXPECT_NE(decrypt_error(sealed).find("chunk 1 of 0..2 (plaintext bytes from 16) failed authentication"),
            std::string::npos);
}

// The final flag is bound into the tag: a non-final chunk does not open as the last one.
TEST(ChunkCipher, TheFinalFlagIsAuthenticated) {
  for (CipherSuite suite : runnable_suites()) {
    SCOPED_TRACE(suite_name(suite));
    auto cipher = ChunkCipher::create(test_key(), suite, FileId{1}, NonceBase{2});
    ASSERT_TRUE(cipher);
    std::string data = test_bytes(16);
    std::span<std::uint8_t> span(reinterpret_cast<std::uint8_t*>(data.data()), data.size());
    std::vector<std::uint8_t> tag(cipher->tag_bytes());
    ASSERT_TRUE(cipher->seal(5, FinalChunk::no, span, tag));
    std::string sealed = data;
    auto as_last = cipher->open(5, FinalChunk::yes, span, tag);
    ASSERT_FALSE(as_last);
    EXPECT_NE(as_last.error().message.find("authentication failed"), std::string::npos);
    data = sealed;
    EXPECT_FALSE(cipher->open(6, FinalChunk::no, span, tag)) << "another index must not open either";
    data = sealed;
    EXPECT_TRUE(cipher->open(5, FinalChunk::no, span, tag));
    EXPECT_EQ(data, test_bytes(16));
  }
}

TEST(EncryptedFile, FilesRoundTripAndAppearOnlyWhenComplete) {
  ScratchDir dir("files");
  std::string plain = test_bytes((1 << 20) + 7);
  platform::write_file_atomic(dir.path() / "model.pt", plain).value();
  EncryptOptions o;
  o.chunk_bytes = 64 << 10;
  auto info = encrypt_file(test_key(), o, dir.path() / "model.pt", dir.path() / "model.pt.enc");
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(std::filesystem::file_size(dir.path() / "model.pt.enc"), info->encrypted_bytes);
  auto back = decrypt_file(test_key(), {}, dir.path() / "model.pt.enc", dir.path() / "restored.pt");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(platform::read_file(dir.path() / "restored.pt").value_or(""), plain);
  platform::write_file_atomic(dir.path() / "restored.pt", "older contents").value();
  ASSERT_TRUE(decrypt_file(test_key(), {}, dir.path() / "model.pt.enc", dir.path() / "restored.pt"));
  EXPECT_EQ(platform::read_file(dir.path() / "restored.pt").value_or(""), plain)
      << "an existing output is replaced";
  EXPECT_EQ(platform::list_directory(dir.path()).value().size(), 3u) << "a temp file was left behind";
}

TEST(EncryptedFile, AFailedDecryptionLeavesNoOutputAndKeepsTheOldFile) {
  ScratchDir dir("files-bad");
  std::string sealed = encrypt(test_bytes(400));
  sealed[frame_offset(20) + 8] ^= 0x01;  // chunk 20 of 25: earlier chunks decrypt fine
  platform::write_file_atomic(dir.path() / "bad.enc", sealed).value();
  platform::write_file_atomic(dir.path() / "old.pt", "previous checkpoint").value();
  auto result = decrypt_file(test_key(), {}, dir.path() / "bad.enc", dir.path() / "old.pt");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().message,
            "decrypting " + (dir.path() / "bad.enc").string() +
                ": chunk 20 of 0..24 (plaintext bytes from 320) failed authentication: its "
                "bytes were changed after encryption");
  EXPECT_EQ(platform::read_file(dir.path() / "old.pt").value_or(""), "previous checkpoint");
  auto fresh = decrypt_file(test_key(), {}, dir.path() / "bad.enc", dir.path() / "new.pt");
  ASSERT_FALSE(fresh);
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "new.pt"));
  auto entries = platform::list_directory(dir.path());
  ASSERT_TRUE(entries);
  EXPECT_EQ(entries->size(), 2u) << "a temp file was left behind";
}

TEST(EncryptedFile, RefusesToOverwriteItsInputAndNamesAMissingOne) {
  ScratchDir dir("files-same");
  platform::write_file_atomic(dir.path() / "a", "data").value();
  auto same = encrypt_file(test_key(), {}, dir.path() / "a", dir.path() / "a");
  ASSERT_FALSE(same);
  EXPECT_EQ(same.error().code, ErrorCode::invalid_argument);
  auto missing = decrypt_file(test_key(), {}, dir.path() / "absent", dir.path() / "out");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::not_found);
}

TEST(EncryptedFile, RefusesAChunkSizeOutsideTheLimits) {
  EncryptOptions o;
  o.chunk_bytes = 8;
  auto sealed = encrypt_bytes(test_key(), o, "x");
  ASSERT_FALSE(sealed);
  EXPECT_EQ(sealed.error().code, ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace gpuhost::crypt
