#include "knowledge/knowledge.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <sstream>
#include <system_error>

#include "base/json.h"
#include "base/strings.h"
#include "knowledge/embedded_data.h"
#include "knowledge/parsers.h"

namespace gpuhost::knowledge {
namespace {

constexpr std::array<std::string_view, 6> k_file_names = {
    "cuda_drivers.json", "gpus.json",       "cuda_arch_support.json",
    "pytorch.json",      "tensorflow.json", "cudnn.json",
};

constexpr std::uintmax_t k_max_file_bytes = 16u << 20;

struct SourceText {
  std::string text;
  FileOrigin origin = FileOrigin::embedded;
  std::string path;
};

std::string path_text(const std::filesystem::path& path) {
  return path.generic_string();
}

// std::ifstream rather than platform::read_file: knowledge/ sits beside platform/, not above it.
Result<std::string> read_text(const std::filesystem::path& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    auto code = ec == std::errc::no_such_file_or_directory ? ErrorCode::not_found : ErrorCode::io_error;
    return make_error(code, "reading knowledge file " + path_text(path) + ": " + ec.message());
  }
  if (size > k_max_file_bytes)
    return make_error(ErrorCode::io_error,
                      "reading knowledge file " + path_text(path) + ": larger than 16 MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(ErrorCode::io_error, "reading knowledge file " + path_text(path) + ": cannot open");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad())
    return make_error(ErrorCode::io_error, "reading knowledge file " + path_text(path) + ": read failed");
  return buffer.str();
}

std::vector<std::string> known_names() {
  return {k_file_names.begin(), k_file_names.end()};
}

Result<void> add_override_file(const std::filesystem::path& path, std::map<std::string, SourceText>& texts) {
  std::string name = path.filename().string();
  if (std::find(k_file_names.begin(), k_file_names.end(), name) == k_file_names.end()) {
    std::string message = "knowledge override " + path_text(path) + ": \"" + name +
                          "\" is not a knowledge file (expected one of " + join(known_names(), ", ") + ")";
    if (auto close = closest_match(name, known_names())) message += "; did you mean \"" + *close + "\"?";
    return make_error(ErrorCode::invalid_argument, message);
  }
  auto text = read_text(path);
  if (!text) return std::unexpected(text.error());
  texts[name] = SourceText{std::move(*text), FileOrigin::override_file, path_text(path)};
  return {};
}

Result<void> add_override(const std::filesystem::path& path, std::map<std::string, SourceText>& texts) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return make_error(ErrorCode::not_found,
                      "knowledge override " + path_text(path) + ": no such file or directory");
  }
  if (!std::filesystem::is_directory(status)) return add_override_file(path, texts);
  std::vector<std::filesystem::path> files;
  for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".json" && !it->is_directory()) files.push_back(it->path());
  if (ec)
    return make_error(ErrorCode::io_error,
                      "listing knowledge directory " + path_text(path) + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& file : files)
    if (auto added = add_override_file(file, texts); !added) return added;
  return {};
}

void collect_metadata(const json::Value& value, FileMetadata& meta) {
  if (value.is_array()) {
    for (const auto& item : value.items()) collect_metadata(item, meta);
    return;
  }
  if (!value.is_object()) return;
  if (const json::Value* source = value.find("source"); source && source->is_string()) {
    ++meta.rows;
    if (std::find(meta.sources.begin(), meta.sources.end(), source->as_string()) == meta.sources.end())
      meta.sources.push_back(source->as_string());
    std::string as_of = value.get_string("as_of");
    if (as_of > meta.as_of) meta.as_of = as_of;
  }
  for (const auto& [key, member] : value.members()) collect_metadata(member, meta);
}

template <typename Table, typename Parser>
Result<void> load_table(const std::map<std::string, SourceText>& texts, std::string_view name, Parser parse,
                        Table& table, std::vector<FileMetadata>& files) {
  auto found = texts.find(std::string(name));
  if (found == texts.end())
    return make_error(ErrorCode::internal, "knowledge file " + std::string(name) + " is not embedded");
  const SourceText& source = found->second;
  std::string location =
      source.origin == FileOrigin::embedded ? "embedded " + std::string(name) : source.path;
  auto document = json::parse(source.text);
  if (!document)
    return make_error(ErrorCode::parse_error, location + ": invalid JSON: " + document.error().message);
  auto parsed = parse(*document, location);
  if (!parsed) return std::unexpected(parsed.error());
  table = std::move(*parsed);
  FileMetadata meta;
  meta.name = std::string(name);
  meta.origin = source.origin;
  meta.path = source.origin == FileOrigin::override_file ? source.path : "";
  collect_metadata(*document, meta);
  files.push_back(std::move(meta));
  return {};
}

// The GPU table's architecture names must agree with the architecture table where both list a
// compute capability.
Result<void> check_gpu_architectures(const Knowledge& knowledge) {
  const FileMetadata* meta = knowledge.file("gpus.json");
  std::string location = meta && !meta->path.empty() ? meta->path : "embedded gpus.json";
  for (std::size_t i = 0; i < knowledge.gpus.models.size(); ++i) {
    const auto& model = knowledge.gpus.models[i];
    const auto* arch = knowledge.arch_support.find(model.compute_capability);
    if (arch && arch->architecture != model.architecture)
      return make_error(ErrorCode::parse_error,
                        location + ": gpus[" + std::to_string(i) + "] (key " + model.key +
                            "): field \"architecture\": \"" + model.architecture +
                            "\" disagrees with cuda_arch_support.json, which calls compute capability " +
                            model.compute_capability.str() + " \"" + arch->architecture + "\"");
  }
  return {};
}

}  // namespace

std::span<const std::string_view> knowledge_file_names() {
  return k_file_names;
}

const FileMetadata* Knowledge::file(std::string_view name) const {
  for (const auto& meta : files)
    if (meta.name == name) return &meta;
  return nullptr;
}

Result<Knowledge> load_knowledge(const LoadOptions& options) {
  std::map<std::string, SourceText> texts;
  for (const auto& file : data::embedded_files())
    texts[std::string(file.name)] = SourceText{std::string(file.bytes), FileOrigin::embedded, ""};
  for (const auto& path : options.overrides)
    if (auto added = add_override(path, texts); !added) return std::unexpected(added.error());

  Knowledge knowledge;
  auto& files = knowledge.files;
  Result<void> loaded =
      load_table(texts, "cuda_drivers.json", detail::parse_cuda_drivers, knowledge.cuda_drivers, files);
  if (loaded) loaded = load_table(texts, "gpus.json", detail::parse_gpus, knowledge.gpus, files);
  if (loaded)
    loaded = load_table(texts, "cuda_arch_support.json", detail::parse_arch_support, knowledge.arch_support,
                        files);
  if (loaded) loaded = load_table(texts, "pytorch.json", detail::parse_pytorch, knowledge.pytorch, files);
  if (loaded)
    loaded = load_table(texts, "tensorflow.json", detail::parse_tensorflow, knowledge.tensorflow, files);
  if (loaded) loaded = load_table(texts, "cudnn.json", detail::parse_cudnn, knowledge.cudnn, files);
  if (loaded) loaded = check_gpu_architectures(knowledge);
  if (!loaded) return std::unexpected(loaded.error());
  return knowledge;
}

std::optional<Version> min_driver_for_compute_capability(const Knowledge& knowledge, ComputeCapability cc,
                                                         Os os) {
  const ArchitectureSupport* arch = knowledge.arch_support.find(cc);
  if (!arch) return std::nullopt;
  return knowledge.cuda_drivers.min_driver(arch->first_cuda, os);
}

}  // namespace gpuhost::knowledge
