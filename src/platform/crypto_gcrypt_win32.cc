#include "platform/crypto_gcrypt_win32.h"

#include <cstring>
#include <utility>
#include <vector>

#include <gcrypt.h>

#include "base/strings.h"
#include "platform/shared_library.h"

namespace gpuhost::platform::gcrypt {
namespace {

// SM4 entered libgcrypt in 1.9.0 (its NEWS file); Debian 12 ships 1.10.1.
constexpr const char* k_min_version = "1.9.0";

// The entry points gpuhost uses, resolved once from the DLL. `ready` is false when the DLL did
// not load, lacks one of them, or is too old; `problem` then says which.
struct Api {
  SharedLibrary library;
  bool ready = false;
  std::string problem;
  std::string version;
  decltype(&::gcry_strerror) strerror = nullptr;
  decltype(&::gcry_md_open) md_open = nullptr;
  decltype(&::gcry_md_setkey) md_setkey = nullptr;
  decltype(&::gcry_md_write) md_write = nullptr;
  decltype(&::gcry_md_read) md_read = nullptr;
  decltype(&::gcry_md_close) md_close = nullptr;
  decltype(&::gcry_cipher_open) cipher_open = nullptr;
  decltype(&::gcry_cipher_setkey) cipher_setkey = nullptr;
  decltype(&::gcry_cipher_setiv) cipher_setiv = nullptr;
  decltype(&::gcry_cipher_setctr) cipher_setctr = nullptr;
  decltype(&::gcry_cipher_authenticate) cipher_authenticate = nullptr;
  decltype(&::gcry_cipher_encrypt) cipher_encrypt = nullptr;
  decltype(&::gcry_cipher_decrypt) cipher_decrypt = nullptr;
  decltype(&::gcry_cipher_gettag) cipher_gettag = nullptr;
  decltype(&::gcry_cipher_checktag) cipher_checktag = nullptr;
  decltype(&::gcry_cipher_close) cipher_close = nullptr;
};

template <typename Fn>
void resolve(const SharedLibrary& library, Fn& slot, const char* name, std::vector<std::string>& missing) {
  // Win32 guarantees that GetProcAddress's pointer converts to the function it names.
  slot = reinterpret_cast<Fn>(library.symbol(name));
  if (!slot) missing.emplace_back(name);
}

Api load() {
  Api a;
  auto library = SharedLibrary::open(k_library_file);
  if (!library) {
    a.problem = library.error().message;
    return a;
  }
  a.library = std::move(*library);
  std::vector<std::string> missing;
  decltype(&::gcry_check_version) check_version = nullptr;
  decltype(&::gcry_control) control = nullptr;
  resolve(a.library, check_version, "gcry_check_version", missing);
  resolve(a.library, control, "gcry_control", missing);
  resolve(a.library, a.strerror, "gcry_strerror", missing);
  resolve(a.library, a.md_open, "gcry_md_open", missing);
  resolve(a.library, a.md_setkey, "gcry_md_setkey", missing);
  resolve(a.library, a.md_write, "gcry_md_write", missing);
  resolve(a.library, a.md_read, "gcry_md_read", missing);
  resolve(a.library, a.md_close, "gcry_md_close", missing);
  resolve(a.library, a.cipher_open, "gcry_cipher_open", missing);
  resolve(a.library, a.cipher_setkey, "gcry_cipher_setkey", missing);
  resolve(a.library, a.cipher_setiv, "gcry_cipher_setiv", missing);
  resolve(a.library, a.cipher_setctr, "gcry_cipher_setctr", missing);
  resolve(a.library, a.cipher_authenticate, "gcry_cipher_authenticate", missing);
  resolve(a.library, a.cipher_encrypt, "gcry_cipher_encrypt", missing);
  resolve(a.library, a.cipher_decrypt, "gcry_cipher_decrypt", missing);
  resolve(a.library, a.cipher_gettag, "gcry_cipher_gettag", missing);
  resolve(a.library, a.cipher_checktag, "gcry_cipher_checktag", missing);
  resolve(a.library, a.cipher_close, "gcry_cipher_close", missing);
  if (!missing.empty()) {
    a.problem = std::string(k_library_file) + " does not export " + join(missing, ", ");
    return a;
  }
  // gcry_check_version initialises the library and must come first (libgcrypt manual,
  // "Initializing the library"); no secure memory is needed for keys that live in gpuhost's
  // own buffers, which crypt/ wipes.
  const char* version = check_version(k_min_version);
  if (!version) {
    const char* found = check_version(nullptr);
    a.problem = std::string(k_library_file) + " is libgcrypt " + (found ? found : "?") + "; SM4 needs " +
                k_min_version + " or later";
    return a;
  }
  control(GCRYCTL_DISABLE_SECMEM, 0);
  control(GCRYCTL_INITIALIZATION_FINISHED, 0);
  a.version = std::string("libgcrypt ") + version;
  a.ready = true;
  return a;
}

const Api& api() {
  static const Api loaded = load();
  return loaded;
}

Error library_error(std::string_view what, gcry_error_t code) {
  return Error{ErrorCode::io_error, std::string(what) + ": libgcrypt failed: " + api().strerror(code)};
}

// Owns a libgcrypt handle; `Close` is the Api slot that frees it. Not copyable.
template <typename Handle, auto Api::*Close>
class Owned {
 public:
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (handle) (api().*Close)(handle);
  }
  Handle handle = nullptr;
};
using Md = Owned<gcry_md_hd_t, &Api::md_close>;
using Cipher = Owned<gcry_cipher_hd_t, &Api::cipher_close>;

Result<void> open_sm4(Cipher& cipher, int mode, ByteView key, std::string_view what) {
  if (auto ok = available(what); !ok) return ok;
  if (gcry_error_t e = api().cipher_open(&cipher.handle, GCRY_CIPHER_SM4, mode, 0))
    return std::unexpected(library_error(what, e));
  if (gcry_error_t e = api().cipher_setkey(cipher.handle, key.data(), key.size()))
    return std::unexpected(library_error(what, e));
  return {};
}

Result<Digest32> digest(ByteView key, bool keyed, std::initializer_list<ByteView> parts) {
  const char* what = keyed ? "HMAC-SM3" : "SM3";
  if (auto ok = available(what); !ok) return std::unexpected(ok.error());
  Md md;
  if (gcry_error_t e = api().md_open(&md.handle, GCRY_MD_SM3, keyed ? GCRY_MD_FLAG_HMAC : 0))
    return std::unexpected(library_error(what, e));
  static constexpr std::uint8_t k_empty = 0;
  if (keyed)
    if (gcry_error_t e = api().md_setkey(md.handle, key.empty() ? &k_empty : key.data(), key.size()))
      return std::unexpected(library_error(what, e));
  for (ByteView part : parts)
    if (!part.empty()) api().md_write(md.handle, part.data(), part.size());
  const unsigned char* result = api().md_read(md.handle, GCRY_MD_SM3);
  if (!result) return make_error(ErrorCode::io_error, std::string(what) + ": libgcrypt returned no digest");
  Digest32 out{};
  std::memcpy(out.data(), result, out.size());
  return out;
}

}  // namespace

Result<void> available(std::string_view what) {
  if (api().ready) return {};
  return make_error(ErrorCode::unavailable,
                    std::string(what) + ": the Windows build takes SM3/SM4 from libgcrypt, and " +
                        api().problem +
                        ". Put libgcrypt-20.dll and libgpg-error-0.dll (from gpuhost's MSI or zip) beside "
                        "gpuhost.exe, or use AES-256-GCM");
}

std::string version() {
  return api().version;
}

Result<Digest32> sm3(ByteView data) {
  return digest({}, false, {data});
}

Result<Digest32> hmac_sm3(ByteView key, std::initializer_list<ByteView> parts) {
  return digest(key, true, parts);
}

Result<void> sm4_ctr_xor(ByteView key, ByteView counter_block, ByteView in, std::span<std::uint8_t> out) {
  Cipher cipher;
  GPUHOST_TRY_VOID(open_sm4(cipher, GCRY_CIPHER_MODE_CTR, key, "SM4-CTR"));
  if (gcry_error_t e = api().cipher_setctr(cipher.handle, counter_block.data(), counter_block.size()))
    return std::unexpected(library_error("SM4-CTR", e));
  if (in.empty()) return {};
  // In place when `in` is `out` (the manual's form: a null input buffer).
  bool in_place = in.data() == out.data();
  if (gcry_error_t e = api().cipher_encrypt(cipher.handle, out.data(), out.size(),
                                            in_place ? nullptr : in.data(), in_place ? 0 : in.size()))
    return std::unexpected(library_error("SM4-CTR", e));
  return {};
}

Result<void> sm4_gcm_seal(ByteView key, ByteView nonce, ByteView aad, ByteView plaintext,
                          std::span<std::uint8_t> ciphertext, std::span<std::uint8_t> tag) {
  Cipher cipher;
  GPUHOST_TRY_VOID(open_sm4(cipher, GCRY_CIPHER_MODE_GCM, key, "SM4-GCM"));
  bool in_place = plaintext.data() == ciphertext.data();
  gcry_error_t e = api().cipher_setiv(cipher.handle, nonce.data(), nonce.size());
  if (!e && !aad.empty()) e = api().cipher_authenticate(cipher.handle, aad.data(), aad.size());
  if (!e)
    e = api().cipher_encrypt(cipher.handle, ciphertext.data(), ciphertext.size(),
                             in_place ? nullptr : plaintext.data(), in_place ? 0 : plaintext.size());
  if (!e) e = api().cipher_gettag(cipher.handle, tag.data(), tag.size());
  if (e) return std::unexpected(library_error("SM4-GCM encryption", e));
  return {};
}

Result<void> sm4_gcm_open(ByteView key, ByteView nonce, ByteView aad, ByteView ciphertext, ByteView tag,
                          std::span<std::uint8_t> plaintext) {
  Cipher cipher;
  GPUHOST_TRY_VOID(open_sm4(cipher, GCRY_CIPHER_MODE_GCM, key, "SM4-GCM"));
  bool in_place = plaintext.data() == ciphertext.data();
  gcry_error_t e = api().cipher_setiv(cipher.handle, nonce.data(), nonce.size());
  if (!e && !aad.empty()) e = api().cipher_authenticate(cipher.handle, aad.data(), aad.size());
  if (!e)
    e = api().cipher_decrypt(cipher.handle, plaintext.data(), plaintext.size(),
                             in_place ? nullptr : ciphertext.data(), in_place ? 0 : ciphertext.size());
  if (e) return std::unexpected(library_error("SM4-GCM decryption", e));
  e = api().cipher_checktag(cipher.handle, tag.data(), tag.size());
  if (gcry_err_code(e) == GPG_ERR_CHECKSUM) {
    secure_zero(plaintext);
    return make_error(ErrorCode::parse_error, "SM4-GCM decryption: authentication failed");
  }
  if (e) {
    secure_zero(plaintext);
    return std::unexpected(library_error("SM4-GCM decryption", e));
  }
  return {};
}

}  // namespace gpuhost::platform::gcrypt
