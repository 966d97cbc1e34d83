#include "store/store.h"

#include "store/file_store.h"

namespace gpuhost::store {

Result<std::unique_ptr<ObjectStore>> open_store(std::string_view url, const OpenOptions& options) {
  StoreLocation location = GPUHOST_TRY(parse_store_url(url, default_region(options.profile)));
  if (location.kind == StoreLocation::Kind::file) return std::make_unique<FileStore>(location.root);
  std::shared_ptr<CredentialProvider> credentials = options.credentials;
  if (!credentials) {
    ChainOptions chain;
    chain.provider = location.provider;
    chain.profile = options.profile;
    credentials = std::make_shared<CredentialChain>(std::move(chain));
  }
  return std::make_unique<S3Store>(std::move(location), std::move(credentials), options.s3);
}

}  // namespace gpuhost::store
