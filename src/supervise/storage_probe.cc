#include "supervise/storage_probe.h"

#include <system_error>

#include "base/strings.h"
#include "platform/files.h"

namespace gpuhost::supervise {

namespace fs = std::filesystem;

fs::path storage_probe_dir(const fs::path& checkpoint_location) {
  std::error_code ec;
  if (fs::is_directory(checkpoint_location, ec)) return checkpoint_location;
  if (!fs::exists(checkpoint_location, ec) && !checkpoint_location.has_extension()) return checkpoint_location;
  return checkpoint_location.parent_path();
}

fs::path storage_probe_path(const fs::path& dir, int node) {
  return dir / (".gpuhost-probe-node" + std::to_string(node));
}

Result<std::string> write_storage_probe(const fs::path& dir, int node) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(ErrorCode::io_error, "cannot create " + dir.string() + ": " + ec.message());
  // 128 bits: a probe another job or an earlier run left behind never matches by chance.
  std::string nonce = random_hex(32);
  GPUHOST_TRY_VOID(platform::write_file_atomic(storage_probe_path(dir, node), nonce + "\n"));
  return nonce;
}

bool sees_storage_probe(const fs::path& dir, int node, const std::string& nonce) {
  auto text = platform::read_file(storage_probe_path(dir, node), 4096);
  return text && trim(*text) == nonce;
}

void remove_storage_probe(const fs::path& dir, int node) {
  std::error_code ec;
  fs::remove(storage_probe_path(dir, node), ec);
}

}  // namespace gpuhost::supervise
