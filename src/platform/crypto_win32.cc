// crypto.h on Windows CNG (bcrypt.dll): SHA-256, HMAC-SHA256, MD5, the system RNG and AES-256-GCM.
// CNG has no SM3 or SM4: those come from libgcrypt (crypto_gcrypt_win32.h), loaded at first use.
// Order matters: bcrypt.h needs the types windows.h defines.
// clang-format off
#include <windows.h>
#include <bcrypt.h>
// clang-format on

#include <algorithm>
#include <cstdio>
#include <memory>
#include <new>
#include <utility>

#include "platform/crypto.h"
#include "platform/crypto_gcrypt_win32.h"

namespace gpuhost::platform {
namespace {

// BCryptDecrypt's answer to a wrong GCM tag (learn.microsoft.com, BCryptDecrypt "Return value").
constexpr NTSTATUS k_status_auth_tag_mismatch = static_cast<NTSTATUS>(0xC000A002L);

// BCrypt lengths are ULONG; pieces of 1 GiB keep any span size safe for hashing.
constexpr std::size_t k_max_piece = std::size_t{1} << 30;

Error cng_error(std::string_view context, NTSTATUS status) {
  char code[16];
  std::snprintf(code, sizeof code, "0x%08lX", static_cast<unsigned long>(status));
  return Error{ErrorCode::io_error, std::string(context) + ": CNG failed with NTSTATUS " + code};
}

// Algorithm providers opened once and shared: CNG algorithm handles may be used from several
// threads at once (learn.microsoft.com, "CNG Features: Threading"). A null member failed to open.
struct Providers {
  BCRYPT_ALG_HANDLE sha256 = nullptr;
  BCRYPT_ALG_HANDLE hmac_sha256 = nullptr;
  BCRYPT_ALG_HANDLE md5 = nullptr;
  BCRYPT_ALG_HANDLE aes_gcm = nullptr;
};

const Providers& providers() {
  static const Providers opened = [] {
    Providers p;
    if (!BCRYPT_SUCCESS(BCryptOpenAlgorithmProvider(&p.sha256, BCRYPT_SHA256_ALGORITHM, nullptr, 0)))
      p.sha256 = nullptr;
    if (!BCRYPT_SUCCESS(BCryptOpenAlgorithmProvider(&p.hmac_sha256, BCRYPT_SHA256_ALGORITHM, nullptr,
                                                    BCRYPT_ALG_HANDLE_HMAC_FLAG)))
      p.hmac_sha256 = nullptr;
    if (!BCRYPT_SUCCESS(BCryptOpenAlgorithmProvider(&p.md5, BCRYPT_MD5_ALGORITHM, nullptr, 0)))
      p.md5 = nullptr;
    if (BCRYPT_SUCCESS(BCryptOpenAlgorithmProvider(&p.aes_gcm, BCRYPT_AES_ALGORITHM, nullptr, 0))) {
      auto* mode = reinterpret_cast<PUCHAR>(const_cast<wchar_t*>(BCRYPT_CHAIN_MODE_GCM));
      if (!BCRYPT_SUCCESS(
              BCryptSetProperty(p.aes_gcm, BCRYPT_CHAINING_MODE, mode, sizeof(BCRYPT_CHAIN_MODE_GCM), 0))) {
        BCryptCloseAlgorithmProvider(p.aes_gcm, 0);
        p.aes_gcm = nullptr;
      }
    } else {
      p.aes_gcm = nullptr;
    }
    return p;
  }();
  return opened;
}

// Own a CNG hash or key handle. Move-only.
struct HashHandle {
  BCRYPT_HASH_HANDLE handle = nullptr;
  HashHandle() = default;
  HashHandle(HashHandle&& o) noexcept : handle(std::exchange(o.handle, nullptr)) {}
  HashHandle& operator=(HashHandle&&) = delete;
  ~HashHandle() {
    if (handle) BCryptDestroyHash(handle);
  }
};
struct KeyHandle {
  BCRYPT_KEY_HANDLE handle = nullptr;
  KeyHandle() = default;
  KeyHandle(KeyHandle&& o) noexcept : handle(std::exchange(o.handle, nullptr)) {}
  KeyHandle& operator=(KeyHandle&&) = delete;
  ~KeyHandle() {
    if (handle) BCryptDestroyKey(handle);
  }
};

NTSTATUS hash_data(BCRYPT_HASH_HANDLE handle, ByteView data) {
  for (std::size_t done = 0; done < data.size();) {
    std::size_t n = std::min(data.size() - done, k_max_piece);
    NTSTATUS status =
        BCryptHashData(handle, const_cast<PUCHAR>(data.data() + done), static_cast<ULONG>(n), 0);
    if (!BCRYPT_SUCCESS(status)) return status;
    done += n;
  }
  return 0;
}

Result<void> check_aead(AeadAlgorithm algorithm, ByteView key, ByteView nonce, std::size_t in,
                        std::size_t out, std::size_t tag) {
  GPUHOST_TRY_VOID(aead_available(algorithm));
  const char* name = algorithm == AeadAlgorithm::sm4_gcm ? "SM4-GCM" : "AES-256-GCM";
  if (key.size() != aead_key_bytes(algorithm) || nonce.size() != k_aead_nonce_bytes || in != out ||
      tag != k_aead_tag_bytes)
    return make_error(ErrorCode::internal,
                      std::string(name) + ": wrong key, nonce, tag or output size (a bug in gpuhost)");
  if (in > 0xFFFFFFFFu)
    return make_error(ErrorCode::invalid_argument, std::string(name) + ": more than 4 GiB in one message");
  return {};
}

Result<KeyHandle> aes_key(ByteView key) {
  KeyHandle k;
  NTSTATUS status =
      BCryptGenerateSymmetricKey(providers().aes_gcm, &k.handle, nullptr, 0, const_cast<PUCHAR>(key.data()),
                                 static_cast<ULONG>(key.size()), 0);
  if (!BCRYPT_SUCCESS(status)) return std::unexpected(cng_error("AES-256-GCM key", status));
  return k;
}

BCRYPT_AUTHENTICATED_CIPHER_MODE_INFO gcm_info(ByteView nonce, ByteView aad, std::uint8_t* tag) {
  BCRYPT_AUTHENTICATED_CIPHER_MODE_INFO info;
  BCRYPT_INIT_AUTH_MODE_INFO(info);
  info.pbNonce = const_cast<PUCHAR>(nonce.data());
  info.cbNonce = static_cast<ULONG>(nonce.size());
  info.pbAuthData = aad.empty() ? nullptr : const_cast<PUCHAR>(aad.data());
  info.cbAuthData = static_cast<ULONG>(aad.size());
  info.pbTag = tag;
  info.cbTag = static_cast<ULONG>(k_aead_tag_bytes);
  return info;
}

}  // namespace

Sha256::Sha256() {
  auto* handle = new HashHandle;
  if (!providers().sha256 ||
      !BCRYPT_SUCCESS(BCryptCreateHash(providers().sha256, &handle->handle, nullptr, 0, nullptr, 0, 0))) {
    delete handle;
    throw std::bad_alloc();
  }
  m_state = handle;
}
Sha256::Sha256(Sha256&& other) noexcept : m_state(std::exchange(other.m_state, nullptr)) {}
Sha256& Sha256::operator=(Sha256&& other) noexcept {
  if (this != &other) {
    delete static_cast<HashHandle*>(m_state);
    m_state = std::exchange(other.m_state, nullptr);
  }
  return *this;
}
Sha256::~Sha256() {
  delete static_cast<HashHandle*>(m_state);
}

void Sha256::update(const void* data, std::size_t bytes) {
  hash_data(static_cast<HashHandle*>(m_state)->handle,
            ByteView(static_cast<const std::uint8_t*>(data), bytes));
}

Sha256Digest Sha256::finish() {
  Sha256Digest out{};
  BCryptFinishHash(static_cast<HashHandle*>(m_state)->handle, out.data(), static_cast<ULONG>(out.size()), 0);
  return out;
}

std::string crypto_library() {
  std::string sm = gcrypt::version();
  return sm.empty() ? "Windows CNG (bcrypt.dll)" : "Windows CNG (bcrypt.dll) and " + sm + " for SM3/SM4";
}

Result<Md5Digest> md5(std::span<const std::uint8_t> data) {
  if (!providers().md5) return make_error(ErrorCode::unavailable, "MD5: CNG could not open its MD5 provider");
  HashHandle h;
  NTSTATUS status = BCryptCreateHash(providers().md5, &h.handle, nullptr, 0, nullptr, 0, 0);
  if (!BCRYPT_SUCCESS(status)) return std::unexpected(cng_error("MD5", status));
  if (status = hash_data(h.handle, data); !BCRYPT_SUCCESS(status))
    return std::unexpected(cng_error("MD5", status));
  Md5Digest out{};
  status = BCryptFinishHash(h.handle, out.data(), static_cast<ULONG>(out.size()), 0);
  if (!BCRYPT_SUCCESS(status)) return std::unexpected(cng_error("MD5", status));
  return out;
}

Result<Md5> Md5::create() {
  if (!providers().md5) return make_error(ErrorCode::unavailable, "MD5: CNG could not open its MD5 provider");
  auto handle = std::make_unique<HashHandle>();
  NTSTATUS status = BCryptCreateHash(providers().md5, &handle->handle, nullptr, 0, nullptr, 0, 0);
  if (!BCRYPT_SUCCESS(status)) return std::unexpected(cng_error("MD5", status));
  return Md5(handle.release());
}
Md5::Md5(Md5&& other) noexcept : m_state(std::exchange(other.m_state, nullptr)) {}
Md5& Md5::operator=(Md5&& other) noexcept {
  if (this != &other) {
    delete static_cast<HashHandle*>(m_state);
    m_state = std::exchange(other.m_state, nullptr);
  }
  return *this;
}
Md5::~Md5() {
  delete static_cast<HashHandle*>(m_state);
}
void Md5::update(const void* data, std::size_t bytes) {
  hash_data(static_cast<HashHandle*>(m_state)->handle, ByteView(static_cast<const std::uint8_t*>(data), bytes));
}
Md5Digest Md5::finish() {
  Md5Digest out{};
  BCryptFinishHash(static_cast<HashHandle*>(m_state)->handle, out.data(), static_cast<ULONG>(out.size()), 0);
  return out;
}

Result<void> random_bytes(std::span<std::uint8_t> out) {
  for (std::size_t done = 0; done < out.size();) {
    std::size_t n = std::min(out.size() - done, k_max_piece);
    NTSTATUS status =
        BCryptGenRandom(nullptr, out.data() + done, static_cast<ULONG>(n), BCRYPT_USE_SYSTEM_PREFERRED_RNG);
    if (!BCRYPT_SUCCESS(status))
      return std::unexpected(cng_error("reading random bytes (BCryptGenRandom)", status));
    done += n;
  }
  return {};
}

void secure_zero(std::span<std::uint8_t> bytes) {
  SecureZeroMemory(bytes.data(), bytes.size());
}

Result<void> hash_available(HashAlgorithm algorithm) {
  if (algorithm == HashAlgorithm::sm3) return gcrypt::available("SM3");
  if (!providers().sha256 || !providers().hmac_sha256)
    return make_error(ErrorCode::unavailable, "SHA-256: CNG could not open its SHA-256 provider");
  return {};
}

Result<Digest32> hash(HashAlgorithm algorithm, ByteView data) {
  if (algorithm == HashAlgorithm::sm3) return gcrypt::sm3(data);
  if (auto ok = hash_available(algorithm); !ok) return std::unexpected(ok.error());
  Sha256 hasher;
  hasher.update(data.data(), data.size());
  return hasher.finish();
}

Result<Digest32> hmac(HashAlgorithm algorithm, ByteView key, std::initializer_list<ByteView> parts) {
  if (algorithm == HashAlgorithm::sm3) return gcrypt::hmac_sm3(key, parts);
  if (auto ok = hash_available(algorithm); !ok) return std::unexpected(ok.error());
  static constexpr std::uint8_t k_empty = 0;
  HashHandle h;
  NTSTATUS status = BCryptCreateHash(providers().hmac_sha256, &h.handle, nullptr, 0,
                                     const_cast<PUCHAR>(key.empty() ? &k_empty : key.data()),
                                     static_cast<ULONG>(key.size()), 0);
  if (!BCRYPT_SUCCESS(status)) return std::unexpected(cng_error("HMAC-SHA256", status));
  for (ByteView part : parts)
    if (NTSTATUS s = hash_data(h.handle, part); !BCRYPT_SUCCESS(s))
      return std::unexpected(cng_error("HMAC-SHA256", s));
  Digest32 out{};
  status = BCryptFinishHash(h.handle, out.data(), static_cast<ULONG>(out.size()), 0);
  if (!BCRYPT_SUCCESS(status)) return std::unexpected(cng_error("HMAC-SHA256", status));
  return out;
}

std::size_t aead_key_bytes(AeadAlgorithm algorithm) {
  return algorithm == AeadAlgorithm::sm4_gcm ? k_sm4_key_bytes : 32;
}

Result<void> aead_available(AeadAlgorithm algorithm) {
  if (algorithm == AeadAlgorithm::sm4_gcm) return gcrypt::available("SM4-GCM");
  if (!providers().aes_gcm)
    return make_error(ErrorCode::unavailable, "AES-256-GCM: CNG could not open its AES-GCM provider");
  return {};
}

Result<void> aead_seal(AeadAlgorithm algorithm, ByteView key, ByteView nonce, ByteView aad,
                       ByteView plaintext, std::span<std::uint8_t> ciphertext, std::span<std::uint8_t> tag) {
  if (auto ok = check_aead(algorithm, key, nonce, plaintext.size(), ciphertext.size(), tag.size()); !ok)
    return std::unexpected(ok.error());
  if (algorithm == AeadAlgorithm::sm4_gcm)
    return gcrypt::sm4_gcm_seal(key, nonce, aad, plaintext, ciphertext, tag);
  KeyHandle k = GPUHOST_TRY(aes_key(key));
  BCRYPT_AUTHENTICATED_CIPHER_MODE_INFO info = gcm_info(nonce, aad, tag.data());
  ULONG written = 0;
  NTSTATUS status =
      BCryptEncrypt(k.handle, const_cast<PUCHAR>(plaintext.data()), static_cast<ULONG>(plaintext.size()),
                    &info, nullptr, 0, ciphertext.data(), static_cast<ULONG>(ciphertext.size()), &written, 0);
  if (!BCRYPT_SUCCESS(status)) return std::unexpected(cng_error("AES-256-GCM encryption", status));
  return {};
}

Result<void> aead_open(AeadAlgorithm algorithm, ByteView key, ByteView nonce, ByteView aad,
                       ByteView ciphertext, ByteView tag, std::span<std::uint8_t> plaintext) {
  if (auto ok = check_aead(algorithm, key, nonce, ciphertext.size(), plaintext.size(), tag.size()); !ok)
    return std::unexpected(ok.error());
  if (algorithm == AeadAlgorithm::sm4_gcm)
    return gcrypt::sm4_gcm_open(key, nonce, aad, ciphertext, tag, plaintext);
  KeyHandle k = GPUHOST_TRY(aes_key(key));
  BCRYPT_AUTHENTICATED_CIPHER_MODE_INFO info = gcm_info(nonce, aad, const_cast<std::uint8_t*>(tag.data()));
  ULONG written = 0;
  NTSTATUS status =
      BCryptDecrypt(k.handle, const_cast<PUCHAR>(ciphertext.data()), static_cast<ULONG>(ciphertext.size()),
                    &info, nullptr, 0, plaintext.data(), static_cast<ULONG>(plaintext.size()), &written, 0);
  if (status == k_status_auth_tag_mismatch) {
    secure_zero(plaintext);
    return make_error(ErrorCode::parse_error, "AES-256-GCM decryption: authentication failed");
  }
  if (!BCRYPT_SUCCESS(status)) return std::unexpected(cng_error("AES-256-GCM decryption", status));
  return {};
}

Result<void> sm4_available() {
  return gcrypt::available("SM4-CTR and SM3");
}

Result<void> sm4_ctr_xor(ByteView key, ByteView counter_block, ByteView in, std::span<std::uint8_t> out) {
  GPUHOST_TRY_VOID(sm4_available());
  if (key.size() != k_sm4_key_bytes || counter_block.size() != 16 || in.size() != out.size())
    return make_error(ErrorCode::internal, "SM4-CTR: wrong key, counter or output size (a bug in gpuhost)");
  return gcrypt::sm4_ctr_xor(key, counter_block, in, out);
}

}  // namespace gpuhost::platform
