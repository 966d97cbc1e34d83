#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "store/store_url.h"

namespace gpuhost::store {

// A secret string (secret access key, session token). It has no formatting, streaming or
// conversion: the only way to the bytes is reveal(), which the signer calls. Nothing that builds
// a message or a log line should ever call it.
class Secret {
 public:
  Secret() = default;
  explicit Secret(std::string value) : m_value(std::move(value)) {}
  [[nodiscard]] const std::string& reveal() const { return m_value; }
  [[nodiscard]] bool empty() const { return m_value.empty(); }

 private:
  std::string m_value;
};

struct Credentials {
  std::string access_key_id;  // not secret: it travels in every Authorization header
  Secret secret_access_key;
  Secret session_token;  // temporary credentials (STS, instance role); empty for long-term keys
  std::optional<std::chrono::system_clock::time_point> expiration;
  // Where they came from, for messages: "environment (AWS_ACCESS_KEY_ID)", "profile \"ci\" in
  // /home/u/.aws/credentials", "instance role \"trainer\" (IMDSv2)".
  std::string source;
};

// Gives the credentials to sign with. Implementations are thread-safe.
class CredentialProvider {
 public:
  virtual ~CredentialProvider() = default;
  // Current credentials; refreshes expiring ones. Errors say which sources were tried.
  [[nodiscard]] virtual Result<Credentials> credentials() = 0;
  // The server rejected the credentials as expired (ExpiredToken): fetch new ones next time.
  virtual void invalidate() = 0;
};

// Fixed credentials (tests, or a caller that has its own).
class StaticCredentials final : public CredentialProvider {
 public:
  explicit StaticCredentials(Credentials credentials) : m_credentials(std::move(credentials)) {}
  Result<Credentials> credentials() override { return m_credentials; }
  void invalidate() override {}

 private:
  const Credentials m_credentials;
};

// Options of the default chain. Empty fields mean "from the environment".
struct ChainOptions {
  Provider provider = Provider::aws;  // Alibaba's variables are tried first for oss
  std::string profile;                // else AWS_PROFILE, else "default"
  // IMDS base URL, else AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254.
  std::string imds_endpoint;
  std::chrono::milliseconds imds_timeout{1000};  // each IMDS call; off EC2 the chain fails fast
};

// The chain AWS users expect (research/05 §5.4; docs.aws.amazon.com/cli/latest/userguide/
// cli-configure-envvars.html and cli-configure-files.html):
//   1. environment: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN), and
//      ALIBABA_CLOUD_ACCESS_KEY_ID + ALIBABA_CLOUD_ACCESS_KEY_SECRET (+ ALIBABA_CLOUD_SECURITY_TOKEN);
//   2. the profile (AWS_PROFILE or "default") in the shared credentials file
//      (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials), then in the config file
//      (AWS_CONFIG_FILE or ~/.aws/config, section "[profile NAME]" or "[default]");
//   3. for AWS, MinIO and custom endpoints: the instance role through IMDSv2, unless
//      AWS_EC2_METADATA_DISABLED=true.
// Credentials with an expiration are refreshed five minutes before it. Thread-safe.
class CredentialChain final : public CredentialProvider {
 public:
  explicit CredentialChain(ChainOptions options) : m_options(std::move(options)) {}
  Result<Credentials> credentials() override;
  void invalidate() override;

 private:
  const ChainOptions m_options;
  std::mutex m_mutex;
  // Guarded by m_mutex:
  std::optional<Credentials> m_cached;
};

// One pass over the chain, without caching. not_found when no source has credentials (the
// message lists what was tried and how to provide them); invalid_argument for half-set
// variables or a named profile that does not exist.
[[nodiscard]] Result<Credentials> resolve_credentials(const ChainOptions& options);

// The region the AWS CLI would use: AWS_REGION, AWS_DEFAULT_REGION, then `region` of the profile
// in the config file; empty when none is set.
[[nodiscard]] std::string default_region(std::string_view profile = {});

// "AKIA…WXYZ": enough of an access key id to tell keys apart in messages.
[[nodiscard]] std::string redact_key_id(std::string_view access_key_id);

}  // namespace gpuhost::store
