#include "plan/instances.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/json.h"
#include "base/strings.h"
#include "knowledge/row_reader.h"
#include "plan/plan_data.h"

namespace gpuhost::plan {

using knowledge::RowReader;

std::optional<double> InstanceCatalog::windows_price(const Instance& instance, std::string* why) const {
  if (instance.windows) return instance.windows;
  if (!instance.on_demand) {
    if (why) *why = "no Linux on-demand price to add the licence to";
    return std::nullopt;
  }
  for (const auto& l : licences) {
    if (l.cloud != instance.cloud) continue;
    if (!l.usd_per_vcpu_hour) {
      if (why) *why = instance.cloud + " Windows licence per vCPU-hour not sourced";
      return std::nullopt;
    }
    if (!instance.vcpus) {
      if (why) *why = "vCPU count unknown, so the per-vCPU licence cannot be added";
      return std::nullopt;
    }
    return *instance.on_demand + *l.usd_per_vcpu_hour * *instance.vcpus;
  }
  if (why) *why = "no Windows price or licence rate for " + instance.cloud;
  return std::nullopt;
}

Result<InstanceCatalog> parse_instance_catalog(std::string_view text, const std::string& location) {
  auto document = json::parse(text);
  if (!document) return make_error(ErrorCode::parse_error, location + ": " + document.error().message);
  RowReader root(*document, location);
  knowledge::read_header(root);
  const auto* rows = root.array("instances");
  const auto* licences = root.optional_array("windows_licences");
  if (auto done = root.finish(); !done) return std::unexpected(done.error());

  InstanceCatalog catalog;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < rows->size(); ++i) {
    RowReader row((*rows)[i], knowledge::row_location(location, "instances", i));
    Instance in;
    in.cloud = row.string("cloud");
    in.region = row.string("region");
    in.instance_type = row.string("instance_type");
    row.set_key(in.cloud + " " + in.instance_type);
    in.gpu = row.string("gpu");
    auto count = row.integer("gpu_count");
    if (row.ok() && (count < 1 || count > 1024)) row.fail("gpu_count", "must be between 1 and 1024");
    in.gpu_count = static_cast<int>(count);
    in.gpu_memory_gb = row.optional_number("gpu_memory_gb").value_or(0);
    if (row.ok() && in.gpu_memory_gb <= 0) row.fail("gpu_memory_gb", "required: GPU memory per GPU in GB");
    if (auto v = row.optional_integer("vcpus")) in.vcpus = static_cast<int>(*v);
    in.ram_gb = row.optional_number("ram_gb");
    in.on_demand = row.optional_number("on_demand_usd_per_hour");
    in.spot = row.optional_number("spot_usd_per_hour");
    in.reserved = row.optional_number("reserved_usd_per_hour");
    if (auto hours = row.optional_number("reserved_min_hours")) in.reserved_min_hours = *hours;
    in.windows = row.optional_number("windows_usd_per_hour");
    for (auto* price : {&in.on_demand, &in.spot, &in.reserved, &in.windows})
      if (row.ok() && *price && **price == 0)
        row.fail("on_demand_usd_per_hour", "a price of 0 is not allowed: write null for a price that is not known");
    in.provenance = row.provenance();
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    keys.push_back(in.cloud + "/" + in.region + "/" + in.instance_type);
    catalog.instances.push_back(std::move(in));
  }
  if (licences) {
    for (std::size_t i = 0; i < licences->size(); ++i) {
      RowReader row((*licences)[i], knowledge::row_location(location, "windows_licences", i));
      WindowsLicence l;
      l.cloud = row.string("cloud");
      l.usd_per_vcpu_hour = row.optional_number("usd_per_vcpu_hour");
      l.provenance = row.provenance();
      if (auto done = row.finish(); !done) return std::unexpected(done.error());
      catalog.licences.push_back(std::move(l));
    }
  }
  knowledge::check_duplicates(root, "instances", keys);
  if (auto done = root.finish(); !done) return std::unexpected(done.error());
  return catalog;
}

Result<InstanceCatalog> builtin_instance_catalog() {
  const EmbeddedFile* file = data::find_embedded("instances.json");
  if (!file) return make_error(ErrorCode::internal, "instances.json is not embedded in this build");
  return parse_instance_catalog(file->bytes, "instances.json (built in)");
}

void merge_catalog(InstanceCatalog& into, InstanceCatalog more) {
  for (auto& in : more.instances) into.instances.push_back(std::move(in));
  for (auto& l : more.licences) {
    auto it = std::find_if(into.licences.begin(), into.licences.end(), [&](const auto& x) { return x.cloud == l.cloud; });
    if (it != into.licences.end()) *it = std::move(l); else into.licences.push_back(std::move(l));
  }
  for (auto& w : more.warnings) into.warnings.push_back(std::move(w));
}

namespace {

struct CsvCell {
  std::string text;
  int column;  // 1-based character column where the cell starts
};

// RFC 4180 records: quoted cells may hold commas, doubled quotes and newlines. `line` advances
// past the record. parse_error on an unterminated quote or junk after a closing quote.
Result<std::vector<CsvCell>> read_record(std::string_view text, std::size_t& pos, int& line, const std::string& location) {
  std::vector<CsvCell> cells;
  const int start_line = line;
  int column = 1;
  std::size_t line_start = pos;
  while (true) {
    CsvCell cell;
    cell.column = static_cast<int>(pos - line_start) + 1;
    if (pos < text.size() && text[pos] == '"') {
      ++pos;
      bool closed = false;
      while (pos < text.size()) {
        char c = text[pos++];
        if (c == '"') {
          if (pos < text.size() && text[pos] == '"') {
            cell.text += '"';
            ++pos;
          } else {
            closed = true;
            break;
          }
        } else {
          if (c == '\n') {
            ++line;
            line_start = pos;
          }
          cell.text += c;
        }
      }
      if (!closed)
        return make_error(ErrorCode::parse_error, location + ":" + std::to_string(start_line) + ":" + std::to_string(cell.column) +
                                                      ": unterminated quoted cell");
      if (pos < text.size() && text[pos] != ',' && text[pos] != '\n' && text[pos] != '\r')
        return make_error(ErrorCode::parse_error, location + ":" + std::to_string(line) + ":" +
                                                      std::to_string(static_cast<int>(pos - line_start) + 1) +
                                                      ": unexpected character after a closing quote");
    } else {
      while (pos < text.size() && text[pos] != ',' && text[pos] != '\n' && text[pos] != '\r') cell.text += text[pos++];
    }
    cells.push_back(std::move(cell));
    if (pos < text.size() && text[pos] == ',') {
      ++pos;
      continue;
    }
    if (pos < text.size() && text[pos] == '\r') ++pos;
    if (pos < text.size() && text[pos] == '\n') ++pos;
    ++line;
    (void)column;
    return cells;
  }
}

// GpuInfo is a Python dict literal: {'Gpus': [{'Name': 'T4', ..., 'MemoryInfo': {'SizeInMiB': 16384}}], ...}.
std::optional<double> gpu_memory_mib(std::string_view info) {
  auto at = info.find("SizeInMiB");
  if (at == std::string_view::npos) return std::nullopt;
  at = info.find(':', at);
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t end = at + 1;
  while (end < info.size() && (info[end] == ' ' || std::isdigit(static_cast<unsigned char>(info[end])) || info[end] == '.')) ++end;
  return parse_double(trim(info.substr(at + 1, end - at - 1)));
}

}  // namespace

Result<InstanceCatalog> parse_skypilot_csv(std::string_view text, const std::string& location, std::string_view cloud,
                                           const knowledge::GpuTable& gpus) {
  std::size_t pos = 0;
  int line = 1;
  auto header = GPUHOST_TRY(read_record(text, pos, line, location));
  std::map<std::string, std::size_t> columns;
  for (std::size_t i = 0; i < header.size(); ++i) columns[to_lower(trim(header[i].text))] = i;
  auto column = [&](std::initializer_list<const char*> names) -> std::optional<std::size_t> {
    for (const char* n : names)
      if (auto it = columns.find(to_lower(n)); it != columns.end()) return it->second;
    return std::nullopt;
  };
  auto c_type = column({"InstanceType"});
  auto c_acc = column({"AcceleratorName"});
  auto c_count = column({"AcceleratorCount"});
  auto c_vcpu = column({"vCPUs"});
  auto c_mem = column({"MemoryGiB"});
  auto c_info = column({"GpuInfo", "GPUInfo"});
  auto c_price = column({"Price"});
  auto c_spot = column({"SpotPrice"});
  auto c_region = column({"Region"});
  for (auto [name, col] : {std::pair{"InstanceType", c_type}, {"AcceleratorName", c_acc}, {"AcceleratorCount", c_count},
                           {"Price", c_price}, {"Region", c_region}})
    if (!col)
      return make_error(ErrorCode::parse_error, location + ":1:1: missing column \"" + std::string(name) +
                                                    "\" (a SkyPilot vms.csv header names InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, GpuInfo, Price, SpotPrice, Region, AvailabilityZone)");

  InstanceCatalog catalog;
  std::map<std::string, std::size_t> index;  // type/region -> instance
  int skipped_no_gpu = 0, skipped_attachable = 0;
  while (pos < text.size()) {
    const int record_line = line;
    auto cells = GPUHOST_TRY(read_record(text, pos, line, location));
    if (cells.size() == 1 && trim(cells[0].text).empty()) continue;
    if (cells.size() != header.size())
      return make_error(ErrorCode::parse_error, location + ":" + std::to_string(record_line) + ":1: " + std::to_string(cells.size()) +
                                                    " cells, the header has " + std::to_string(header.size()));
    auto cell = [&](std::optional<std::size_t> c) -> std::string { return c ? std::string(trim(cells[*c].text)) : std::string(); };
    auto where = [&](std::optional<std::size_t> c) {
      return location + ":" + std::to_string(record_line) + ":" + std::to_string(c ? cells[*c].column : 1);
    };
    auto number = [&](std::optional<std::size_t> c, const char* what) -> Result<std::optional<double>> {
      std::string t = cell(c);
      if (t.empty()) return std::optional<double>{};
      auto v = parse_double(t);
      if (!v || *v < 0 || !std::isfinite(*v))
        return make_error(ErrorCode::parse_error, where(c) + ": " + what + " \"" + t + "\" is not a non-negative number");
      return std::optional<double>{*v};
    };
    std::string type = cell(c_type), acc = cell(c_acc);
    if (acc.empty()) {
      ++skipped_no_gpu;
      continue;
    }
    if (type.empty()) {
      ++skipped_attachable;
      continue;
    }
    auto count = GPUHOST_TRY(number(c_count, "AcceleratorCount"));
    if (!count || *count < 1 || *count != std::floor(*count))
      return make_error(ErrorCode::parse_error, where(c_count) + ": AcceleratorCount must be a whole number of GPUs");
    auto price = GPUHOST_TRY(number(c_price, "Price"));
    auto spot = GPUHOST_TRY(number(c_spot, "SpotPrice"));
    auto vcpus = GPUHOST_TRY(number(c_vcpu, "vCPUs"));
    auto ram = GPUHOST_TRY(number(c_mem, "MemoryGiB"));
    if (price && *price == 0) price.reset();
    if (spot && *spot == 0) spot.reset();
    std::string region = cell(c_region);
    std::string key = type + "/" + region;
    if (auto it = index.find(key); it != index.end()) {
      Instance& existing = catalog.instances[it->second];
      auto keep_min = [](std::optional<double>& a, const std::optional<double>& b) {
        if (b && (!a || *b < *a)) a = b;
      };
      keep_min(existing.on_demand, price);
      keep_min(existing.spot, spot);
      continue;
    }
    Instance in;
    in.cloud = std::string(cloud);
    in.region = region;
    in.instance_type = type;
    in.gpu_count = static_cast<int>(*count);
    in.on_demand = price;
    in.spot = spot;
    if (vcpus) in.vcpus = static_cast<int>(*vcpus);
    in.ram_gb = ram;
    in.provenance.source = location + ":" + std::to_string(record_line);
    in.provenance.as_of = "imported";
    const knowledge::GpuModel* model = gpus.find_by_key(to_lower(acc));
    if (!model)
      if (auto match = gpus.match("NVIDIA " + acc)) model = match->model;
    in.gpu = model ? model->key : acc;
    std::optional<double> mib = c_info ? gpu_memory_mib(cell(c_info)) : std::nullopt;
    double catalog_gb = mib ? *mib / 1024.0 : 0;
    if (catalog_gb == 0)  // SkyPilot names like "A100-80GB" carry the size
      for (const auto& token : knowledge::gpu_name_tokens(acc))
        if (token.size() > 2 && token.ends_with("gb"))
          if (auto gb = parse_double(token.substr(0, token.size() - 2))) catalog_gb = *gb;
    if (model && model->memory_gb) {
      if (catalog_gb > 0 && std::abs(catalog_gb - *model->memory_gb) / *model->memory_gb > 0.10)
        in.warnings.push_back("catalog says " + format_bytes(catalog_gb * 1024 * 1024 * 1024) + " per GPU; gpus.json says " +
                              format_bytes(*model->memory_gb * 1024 * 1024 * 1024) + ": using gpus.json");
      in.gpu_memory_gb = *model->memory_gb;
    } else if (catalog_gb > 0) {
      in.gpu_memory_gb = catalog_gb;
    } else {
      return make_error(ErrorCode::parse_error, where(c_acc) + ": GPU memory of \"" + acc +
                                                    "\" is neither in GpuInfo nor in gpus.json");
    }
    index[key] = catalog.instances.size();
    catalog.instances.push_back(std::move(in));
  }
  if (skipped_attachable)
    catalog.warnings.push_back(std::to_string(skipped_attachable) +
                               " attachable-GPU rows (empty InstanceType, GCP style) skipped: their host VM price is a separate row");
  if (skipped_no_gpu) catalog.warnings.push_back(std::to_string(skipped_no_gpu) + " rows without a GPU skipped");
  return catalog;
}

}  // namespace gpuhost::plan
