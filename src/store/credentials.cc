#include "store/credentials.h"

#include <map>
#include <vector>

#include "base/json.h"
#include "base/strings.h"
#include "net/http_client.h"
#include "platform/environment.h"
#include "platform/files.h"
#include "store/s3_protocol.h"

namespace gpuhost::store {
namespace {

using Clock = std::chrono::system_clock;
using Section = std::map<std::string, std::string>;
using IniFile = std::map<std::string, Section>;

constexpr auto k_refresh_margin = std::chrono::minutes(5);

std::optional<std::string> env(std::string_view name) {
  auto value = platform::get_env(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

std::filesystem::path home_directory() {
  if (auto home = env("HOME")) return *home;
  if (auto profile = env("USERPROFILE")) return *profile;  // Windows: where the AWS CLI looks for ~
  return {};
}

// The AWS shared files are INI: "[section]" headers, "key = value" lines, '#' and ';' comments;
// indented lines continue a nested value (s3 = ...) and are skipped here.
IniFile parse_ini(std::string_view text) {
  IniFile ini;
  Section* current = nullptr;
  for (const std::string& raw : split_lines(text)) {
    if (!raw.empty() && (raw[0] == ' ' || raw[0] == '\t')) continue;
    std::string_view line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      current = &ini[std::string(trim(line.substr(1, line.size() - 2)))];
      continue;
    }
    std::size_t eq = line.find('=');
    if (!current || eq == std::string_view::npos) continue;
    (*current)[to_lower(trim(line.substr(0, eq)))] = std::string(trim(line.substr(eq + 1)));
  }
  return ini;
}

struct SharedFile {
  std::filesystem::path path;
  std::optional<IniFile> ini;  // nullopt: the file does not exist
};

Result<SharedFile> load_shared_file(const char* variable, const char* default_name) {
  SharedFile file;
  if (auto path = env(variable)) {
    file.path = *path;
  } else {
    std::filesystem::path home = home_directory();
    if (home.empty()) return file;
    file.path = home / ".aws" / default_name;
  }
  auto text = platform::read_file(file.path, 1u << 20);
  if (!text) {
    if (text.error().code == ErrorCode::not_found) return file;
    return std::unexpected(with_context(text.error(), "reading AWS shared file"));
  }
  file.ini = parse_ini(*text);
  return file;
}

const Section* find_section(const SharedFile& file, const std::string& name, bool config_style) {
  if (!file.ini) return nullptr;
  // The config file names profiles "[profile NAME]"; "[default]" stays bare (and the CLI also
  // reads "[profile default]").
  std::vector<std::string> candidates;
  if (config_style) {
    candidates.push_back("profile " + name);
    if (name == "default") candidates.push_back("default");
  } else {
    candidates.push_back(name);
  }
  for (const std::string& c : candidates)
    if (auto it = file.ini->find(c); it != file.ini->end()) return &it->second;
  return nullptr;
}

std::optional<std::string> get(const Section& s, const char* key) {
  auto it = s.find(key);
  if (it == s.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// nullopt: this source has nothing; an error: it is half set.
Result<std::optional<Credentials>> from_environment(const char* id_name, const char* secret_name,
                                                    const char* token_name) {
  auto id = env(id_name);
  auto secret = env(secret_name);
  if (!id && !secret) return std::optional<Credentials>();
  if (!id || !secret)
    return make_error(ErrorCode::invalid_argument, std::string("reading credentials from the environment: ") +
                                                       (id ? id_name : secret_name) + " is set but " +
                                                       (id ? secret_name : id_name) +
                                                       " is not; set both or neither");
  Credentials c;
  c.access_key_id = *id;
  c.secret_access_key = Secret(*secret);
  if (auto token = env(token_name)) c.session_token = Secret(*token);
  c.source = std::string("environment (") + id_name + ")";
  return std::optional<Credentials>(std::move(c));
}

Result<std::optional<Credentials>> from_section(const Section& s, const std::string& profile,
                                                const std::filesystem::path& path) {
  auto id = get(s, "aws_access_key_id");
  auto secret = get(s, "aws_secret_access_key");
  if (!id && !secret) return std::optional<Credentials>();
  std::string where = "profile \"" + profile + "\" in " + path.string();
  if (!id || !secret)
    return make_error(ErrorCode::invalid_argument, "reading credentials from " + where + ": " +
                                                       (id ? "aws_secret_access_key" : "aws_access_key_id") +
                                                       " is missing");
  Credentials c;
  c.access_key_id = *id;
  c.secret_access_key = Secret(*secret);
  if (auto token = get(s, "aws_session_token")) c.session_token = Secret(*token);
  c.source = where;
  return std::optional<Credentials>(std::move(c));
}

// IMDSv2 (research/05 §5.4): PUT /latest/api/token, then the role name, then its credentials.
Result<Credentials> from_instance_role(const ChainOptions& options) {
  std::string base = options.imds_endpoint;
  if (base.empty()) base = env("AWS_EC2_METADATA_SERVICE_ENDPOINT").value_or("http://169.254.169.254");
  while (!base.empty() && base.back() == '/') base.pop_back();
  auto call = [&](std::string method, std::string path, net::HttpHeaders headers) {
    net::HttpRequest request;
    request.method = std::move(method);
    request.url = base + path;
    request.headers = std::move(headers);
    request.timeout = options.imds_timeout;
    request.connect_timeout = options.imds_timeout;
    request.max_body_bytes = 64 * 1024;
    return net::http_request(request);
  };
  std::string what = "asking the instance metadata service at " + base + " for role credentials";
  auto token = call("PUT", "/latest/api/token", {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}});
  if (!token) return std::unexpected(with_context(token.error(), what));
  if (token->status != 200)
    return make_error(ErrorCode::not_found,
                      what + ": the token request answered HTTP " + std::to_string(token->status));
  net::HttpHeaders auth = {{"X-aws-ec2-metadata-token", std::string(trim(token->body))}};

  auto roles = call("GET", "/latest/meta-data/iam/security-credentials/", auth);
  if (!roles) return std::unexpected(with_context(roles.error(), what));
  if (roles->status == 404)
    return make_error(ErrorCode::not_found, what + ": the instance has no IAM role attached");
  if (roles->status != 200)
    return make_error(ErrorCode::io_error,
                      what + ": listing roles answered HTTP " + std::to_string(roles->status));
  auto lines = split_lines(roles->body);
  std::string role = lines.empty() ? "" : std::string(trim(lines.front()));
  if (role.empty()) return make_error(ErrorCode::not_found, what + ": the instance has no IAM role attached");

  auto answer = call("GET", "/latest/meta-data/iam/security-credentials/" + role, auth);
  if (!answer) return std::unexpected(with_context(answer.error(), what));
  if (answer->status != 200)
    return make_error(ErrorCode::io_error,
                      what + ": role \"" + role + "\" answered HTTP " + std::to_string(answer->status));
  // The body holds the secret: never quote it or the parser's message about it.
  auto json = json::parse(answer->body);
  if (!json || !json->is_object())
    return make_error(ErrorCode::parse_error,
                      what + ": the answer for role \"" + role + "\" is not a JSON object");
  std::string code = json->get_string("Code", "Success");
  if (code != "Success")
    return make_error(ErrorCode::io_error, what + ": role \"" + role + "\" answered Code " + code);
  Credentials c;
  c.access_key_id = json->get_string("AccessKeyId");
  c.secret_access_key = Secret(json->get_string("SecretAccessKey"));
  c.session_token = Secret(json->get_string("Token"));
  if (c.access_key_id.empty() || c.secret_access_key.empty())
    return make_error(ErrorCode::parse_error,
                      what + ": the answer for role \"" + role + "\" lacks AccessKeyId or SecretAccessKey");
  if (auto expiration = json->find("Expiration"); expiration && expiration->is_string())
    c.expiration = parse_iso8601_utc(expiration->as_string());
  c.source = "instance role \"" + role + "\" (IMDSv2 at " + base + ")";
  return c;
}

std::string chosen_profile(const ChainOptions& options, bool* explicit_choice) {
  if (!options.profile.empty()) {
    *explicit_choice = true;
    return options.profile;
  }
  if (auto p = env("AWS_PROFILE")) {
    *explicit_choice = true;
    return *p;
  }
  *explicit_choice = false;
  return "default";
}

}  // namespace

std::string redact_key_id(std::string_view id) {
  if (id.size() < 12) return "****";
  return std::string(id.substr(0, 4)) + "…" + std::string(id.substr(id.size() - 4));
}

std::string default_region(std::string_view profile) {
  if (auto r = env("AWS_REGION")) return *r;
  if (auto r = env("AWS_DEFAULT_REGION")) return *r;
  ChainOptions options;
  options.profile = std::string(profile);
  bool explicit_choice = false;
  std::string name = chosen_profile(options, &explicit_choice);
  auto config = load_shared_file("AWS_CONFIG_FILE", "config");
  if (!config) return {};
  if (const Section* s = find_section(*config, name, true))
    if (auto region = get(*s, "region")) return *region;
  return {};
}

Result<Credentials> resolve_credentials(const ChainOptions& options) {
  std::vector<std::string> tried;

  // 1. Environment. OSS users set Alibaba's names (help.aliyun.com, "Configure access
  //    credentials"), so those come first for oss.
  auto aws_env = [] {
    return from_environment("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN");
  };
  auto alibaba_env = [] {
    return from_environment("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET",
                            "ALIBABA_CLOUD_SECURITY_TOKEN");
  };
  bool oss = options.provider == Provider::oss;
  auto first = GPUHOST_TRY(oss ? alibaba_env() : aws_env());
  if (first) return std::move(*first);
  auto second = GPUHOST_TRY(oss ? aws_env() : alibaba_env());
  if (second) return std::move(*second);
  tried.push_back(
      "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and ALIBABA_CLOUD_ACCESS_KEY_ID/"
      "ALIBABA_CLOUD_ACCESS_KEY_SECRET are not set");

  // 2. Shared files: the credentials file wins over the config file for the same profile.
  bool explicit_profile = false;
  std::string profile = chosen_profile(options, &explicit_profile);
  SharedFile credentials_file = GPUHOST_TRY(load_shared_file("AWS_SHARED_CREDENTIALS_FILE", "credentials"));
  SharedFile config_file = GPUHOST_TRY(load_shared_file("AWS_CONFIG_FILE", "config"));
  const Section* in_credentials = find_section(credentials_file, profile, false);
  const Section* in_config = find_section(config_file, profile, true);
  if (in_credentials)
    if (auto c = GPUHOST_TRY(from_section(*in_credentials, profile, credentials_file.path)))
      return std::move(*c);
  if (in_config)
    if (auto c = GPUHOST_TRY(from_section(*in_config, profile, config_file.path))) return std::move(*c);
  if (explicit_profile && !in_credentials && !in_config)
    return make_error(ErrorCode::invalid_argument,
                      "finding credentials: profile \"" + profile + "\" (from " +
                          (options.profile.empty() ? "AWS_PROFILE" : "the options") + ") is in neither " +
                          credentials_file.path.string() + " nor " + config_file.path.string());
  if (in_credentials || in_config)
    tried.push_back("profile \"" + profile +
                    "\" has no aws_access_key_id/aws_secret_access_key (role_arn, "
                    "sso_* and credential_process are not supported)");
  else
    tried.push_back("no profile \"" + profile + "\" in " + credentials_file.path.string() + " or " +
                    config_file.path.string());

  // 3. Instance role, where an EC2 metadata service can exist: not for the other clouds, whose
  //    metadata services have other addresses and formats.
  bool imds_applies = options.provider == Provider::aws || options.provider == Provider::minio ||
                      options.provider == Provider::custom;
  if (imds_applies && to_lower(env("AWS_EC2_METADATA_DISABLED").value_or("")) != "true") {
    auto role = from_instance_role(options);
    if (role) return role;
    tried.push_back(role.error().message);
  }

  return make_error(ErrorCode::not_found,
                    "finding credentials: none found (" + join(tried, "; ") +
                        "); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or add the keys to a profile in "
                        "~/.aws/credentials (AWS_PROFILE picks it)");
}

Result<Credentials> CredentialChain::credentials() {
  std::lock_guard lock(m_mutex);
  auto now = Clock::now();
  if (m_cached && (!m_cached->expiration || now + k_refresh_margin < *m_cached->expiration)) return *m_cached;
  auto fresh = resolve_credentials(m_options);
  if (!fresh) {
    // Keep using credentials that have not expired yet when a refresh fails.
    if (m_cached && m_cached->expiration && now < *m_cached->expiration) return *m_cached;
    return fresh;
  }
  m_cached = *fresh;
  return fresh;
}

void CredentialChain::invalidate() {
  std::lock_guard lock(m_mutex);
  m_cached.reset();
}

}  // namespace gpuhost::store
