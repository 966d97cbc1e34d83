// crypto.h on OpenSSL 3 libcrypto (Debian libssl-dev), through the EVP interfaces only.
#include <algorithm>
#include <climits>
#include <memory>
#include <new>
#include <utility>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "platform/crypto.h"

namespace gpuhost::platform {
namespace {

// Algorithms fetched once from the default provider and shared by every thread (fetched objects
// are immutable and reference counted; docs.openssl.org/3.0/man7/crypto "Performance"). A null
// member is an algorithm this OpenSSL lacks: SM4-GCM before OpenSSL 3.1 (research/02 §7).
struct Algorithms {
  EVP_MD* sha256 = nullptr;
  EVP_MD* sm3 = nullptr;
  EVP_MD* md5 = nullptr;  // absent under a FIPS-only configuration
  EVP_MAC* hmac = nullptr;
  EVP_CIPHER* aes_256_gcm = nullptr;
  EVP_CIPHER* sm4_gcm = nullptr;
  EVP_CIPHER* sm4_ctr = nullptr;
};

const Algorithms& algorithms() {
  static const Algorithms fetched = [] {
    Algorithms a;
    a.sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    a.sm3 = EVP_MD_fetch(nullptr, "SM3", nullptr);
    a.md5 = EVP_MD_fetch(nullptr, "MD5", nullptr);
    a.hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    a.aes_256_gcm = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
    a.sm4_gcm = EVP_CIPHER_fetch(nullptr, "SM4-GCM", nullptr);
    a.sm4_ctr = EVP_CIPHER_fetch(nullptr, "SM4-CTR", nullptr);
    ERR_clear_error();  // a failed fetch leaves errors that would confuse later messages
    return a;
  }();
  return fetched;
}

// "<context>: <OpenSSL's reasons>", draining this thread's error queue.
Error openssl_error(std::string_view context) {
  std::string reasons;
  while (unsigned long code = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(code, text, sizeof text);
    if (!reasons.empty()) reasons += "; ";
    reasons += text;
  }
  if (reasons.empty()) reasons = "OpenSSL reported a failure without a reason";
  return Error{ErrorCode::io_error, std::string(context) + ": " + reasons};
}

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;
struct MacCtxFree {
  void operator()(EVP_MAC_CTX* ctx) const { EVP_MAC_CTX_free(ctx); }
};
using MacCtx = std::unique_ptr<EVP_MAC_CTX, MacCtxFree>;

const EVP_MD* digest(HashAlgorithm algorithm) {
  return algorithm == HashAlgorithm::sm3 ? algorithms().sm3 : algorithms().sha256;
}

const EVP_CIPHER* aead_cipher(AeadAlgorithm algorithm) {
  return algorithm == AeadAlgorithm::sm4_gcm ? algorithms().sm4_gcm : algorithms().aes_256_gcm;
}

const char* aead_name(AeadAlgorithm algorithm) {
  return algorithm == AeadAlgorithm::sm4_gcm ? "SM4-GCM" : "AES-256-GCM";
}

// EVP_*Update take int lengths; pieces of 1 GiB keep any span size safe. A null `out` feeds AAD.
constexpr std::size_t k_max_update = std::size_t{1} << 30;

template <typename Update>
bool update_in_pieces(Update update, ByteView in, std::uint8_t* out) {
  for (std::size_t done = 0; done < in.size();) {
    std::size_t n = std::min(in.size() - done, k_max_update);
    int written = 0;
    if (update(out ? out + done : nullptr, &written, in.data() + done, static_cast<int>(n)) != 1)
      return false;
    done += n;
  }
  return true;
}

Result<void> check_sizes(AeadAlgorithm algorithm, ByteView key, ByteView nonce, std::size_t in,
                         std::size_t out, std::size_t tag) {
  if (key.size() != aead_key_bytes(algorithm) || nonce.size() != k_aead_nonce_bytes || in != out ||
      tag != k_aead_tag_bytes)
    return make_error(ErrorCode::internal, std::string(aead_name(algorithm)) +
                                               ": wrong key, nonce, tag or output size (a bug in gpuhost)");
  return {};
}

}  // namespace

Sha256::Sha256() {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex2(ctx, algorithms().sha256, nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    throw std::bad_alloc();
  }
  m_state = ctx;
}
Sha256::Sha256(Sha256&& other) noexcept : m_state(std::exchange(other.m_state, nullptr)) {}
Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(m_state));
    m_state = std::exchange(other.m_state, nullptr);
  }
  return *this;
}
Sha256::~Sha256() {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(m_state));
}

void Sha256::update(const void* data, std::size_t bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(m_state), data, bytes);
}

Sha256Digest Sha256::finish() {
  Sha256Digest out{};
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(m_state), out.data(), nullptr);
  return out;
}

std::string crypto_library() {
  return OpenSSL_version(OPENSSL_VERSION);
}

Result<Md5Digest> md5(std::span<const std::uint8_t> data) {
  if (!algorithms().md5)
    return make_error(ErrorCode::unavailable,
                      "MD5: " + crypto_library() + " does not provide it (FIPS mode?)");
  Md5Digest out{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &size, algorithms().md5, nullptr) != 1 ||
      size != out.size())
    return std::unexpected(openssl_error("MD5"));
  return out;
}

Result<Md5> Md5::create() {
  if (!algorithms().md5)
    return make_error(ErrorCode::unavailable, "MD5: " + crypto_library() + " does not provide it (FIPS mode?)");
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex2(ctx, algorithms().md5, nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    return std::unexpected(openssl_error("MD5"));
  }
  return Md5(ctx);
}
Md5::Md5(Md5&& other) noexcept : m_state(std::exchange(other.m_state, nullptr)) {}
Md5& Md5::operator=(Md5&& other) noexcept {
  if (this != &other) {
    EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(m_state));
    m_state = std::exchange(other.m_state, nullptr);
  }
  return *this;
}
Md5::~Md5() {
  EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(m_state));
}
void Md5::update(const void* data, std::size_t bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(m_state), data, bytes);
}
Md5Digest Md5::finish() {
  Md5Digest out{};
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(m_state), out.data(), nullptr);
  return out;
}

Result<void> random_bytes(std::span<std::uint8_t> out) {
  for (std::size_t done = 0; done < out.size();) {
    std::size_t n = std::min<std::size_t>(out.size() - done, INT_MAX);
    if (RAND_bytes(out.data() + done, static_cast<int>(n)) != 1)
      return std::unexpected(openssl_error("reading random bytes (RAND_bytes)"));
    done += n;
  }
  return {};
}

void secure_zero(std::span<std::uint8_t> bytes) {
  OPENSSL_cleanse(bytes.data(), bytes.size());
}

Result<void> hash_available(HashAlgorithm algorithm) {
  if (digest(algorithm)) return {};
  return make_error(ErrorCode::unavailable,
                    std::string(hash_name(algorithm)) + ": " + crypto_library() + " does not provide it");
}

Result<Digest32> hash(HashAlgorithm algorithm, ByteView data) {
  if (auto ok = hash_available(algorithm); !ok) return std::unexpected(ok.error());
  Digest32 out{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &size, digest(algorithm), nullptr) != 1 ||
      size != out.size())
    return std::unexpected(openssl_error(std::string(hash_name(algorithm))));
  return out;
}

Result<Digest32> hmac(HashAlgorithm algorithm, ByteView key, std::initializer_list<ByteView> parts) {
  if (auto ok = hash_available(algorithm); !ok) return std::unexpected(ok.error());
  std::string context = std::string("HMAC-") + hash_name(algorithm);
  MacCtx ctx(EVP_MAC_CTX_new(algorithms().hmac));
  if (!ctx) return std::unexpected(openssl_error(context));
  char sha256_name[] = "SHA256";
  char sm3_name[] = "SM3";
  char* name = algorithm == HashAlgorithm::sm3 ? sm3_name : sha256_name;
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, name, 0), OSSL_PARAM_END};
  // A null key only re-initialises an already keyed context; an empty key needs a real pointer.
  static constexpr std::uint8_t k_empty = 0;
  if (EVP_MAC_init(ctx.get(), key.empty() ? &k_empty : key.data(), key.size(), params) != 1)
    return std::unexpected(openssl_error(context));
  for (ByteView part : parts)
    if (!part.empty() && EVP_MAC_update(ctx.get(), part.data(), part.size()) != 1)
      return std::unexpected(openssl_error(context));
  Digest32 out{};
  std::size_t size = 0;
  if (EVP_MAC_final(ctx.get(), out.data(), &size, out.size()) != 1 || size != out.size())
    return std::unexpected(openssl_error(context));
  return out;
}

std::size_t aead_key_bytes(AeadAlgorithm algorithm) {
  return algorithm == AeadAlgorithm::sm4_gcm ? k_sm4_key_bytes : 32;
}

Result<void> aead_available(AeadAlgorithm algorithm) {
  if (aead_cipher(algorithm)) return {};
  return make_error(ErrorCode::unavailable,
                    std::string(aead_name(algorithm)) + ": " + crypto_library() +
                        " does not provide it (OpenSSL 3.0 has no SM4-GCM; later releases do)");
}

Result<void> aead_seal(AeadAlgorithm algorithm, ByteView key, ByteView nonce, ByteView aad,
                       ByteView plaintext, std::span<std::uint8_t> ciphertext, std::span<std::uint8_t> tag) {
  if (auto ok = aead_available(algorithm); !ok) return std::unexpected(ok.error());
  if (auto ok = check_sizes(algorithm, key, nonce, plaintext.size(), ciphertext.size(), tag.size()); !ok)
    return std::unexpected(ok.error());
  std::string context = std::string(aead_name(algorithm)) + " encryption";
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int written = 0;
  if (!ctx ||
      EVP_EncryptInit_ex2(ctx.get(), aead_cipher(algorithm), key.data(), nonce.data(), nullptr) != 1 ||
      !update_in_pieces([&](auto... a) { return EVP_EncryptUpdate(ctx.get(), a...); }, aad, nullptr) ||
      !update_in_pieces([&](auto... a) { return EVP_EncryptUpdate(ctx.get(), a...); }, plaintext,
                        ciphertext.data()) ||
      EVP_EncryptFinal_ex(ctx.get(), ciphertext.data() + ciphertext.size(), &written) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, static_cast<int>(tag.size()), tag.data()) != 1)
    return std::unexpected(openssl_error(context));
  return {};
}

Result<void> aead_open(AeadAlgorithm algorithm, ByteView key, ByteView nonce, ByteView aad,
                       ByteView ciphertext, ByteView tag, std::span<std::uint8_t> plaintext) {
  if (auto ok = aead_available(algorithm); !ok) return std::unexpected(ok.error());
  if (auto ok = check_sizes(algorithm, key, nonce, ciphertext.size(), plaintext.size(), tag.size()); !ok)
    return std::unexpected(ok.error());
  std::string context = std::string(aead_name(algorithm)) + " decryption";
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  if (!ctx ||
      EVP_DecryptInit_ex2(ctx.get(), aead_cipher(algorithm), key.data(), nonce.data(), nullptr) != 1 ||
      !update_in_pieces([&](auto... a) { return EVP_DecryptUpdate(ctx.get(), a...); }, aad, nullptr) ||
      !update_in_pieces([&](auto... a) { return EVP_DecryptUpdate(ctx.get(), a...); }, ciphertext,
                        plaintext.data()) ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, static_cast<int>(tag.size()),
                          const_cast<std::uint8_t*>(tag.data())) != 1)
    return std::unexpected(openssl_error(context));
  int written = 0;
  if (EVP_DecryptFinal_ex(ctx.get(), plaintext.data() + plaintext.size(), &written) != 1) {
    ERR_clear_error();
    secure_zero(plaintext);
    return make_error(ErrorCode::parse_error, context + ": authentication failed");
  }
  return {};
}

Result<void> sm4_available() {
  if (algorithms().sm4_ctr && algorithms().sm3) return {};
  return make_error(ErrorCode::unavailable,
                    "SM4-CTR and SM3: " + crypto_library() + " does not provide them");
}

Result<void> sm4_ctr_xor(ByteView key, ByteView counter_block, ByteView in, std::span<std::uint8_t> out) {
  if (auto ok = sm4_available(); !ok) return std::unexpected(ok.error());
  if (key.size() != k_sm4_key_bytes || counter_block.size() != 16 || in.size() != out.size())
    return make_error(ErrorCode::internal, "SM4-CTR: wrong key, counter or output size (a bug in gpuhost)");
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int written = 0;
  if (!ctx ||
      EVP_EncryptInit_ex2(ctx.get(), algorithms().sm4_ctr, key.data(), counter_block.data(), nullptr) != 1 ||
      !update_in_pieces([&](auto... a) { return EVP_EncryptUpdate(ctx.get(), a...); }, in, out.data()) ||
      EVP_EncryptFinal_ex(ctx.get(), out.data() + out.size(), &written) != 1)
    return std::unexpected(openssl_error("SM4-CTR"));
  return {};
}

}  // namespace gpuhost::platform
