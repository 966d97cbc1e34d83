#include "supervise/remote_probe.h"

#include <string>

#include "base/strings.h"
#include "crypt/cipher_suite.h"
#include "crypt/encryption_key.h"
#include "platform/environment.h"
#include "store/store.h"

namespace gpuhost::supervise {
namespace {

std::string redacted_message(const JobSpec& spec, const std::string& message) {
  return replace_all(message, spec.remote, redact_store_url(spec.remote));
}

}  // namespace

Result<crypt::CipherSuite> job_cipher_suite(const std::string& encrypt_flag) {
  // The suite's own message names it ("--encrypt sm4-gcm: ...").
  auto suite = crypt::choose_suite(encrypt_flag);
  if (suite) return *suite;
  Error error = suite.error();
  if (error.code == ErrorCode::unavailable) error.code = ErrorCode::unsupported;
  return std::unexpected(with_context(error, error.code == ErrorCode::unsupported
                                                 ? "checking the job: unsupported on this build"
                                                 : "checking the job"));
}

Result<RemoteSettings> load_remote_settings(const JobSpec& spec) {
  RemoteSettings settings;
  const std::string url = redact_store_url(spec.remote);
  auto store = store::open_store(spec.remote);
  if (!store)
    return make_error(ErrorCode::invalid_argument, "--remote " + url + ": " + redacted_message(spec, store.error().message));
  settings.store = std::move(*store);
  if (!spec.encrypt.empty()) settings.suite = GPUHOST_TRY(job_cipher_suite(spec.encrypt));
  const bool have_key_source = spec.encryption_key_file || platform::get_env(crypt::k_key_file_env) ||
                               platform::get_env(crypt::k_key_env);
  if (!spec.encrypt.empty() || have_key_source) {
    auto key = crypt::load_encryption_key(spec.encryption_key_file);
    if (!key) return make_error(ErrorCode::invalid_argument, "the encryption key: " + key.error().message);
    settings.key.emplace(std::move(*key));
  }
  return settings;
}

Result<void> check_remote_settings(const JobSpec& spec) {
  if (spec.remote.empty()) return {};
  if (auto settings = load_remote_settings(spec); !settings) return std::unexpected(settings.error());
  return {};
}

Result<void> probe_remote(const JobSpec& spec, std::chrono::milliseconds budget) {
  if (spec.remote.empty()) return {};
  store::OpenOptions options;
  options.s3.retry.max_attempts = 2;
  options.s3.retry.base_delay = std::chrono::milliseconds(200);
  options.s3.connect_timeout = std::max(budget / 4, std::chrono::milliseconds(500));
  options.s3.stall_timeout = std::max(budget / 4, std::chrono::milliseconds(500));
  auto opened = store::open_store(spec.remote, options);
  if (!opened) return std::unexpected(opened.error());
  store::ObjectStore& store = **opened;
  const std::string where = store.describe();
  auto fail = [&](const char* what, const Error& error) {
    return make_error(error.code, std::string(what) + " " + redacted_message(spec, where) + ": " +
                                      redacted_message(spec, error.message));
  };
  if (auto listed = store.list(".gpuhost-probe", std::nullopt, 1); !listed) return fail("listing", listed.error());
  const std::string key = ".gpuhost-probe-" + random_hex(12);
  const std::string body = "gpuhost run checks that it can write here; this object is deleted at once\n";
  if (auto put = store.put(key, store::Payload::from_memory(body)); !put) return fail("writing a probe object to", put.error());
  if (auto removed = store.remove(key); !removed) return fail("deleting the probe object from", removed.error());
  return {};
}

}  // namespace gpuhost::supervise
