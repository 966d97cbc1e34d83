#pragma once

#include <memory>
#include <string_view>

#include "base/error.h"
#include "store/object_store.h"
#include "store/s3_store.h"

namespace gpuhost::store {

struct OpenOptions {
  S3Options s3;         // retries, timeouts, cancellation
  std::string profile;  // AWS profile, else AWS_PROFILE, else "default"
  // Credentials to use instead of the default chain (tests; callers with their own).
  std::shared_ptr<CredentialProvider> credentials;
};

// Opens the store a URL names (store_url.h): FileStore for file://, S3Store for s3:// with the
// default credential chain (credentials.h) and the region from the URL, AWS_REGION /
// AWS_DEFAULT_REGION or the profile. Credentials are looked up on the first request, so opening
// never blocks on the network.
[[nodiscard]] Result<std::unique_ptr<ObjectStore>> open_store(std::string_view url,
                                                              const OpenOptions& options = {});

}  // namespace gpuhost::store
