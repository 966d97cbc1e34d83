#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "base/error.h"
#include "crypt/cipher_suite.h"
#include "crypt/encryption_key.h"
#include "store/object_store.h"
#include "supervise/job.h"

namespace gpuhost::supervise {

// What `gpuhost run` checks of a job's remote before anything exists (no job directory, no
// lock, no trainer), so a typo costs nothing and an unusable remote is known before training.

// A job's remote settings made into the things they name: the store (not contacted yet), the
// encryption key (from --encryption-key-file, GPUHOST_ENCRYPTION_KEY_FILE or
// GPUHOST_ENCRYPTION_KEY) and the suite. The one place they are read, for the check below and
// for the mirror (job_mirror.cc). Errors: invalid_argument or unsupported, with the setting named.
struct RemoteSettings {
  std::unique_ptr<store::ObjectStore> store;
  std::optional<crypt::EncryptionKey> key;  // also without --encrypt: a key only for reading what is there
  std::optional<crypt::CipherSuite> suite;  // set with --encrypt
};
[[nodiscard]] Result<RemoteSettings> load_remote_settings(const JobSpec& spec);

// The suite `--encrypt NAME` asks for, checked against this build. A name this build cannot run
// (sm4-gcm on OpenSSL 3.0, SM4 on a Windows install without libgcrypt-20.dll) is `unsupported`,
// the command line's fault, as is an unknown name (invalid_argument); the message names the fix.
[[nodiscard]] Result<crypt::CipherSuite> job_cipher_suite(const std::string& encrypt_flag);

// The settings alone: the URL parses into a store, an encryption suite exists on this build, a
// key file or key variable given is readable and holds a key. invalid_argument or unsupported
// (exit 2), with the setting named. A spec with no remote passes.
[[nodiscard]] Result<void> check_remote_settings(const JobSpec& spec);

// The store itself: it can be listed, and a small probe object can be written and deleted at
// its prefix (a bucket that is missing, credentials that are refused, an endpoint that does not
// answer). Retries are few and short, so an unreachable endpoint is reported within about
// `budget`. Errors say what failed (unavailable / permission_denied / io_error / timeout), with
// secrets of the URL redacted. A spec with no remote passes.
[[nodiscard]] Result<void> probe_remote(const JobSpec& spec, std::chrono::milliseconds budget);

}  // namespace gpuhost::supervise
