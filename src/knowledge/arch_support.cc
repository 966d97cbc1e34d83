#include "knowledge/arch_support.h"

#include <algorithm>

#include "knowledge/parsers.h"
#include "knowledge/row_reader.h"

namespace gpuhost::knowledge {

const char* cuda_cc_status_name(CudaCcStatus status) {
  switch (status) {
    case CudaCcStatus::supported: return "supported";
    case CudaCcStatus::not_yet_supported: return "not_yet_supported";
    case CudaCcStatus::dropped: return "dropped";
    case CudaCcStatus::unknown: return "unknown";
  }
  return "unknown";
}

const ArchitectureSupport* ArchSupportTable::find(ComputeCapability cc) const {
  for (const auto& row : architectures)
    if (std::find(row.compute_capabilities.begin(), row.compute_capabilities.end(), cc) !=
        row.compute_capabilities.end())
      return &row;
  return nullptr;
}

CudaCcSupport ArchSupportTable::cuda_supports(const Version& cuda, ComputeCapability cc) const {
  CudaCcSupport support;
  support.architecture = find(cc);
  const std::string cuda_text = "CUDA " + major_minor(cuda).str();
  const std::string cc_text = "compute capability " + cc.str();
  if (!support.architecture) {
    support.explanation = cc_text + " is not in the architecture table";
    return support;
  }
  const auto& arch = *support.architecture;
  const std::string named = cc_text + " (" + arch.architecture + ")";
  if (major_minor(cuda) < major_minor(arch.first_cuda)) {
    support.status = CudaCcStatus::not_yet_supported;
    support.explanation = named + " needs CUDA " + major_minor(arch.first_cuda).str() + " or newer; " +
                          cuda_text + " predates it";
    return support;
  }
  if (arch.last_cuda_major && cuda.major() > *arch.last_cuda_major) {
    support.status = CudaCcStatus::dropped;
    for (const auto& event : events) {
      if (event.kind != "removed" || major_minor(event.cuda) > major_minor(cuda)) continue;
      if (std::find(event.compute_capabilities.begin(), event.compute_capabilities.end(), cc) !=
          event.compute_capabilities.end())
        support.event = &event;
    }
    support.explanation =
        named + " was last supported by CUDA " + std::to_string(*arch.last_cuda_major) + ".x";
    if (arch.last_driver_branch) support.explanation += " (driver branch " + *arch.last_driver_branch + ")";
    if (support.event)
      support.explanation += "; CUDA " + major_minor(support.event->cuda).str() + ": " + support.event->text;
    return support;
  }
  support.status = CudaCcStatus::supported;
  support.explanation = cuda_text + " supports " + named;
  return support;
}

namespace detail {

namespace {

std::vector<ComputeCapability> read_ccs(RowReader& row, std::string_view field) {
  std::vector<ComputeCapability> ccs;
  for (const auto& text : row.string_list(field)) {
    auto cc = ComputeCapability::parse(text);
    if (!cc) {
      row.fail(field, "expected compute capabilities like \"8.6\", found \"" + text + "\"");
      return {};
    }
    ccs.push_back(*cc);
  }
  return ccs;
}

}  // namespace

Result<ArchSupportTable> parse_arch_support(const json::Value& document, const std::string& location) {
  ArchSupportTable table;
  RowReader root(document, location);
  read_header(root);
  const auto* rows = root.array("architectures");
  const auto* events = root.array("drop_events");
  table.facts = read_facts(root, location);
  if (auto done = root.finish(); !done) return std::unexpected(done.error());

  std::vector<std::string> ccs;
  for (std::size_t i = 0; i < rows->size(); ++i) {
    RowReader row((*rows)[i], row_location(location, "architectures", i));
    ArchitectureSupport arch;
    arch.architecture = row.string("architecture");
    row.set_key(arch.architecture);
    arch.compute_capabilities = read_ccs(row, "compute_capabilities");
    arch.first_cuda = row.version("first_cuda");
    if (auto last = row.optional_integer("last_cuda_major")) {
      if (*last < arch.first_cuda.major()) row.fail("last_cuda_major", "is before first_cuda");
      arch.last_cuda_major = static_cast<int>(*last);
    }
    arch.last_driver_branch = row.optional_string("last_driver_branch");
    arch.provenance = row.provenance();
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    for (const auto& cc : arch.compute_capabilities) ccs.push_back(cc.str());
    table.architectures.push_back(std::move(arch));
  }
  check_duplicates(root, "architectures", ccs);

  for (std::size_t i = 0; i < events->size(); ++i) {
    RowReader row((*events)[i], row_location(location, "drop_events", i));
    ArchDropEvent event;
    event.cuda = row.version("cuda");
    event.kind = row.string("kind");
    row.set_key("cuda " + event.cuda.str() + " " + event.kind);
    if (row.ok() && event.kind != "removed" && event.kind != "feature_complete" && event.kind != "renamed")
      row.fail("kind", "expected removed, feature_complete or renamed; found \"" + event.kind + "\"");
    event.compute_capabilities = read_ccs(row, "compute_capabilities");
    event.text = row.string("text");
    event.provenance = row.provenance();
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    table.events.push_back(std::move(event));
  }
  if (auto done = root.finish(); !done) return std::unexpected(done.error());
  std::stable_sort(table.events.begin(), table.events.end(),
                   [](const auto& a, const auto& b) { return a.cuda < b.cuda; });
  return table;
}

}  // namespace detail
}  // namespace gpuhost::knowledge
