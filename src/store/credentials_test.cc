#include "store/credentials.h"

#include <fstream>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "net/fake_http_server.h"
#include "platform/scoped_env.h"

namespace gpuhost::store {
namespace {

using net::test_support::CannedResponse;
using net::test_support::FakeHttpServer;
using net::test_support::ReceivedRequest;
using platform::ScopedEnv;

// Every variable the chain reads, cleared for each test; HOME points at an empty directory and
// IMDS is off unless a test turns it on.
class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = std::filesystem::temp_directory_path() /
            ("gpuhost-cred-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(m_dir);
    std::filesystem::create_directories(m_dir / ".aws");
    for (const char* name :
         {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "ALIBABA_CLOUD_ACCESS_KEY_ID",
          "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALIBABA_CLOUD_SECURITY_TOKEN", "AWS_PROFILE",
          "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_REGION",
          "AWS_DEFAULT_REGION", "USERPROFILE"})
      set(name, std::nullopt);
    set("HOME", m_dir.string());
    set("AWS_EC2_METADATA_DISABLED", "true");
  }
  void TearDown() override {
    m_env.clear();
    std::filesystem::remove_all(m_dir);
  }

  void set(const char* name, const std::optional<std::string>& value) {
    m_env.push_back(std::make_unique<ScopedEnv>(name, value));
  }
  void write(const std::string& relative, const std::string& text) {
    std::ofstream(m_dir / relative, std::ios::binary) << text;
  }

  std::filesystem::path m_dir;
  std::vector<std::unique_ptr<ScopedEnv>> m_env;
};

TEST_F(CredentialsTest, EnvironmentComesFirst) {
  set("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT0001");
  set("AWS_SECRET_ACCESS_KEY", "env-secret");
  set("AWS_SESSION_TOKEN", "env-token");
  write(".aws/credentials",
        "[default]\naws_access_key_id = AKIAFROMFILE\naws_secret_access_key = file-secret\n");
  auto c = resolve_credentials({});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->access_key_id, "AKIAENVIRONMENT0001");
  EXPECT_EQ(c->secret_access_key.reveal(), "env-secret");
  EXPECT_EQ(c->session_token.reveal(), "env-token");
  EXPECT_EQ(c->source, "environment (AWS_ACCESS_KEY_ID)");
}

TEST_F(CredentialsTest, AHalfSetEnvironmentIsAnError) {
  set("AWS_ACCESS_KEY_ID", "AKIAONLYTHEID");
  auto c = resolve_credentials({});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(c.error().message.find("AWS_SECRET_ACCESS_KEY is not"), std::string::npos) << c.error().message;
}

TEST_F(CredentialsTest, AlibabaVariablesWorkAndComeFirstForOss) {
  set("ALIBABA_CLOUD_ACCESS_KEY_ID", "LTAIALIBABA");
  set("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ali-secret");
  set("ALIBABA_CLOUD_SECURITY_TOKEN", "ali-token");
  auto c = resolve_credentials({});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->access_key_id, "LTAIALIBABA");
  EXPECT_EQ(c->session_token.reveal(), "ali-token");

  set("AWS_ACCESS_KEY_ID", "AKIAAWS");
  set("AWS_SECRET_ACCESS_KEY", "aws-secret");
  EXPECT_EQ(resolve_credentials({})->access_key_id, "AKIAAWS");
  ChainOptions oss;
  oss.provider = Provider::oss;
  EXPECT_EQ(resolve_credentials(oss)->access_key_id, "LTAIALIBABA");
}

TEST_F(CredentialsTest, ReadsTheDefaultProfileFromTheSharedCredentialsFile) {
  write(
      ".aws/credentials",
      "# comment\n[other]\naws_access_key_id=AKIAOTHER\naws_secret_access_key=other\n\n"
      "[default]\n  ; indented comment\naws_access_key_id = AKIADEFAULT\nAWS_Secret_Access_Key = def-secret\n"
      "aws_session_token = def-token\ns3 =\n  max_concurrent_requests = 20\n");
  auto c = resolve_credentials({});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->access_key_id, "AKIADEFAULT");
  EXPECT_EQ(c->secret_access_key.reveal(), "def-secret");
  EXPECT_EQ(c->session_token.reveal(), "def-token");
  EXPECT_NE(c->source.find("profile \"default\""), std::string::npos) << c->source;
}

TEST_F(CredentialsTest, AwsProfilePicksASectionAndTheConfigFileIsASecondPlace) {
  write(".aws/config",
        "[default]\nregion = eu-central-1\n[profile ci]\nregion = us-west-2\n"
        "aws_access_key_id = AKIACONFIGCI\naws_secret_access_key = ci-secret\n");
  set("AWS_PROFILE", "ci");
  auto c = resolve_credentials({});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->access_key_id, "AKIACONFIGCI");
  EXPECT_EQ(default_region(), "us-west-2");

  write(".aws/credentials", "[ci]\naws_access_key_id = AKIACREDCI\naws_secret_access_key = cred-secret\n");
  EXPECT_EQ(resolve_credentials({})->access_key_id, "AKIACREDCI");  // the credentials file wins
}

TEST_F(CredentialsTest, FileLocationsComeFromTheirVariables) {
  write("elsewhere-credentials", "[default]\naws_access_key_id = AKIAELSEWHERE\naws_secret_access_key = s\n");
  write("elsewhere-config", "[default]\nregion = ap-northeast-1\n");
  set("AWS_SHARED_CREDENTIALS_FILE", (m_dir / "elsewhere-credentials").string());
  set("AWS_CONFIG_FILE", (m_dir / "elsewhere-config").string());
  EXPECT_EQ(resolve_credentials({})->access_key_id, "AKIAELSEWHERE");
  EXPECT_EQ(default_region(), "ap-northeast-1");
  set("AWS_REGION", "sa-east-1");
  EXPECT_EQ(default_region(), "sa-east-1");
}

TEST_F(CredentialsTest, ANamedProfileThatDoesNotExistIsAnError) {
  set("AWS_PROFILE", "missing");
  auto c = resolve_credentials({});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(c.error().message.find("profile \"missing\""), std::string::npos) << c.error().message;
}

TEST_F(CredentialsTest, NothingFoundSaysWhatWasTriedAndHowToFixIt) {
  auto c = resolve_credentials({});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::not_found);
  EXPECT_NE(c.error().message.find("AWS_ACCESS_KEY_ID"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("~/.aws/credentials"), std::string::npos) << c.error().message;
}

TEST_F(CredentialsTest, InstanceRoleThroughImdsV2) {
  FakeHttpServer imds([](const ReceivedRequest& r) {
    CannedResponse out;
    if (r.method == "PUT" && r.target == "/latest/api/token") {
      out.body = r.header("X-aws-ec2-metadata-token-ttl-seconds") == "21600" ? "TOKEN123" : "";
      return out;
    }
    if (r.header("X-aws-ec2-metadata-token") != "TOKEN123") {
      out.status = 401;
      return out;
    }
    if (r.target == "/latest/meta-data/iam/security-credentials/") {
      out.body = "trainer-role";
    } else if (r.target == "/latest/meta-data/iam/security-credentials/trainer-role") {
      out.body =
          R"({"Code":"Success","Type":"AWS-HMAC","AccessKeyId":"ASIAROLE","SecretAccessKey":"role-secret",
                     "Token":"role-token","Expiration":"2030-01-02T03:04:05Z"})";
    } else {
      out.status = 404;
    }
    return out;
  });
  set("AWS_EC2_METADATA_DISABLED", std::nullopt);
  set("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url());
  auto c = resolve_credentials({});
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->access_key_id, "ASIAROLE");
  EXPECT_EQ(c->secret_access_key.reveal(), "role-secret");
  EXPECT_EQ(c->session_token.reveal(), "role-token");
  ASSERT_TRUE(c->expiration);
  EXPECT_EQ(*c->expiration, std::chrono::sys_days{std::chrono::year(2030) / 1 / 2} + std::chrono::hours(3) +
                                std::chrono::minutes(4) + std::chrono::seconds(5));
  EXPECT_NE(c->source.find("trainer-role"), std::string::npos);
}

TEST_F(CredentialsTest, ImdsIsNotAskedForOtherCloudsOrWhenDisabled) {
  FakeHttpServer imds([](const ReceivedRequest&) { return CannedResponse{}; });
  set("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url());
  EXPECT_FALSE(resolve_credentials({}));  // AWS_EC2_METADATA_DISABLED=true from SetUp
  set("AWS_EC2_METADATA_DISABLED", std::nullopt);
  ChainOptions oss;
  oss.provider = Provider::oss;
  EXPECT_FALSE(resolve_credentials(oss));
  EXPECT_TRUE(imds.requests().empty());
}

TEST_F(CredentialsTest, AnInstanceWithoutARoleIsNotFound) {
  FakeHttpServer imds([](const ReceivedRequest& r) {
    CannedResponse out;
    if (r.method == "PUT")
      out.body = "T";
    else
      out.status = 404;
    return out;
  });
  set("AWS_EC2_METADATA_DISABLED", std::nullopt);
  set("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.url());
  auto c = resolve_credentials({});
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::not_found);
  EXPECT_NE(c.error().message.find("no IAM role"), std::string::npos) << c.error().message;
}

TEST_F(CredentialsTest, ChainCachesAndRefetchesAfterInvalidate) {
  set("AWS_ACCESS_KEY_ID", "AKIAFIRST");
  set("AWS_SECRET_ACCESS_KEY", "s1");
  CredentialChain chain({});
  EXPECT_EQ(chain.credentials()->access_key_id, "AKIAFIRST");
  set("AWS_ACCESS_KEY_ID", "AKIASECOND");
  EXPECT_EQ(chain.credentials()->access_key_id, "AKIAFIRST");  // no expiration: cached
  chain.invalidate();
  EXPECT_EQ(chain.credentials()->access_key_id, "AKIASECOND");
}

TEST(RedactKeyId, ShowsOnlyTheEnds) {
  EXPECT_EQ(redact_key_id("AKIAIOSFODNN7EXAMPLE"), "AKIA…MPLE");
  EXPECT_EQ(redact_key_id("short"), "****");
}

}  // namespace
}  // namespace gpuhost::store
