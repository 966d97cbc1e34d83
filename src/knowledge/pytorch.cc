#include "knowledge/pytorch.h"

#include <algorithm>

#include "base/strings.h"
#include "knowledge/compute_capability.h"
#include "knowledge/parsers.h"
#include "knowledge/row_reader.h"

namespace gpuhost::knowledge {

const char* torch_channel_name(TorchChannel channel) {
  switch (channel) {
    case TorchChannel::stable: return "stable";
    case TorchChannel::experimental: return "experimental";
    case TorchChannel::extra: return "extra";
  }
  return "unknown";
}

std::string TorchBuild::tag() const {
  return cuda_tag(cuda);
}

const std::vector<std::string>& TorchBuild::arch_list(Os os) const {
  return os == Os::linux && !archs_linux.empty() ? archs_linux : archs;
}

bool TorchBuild::available_on(Os os) const {
  return platforms.empty() || std::find(platforms.begin(), platforms.end(), os) != platforms.end();
}

Version TorchRelease::pin_version() const {
  return patch_version ? *patch_version : Version({version.major(), version.minor(), 0});
}

bool TorchRelease::supports_python(const Version& python) const {
  Version minor = major_minor(python);
  return python_min <= minor && minor <= python_max;
}

const TorchBuild* TorchRelease::find_build(const Version& cuda) const {
  for (const auto& build : builds)
    if (major_minor(build.cuda) == major_minor(cuda)) return &build;
  return nullptr;
}

const TorchRelease* PytorchTable::find_release(const Version& torch) const {
  for (const auto& release : releases)
    if (major_minor(release.version) == major_minor(torch)) return &release;
  return nullptr;
}

std::string PytorchTable::index_url(std::string_view tag) const {
  return replace_all(index_url_template, "{tag}", tag);
}

std::string PytorchTable::install_command(const TorchRelease& release, const TorchBuild* build) const {
  for (const auto& form : install_forms) {  // newest first
    if (release.version < form.min_torch) continue;
    std::string tag = build ? build->tag() : "cpu";
    std::string command = replace_all(form.template_text, "{version}", release.pin_version().str());
    command = replace_all(command, "{index_url}", index_url(tag));
    return replace_all(command, "{tag}", tag);
  }
  return {};
}

std::optional<Version> cuda_from_tag(std::string_view tag) {
  if (!tag.starts_with("cu") || tag.size() < 4) return std::nullopt;
  auto number = parse_int(tag.substr(2));
  if (!number || *number <= 0) return std::nullopt;
  // The last digit is the minor version: cu92 = 9.2, cu102 = 10.2, cu121 = 12.1.
  return Version({static_cast<int>(*number / 10), static_cast<int>(*number % 10)});
}

std::string cuda_tag(const Version& cuda) {
  return "cu" + std::to_string(cuda.major()) + std::to_string(cuda.minor());
}

std::optional<TorchVersion> parse_torch_version(std::string_view text) {
  text = trim(text);
  auto plus = text.find('+');
  std::string_view public_part = text.substr(0, plus);
  auto version = Version::parse(public_part);
  if (!version) return std::nullopt;
  TorchVersion out;
  out.version = *version;
  if (plus != std::string_view::npos) {
    out.local = std::string(text.substr(plus + 1));
    out.cuda = cuda_from_tag(out.local);
  }
  return out;
}

InstalledTorch identify_torch(const PytorchTable& table, std::string_view torch_version, Os os) {
  InstalledTorch installed;
  auto parsed = parse_torch_version(torch_version);
  if (!parsed) {
    installed.explanation = "\"" + std::string(torch_version) + "\" is not a torch version";
    return installed;
  }
  installed.version = *parsed;
  installed.release = table.find_release(parsed->version);
  const std::string name = "torch " + std::string(trim(torch_version));
  const std::string line = major_minor(parsed->version).str();

  if (parsed->local == "cpu") {
    installed.cpu_only = true;
    installed.explanation = name + " is a CPU-only build";
    return installed;
  }
  if (parsed->local.starts_with("rocm")) {
    installed.rocm = true;
    installed.explanation = name + " is an AMD ROCm build: it cannot use an NVIDIA GPU";
    return installed;
  }
  if (parsed->cuda) {
    if (installed.release) installed.build = installed.release->find_build(*parsed->cuda);
    installed.explanation = name + " is built with CUDA " + parsed->cuda->str();
    if (installed.release && !installed.build)
      installed.explanation += ", which is not among the known " + line + " builds";
    return installed;
  }
  if (!parsed->local.empty()) {
    installed.explanation = name + " has an unrecognised local version \"" + parsed->local + "\"";
    return installed;
  }
  if (os == Os::windows) {
    installed.cpu_only = true;
    installed.explanation = name + " is the plain PyPI wheel, which is CPU-only on Windows";
    if (const Fact* fact = find_fact(table.facts, "windows_pypi_cpu_only"))
      installed.explanation += " (" + fact->provenance.source + ")";
    return installed;
  }
  if (installed.release && installed.release->pypi_linux_cuda) {
    installed.build = installed.release->find_build(*installed.release->pypi_linux_cuda);
    installed.explanation = name + " is the plain PyPI wheel; on Linux that is the CUDA " +
                            installed.release->pypi_linux_cuda->str() + " build";
    return installed;
  }
  installed.explanation = name +
                          " is the plain PyPI wheel: a CUDA build on Linux, but which CUDA is not "
                          "recorded for " +
                          line + "; check torch.version.cuda";
  return installed;
}

namespace detail {

namespace {

TorchBuild read_build(RowReader& row) {
  TorchBuild build;
  build.cuda = row.version("cuda");
  row.set_key("cuda " + build.cuda.str());
  if (row.ok() && build.cuda.parts().size() != 2) row.fail("cuda", "expected major.minor like \"12.1\"");
  std::string channel = row.string("channel");
  if (channel == "stable")
    build.channel = TorchChannel::stable;
  else if (channel == "experimental")
    build.channel = TorchChannel::experimental;
  else if (channel == "extra")
    build.channel = TorchChannel::extra;
  else if (row.ok())
    row.fail("channel", "expected stable, experimental or extra; found \"" + channel + "\"");
  build.cudnn = row.optional_version("cudnn");
  build.archs = row.optional_string_list("archs");
  build.archs_linux = row.optional_string_list("archs_linux");
  for (const auto* list : {&build.archs, &build.archs_linux}) {
    for (const auto& arch : *list) {
      if (ArchTarget::parse(arch)) continue;
      row.fail(list == &build.archs ? "archs" : "archs_linux", "\"" + arch + "\" is not sm_XY or compute_XY");
      break;
    }
  }
  build.archs_source = row.optional_string("archs_source").value_or("");
  if (row.ok() && !build.archs.empty() && build.archs_source.empty())
    row.fail("archs_source", "an arch list needs its source");
  for (const auto& text : row.optional_string_list("platforms")) {
    auto os = parse_os(text);
    if (!os) {
      row.fail("platforms", "expected linux or windows, found \"" + text + "\"");
      break;
    }
    build.platforms.push_back(*os);
  }
  build.note = row.optional_string("note").value_or("");
  return build;
}

}  // namespace

Result<PytorchTable> parse_pytorch(const json::Value& document, const std::string& location) {
  PytorchTable table;
  RowReader root(document, location);
  read_header(root);
  const json::Value* index = root.object("index_url_template");
  const auto* forms = root.array("install_commands");
  const auto* releases = root.array("releases");
  table.facts = read_facts(root, location);
  if (auto done = root.finish(); !done) return std::unexpected(done.error());

  {
    RowReader row(*index, location + ": index_url_template");
    table.index_url_template = row.string("value");
    if (row.ok() && table.index_url_template.find("{tag}") == std::string::npos)
      row.fail("value", "must contain {tag}");
    table.index_url_provenance = row.provenance();
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
  }

  std::vector<std::string> keys;
  for (std::size_t i = 0; i < forms->size(); ++i) {
    RowReader row((*forms)[i], row_location(location, "install_commands", i));
    TorchInstallForm form;
    form.min_torch = row.version("min_torch");
    row.set_key("min_torch " + form.min_torch.str());
    form.template_text = row.string("template");
    if (row.ok()) {
      std::string rest = replace_all(
          replace_all(replace_all(form.template_text, "{version}", ""), "{index_url}", ""), "{tag}", "");
      if (form.template_text.find("{version}") == std::string::npos ||
          form.template_text.find("{index_url}") == std::string::npos)
        row.fail("template", "must contain {version} and {index_url}");
      else if (rest.find('{') != std::string::npos || rest.find('}') != std::string::npos)
        row.fail("template", "only {version}, {index_url} and {tag} may be substituted");
    }
    form.provenance = row.provenance();
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    keys.push_back(form.min_torch.str());
    table.install_forms.push_back(std::move(form));
  }
  check_duplicates(root, "install_commands", keys);

  keys.clear();
  for (std::size_t i = 0; i < releases->size(); ++i) {
    const std::string where = row_location(location, "releases", i);
    RowReader row((*releases)[i], where);
    TorchRelease release;
    release.version = row.version("version");
    row.set_key("torch " + release.version.str());
    if (row.ok() && release.version.parts().size() != 2)
      row.fail("version", "expected a release line like \"2.1\"");
    release.patch_version = row.optional_version("patch_version");
    if (row.ok() && release.patch_version && major_minor(*release.patch_version) != release.version)
      row.fail("patch_version", "is not a patch of " + release.version.str());
    release.python_min = row.version("python_min");
    release.python_max = row.version("python_max");
    if (row.ok() && release.python_max < release.python_min) row.fail("python_max", "is below python_min");
    release.pypi_linux_cuda = row.optional_version("pypi_linux_cuda");
    if (const auto* companions = row.optional_object("companions")) {
      RowReader c(*companions, where + " (torch " + release.version.str() + ").companions");
      TorchCompanions out;
      out.torchvision = c.version("torchvision");
      out.torchaudio = c.version("torchaudio");
      out.provenance = c.provenance();
      if (auto done = c.finish(); !done) row.adopt(done.error());
      release.companions = std::move(out);
    }
    const auto* builds = row.array("builds");
    release.provenance = row.provenance();
    std::vector<std::string> build_keys;
    for (std::size_t j = 0; row.ok() && j < builds->size(); ++j) {
      RowReader build_row((*builds)[j],
                          where + " (torch " + release.version.str() + ").builds[" + std::to_string(j) + "]");
      TorchBuild build = read_build(build_row);
      if (auto done = build_row.finish(); !done) return std::unexpected(done.error());
      build_keys.push_back(build.cuda.str());
      release.builds.push_back(std::move(build));
    }
    check_duplicates(row, "builds", build_keys);
    if (row.ok() && release.pypi_linux_cuda && !release.find_build(*release.pypi_linux_cuda))
      row.fail("pypi_linux_cuda",
               "names CUDA " + release.pypi_linux_cuda->str() + ", which is not among the builds");
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    keys.push_back(release.version.str());
    std::stable_sort(release.builds.begin(), release.builds.end(),
                     [](const auto& a, const auto& b) { return a.cuda > b.cuda; });
    table.releases.push_back(std::move(release));
  }
  check_duplicates(root, "releases", keys);
  if (auto done = root.finish(); !done) return std::unexpected(done.error());

  std::stable_sort(table.install_forms.begin(), table.install_forms.end(),
                   [](const auto& a, const auto& b) { return a.min_torch > b.min_torch; });
  std::stable_sort(table.releases.begin(), table.releases.end(),
                   [](const auto& a, const auto& b) { return a.version > b.version; });
  return table;
}

}  // namespace detail
}  // namespace gpuhost::knowledge
