#include "supervise/snapshot.h"

#include <algorithm>
#include <fstream>
#include <system_error>
#include <vector>

#include "platform/files.h"

namespace gpuhost::supervise {

namespace fs = std::filesystem;

bool wants_snapshot(SnapshotPolicy policy, const CheckpointVerdict& verdict) {
  const bool single_file = verdict.format == CheckpointFormat::torch_zip ||
                           verdict.format == CheckpointFormat::safetensors ||
                           verdict.format == CheckpointFormat::generic_file;
  if (!single_file) return false;
  switch (policy) {
    case SnapshotPolicy::always: return true;
    case SnapshotPolicy::never: return false;
    case SnapshotPolicy::automatic: break;
  }
  std::string name = verdict.path.filename().string();
  return std::none_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Result<fs::path> take_snapshot(const CheckpointVerdict& verdict, const fs::path& directory) {
  std::string hash = verdict.content_hash;
  if (auto colon = hash.find(':'); colon != std::string::npos) hash = hash.substr(colon + 1);
  const fs::path target = directory / (hash.substr(0, 16) + "-" + verdict.path.filename().string());
  std::error_code ec;
  fs::create_directories(directory, ec);

  auto existing = validate_checkpoint(target, ValidationDepth::full);
  if (existing && existing->valid && existing->content_hash == verdict.content_hash) return target;

  // Same extension, so the copy is validated as the same format.
  const fs::path temp = directory / (".partial-" + target.filename().string());
  fs::remove(temp, ec);
  auto fail = [&](Error error) -> Result<fs::path> {
    std::error_code ignored;
    fs::remove(temp, ignored);
    return std::unexpected(with_context(std::move(error), "copying " + verdict.path.string() + " to " + target.string()));
  };
  {
    std::ifstream in(verdict.path, std::ios::binary);
    if (!in) return fail(Error{ErrorCode::io_error, "cannot open the checkpoint"});
    auto out = platform::AppendFile::open(temp);
    if (!out) return fail(out.error());
    std::vector<char> buffer(4u << 20);
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      auto got = static_cast<std::size_t>(in.gcount());
      if (got == 0) break;
      if (auto written = out->append(std::string_view(buffer.data(), got)); !written) return fail(written.error());
    }
    if (in.bad()) return fail(Error{ErrorCode::io_error, "reading the checkpoint failed"});
    if (auto synced = out->sync(); !synced) return fail(synced.error());
  }
  // The copy must hold exactly what was committed: the trainer may have started rewriting the
  // file between validation and copy.
  auto copied = validate_checkpoint(temp, ValidationDepth::full);
  if (!copied || !copied->valid || copied->content_hash != verdict.content_hash)
    return fail(Error{ErrorCode::io_error, "the file changed while it was being copied"});
  fs::rename(temp, target, ec);
  if (ec) return fail(Error{ErrorCode::io_error, ec.message()});
  if (auto synced = platform::sync_directory(directory); !synced) return fail(synced.error());
  return target;
}

}  // namespace gpuhost::supervise
