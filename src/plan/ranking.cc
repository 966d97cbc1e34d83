#include "plan/ranking.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "base/json.h"
#include "base/strings.h"
#include "knowledge/row_reader.h"
#include "plan/plan_data.h"

namespace gpuhost::plan {

using knowledge::RowReader;

const GpuThroughput* ThroughputTable::find(std::string_view key) const {
  for (const auto& g : gpus)
    if (g.gpu == key) return &g;
  return nullptr;
}

void ThroughputTable::set(GpuThroughput t) {
  for (auto& g : gpus)
    if (g.gpu == t.gpu) {
      g = std::move(t);
      return;
    }
  gpus.push_back(std::move(t));
}

ThroughputTable spec_throughput(const knowledge::GpuTable& gpus) {
  ThroughputTable table;
  for (const auto& m : gpus.models) {
    if (!m.spec) continue;
    // Training runs in BF16 where the GPU has it, FP16 before Ampere (T4, V100).
    std::optional<double> tflops = m.spec->bf16_dense_tflops ? m.spec->bf16_dense_tflops : m.spec->fp16_dense_tflops;
    if (!tflops || *tflops <= 0) continue;
    table.gpus.push_back(GpuThroughput{m.key, *tflops, false, m.spec->source});
  }
  return table;
}

Result<std::string> resolve_gpu(std::string_view name, const knowledge::GpuTable& gpus) {
  if (const auto* m = gpus.find_by_key(to_lower(name))) return m->key;
  if (auto match = gpus.match(name)) return match->model->key;
  if (auto match = gpus.match("NVIDIA " + std::string(name))) return match->model->key;
  // A family name ("H100", "a100 80gb"): every model whose key has all of its words.
  const std::vector<std::string> words = knowledge::gpu_name_tokens(name);
  std::vector<std::string> keys, family;
  for (const auto& m : gpus.models) {
    keys.push_back(m.key);
    const std::vector<std::string> key_words = split(m.key, '-');
    if (!words.empty() && std::all_of(words.begin(), words.end(), [&](const std::string& w) {
          return std::find(key_words.begin(), key_words.end(), w) != key_words.end();
        }))
      family.push_back(m.key);
  }
  if (family.size() == 1) return family.front();
  if (family.size() > 1)
    return make_error(ErrorCode::not_found, "'" + std::string(name) + "' names several GPU models: " +
                                                join(family, ", ") + "; give one of them");
  std::string message = "unknown GPU '" + std::string(name) + "'";
  if (auto close = closest_match(to_lower(name), keys)) message += " (did you mean '" + *close + "'?)";
  return make_error(ErrorCode::not_found, message + "; gpuhost plan --list-gpus lists the GPUs it knows");
}

Result<std::vector<GpuThroughput>> parse_bench_result(std::string_view text, const std::string& location,
                                                      const knowledge::GpuTable& gpus) {
  auto document = json::parse(text);
  if (!document) return make_error(ErrorCode::parse_error, location + ": " + document.error().message);
  const json::Value* gpu = document->find("gpu");
  const json::Value* devices = gpu ? gpu->find("devices") : nullptr;
  if (!devices || !devices->is_array())
    return make_error(ErrorCode::parse_error, location + ": expected {\"gpu\": {\"devices\": [...]}} (a gpuhost bench result)");
  std::map<std::string, std::pair<double, int>> sums;
  for (std::size_t i = 0; i < devices->items().size(); ++i) {
    const json::Value& d = devices->items()[i];
    std::string where = location + ": gpu.devices[" + std::to_string(i) + "]";
    const json::Value* name = d.find("name");
    const json::Value* gemm = d.find("gemm_tflops");
    const json::Value* bf16 = gemm ? gemm->find("bf16") : nullptr;
    if (!name || !name->is_string()) return make_error(ErrorCode::parse_error, where + ": missing string \"name\"");
    if (!bf16) continue;  // the bench did not measure BF16 on this device
    if (!bf16->is_number() || bf16->as_number() <= 0)
      return make_error(ErrorCode::parse_error, where + ".gemm_tflops.bf16: expected a positive number");
    auto match = gpus.match(name->as_string());
    if (!match) return make_error(ErrorCode::parse_error, where + ": GPU \"" + name->as_string() + "\" is not in gpus.json");
    auto& s = sums[match->model->key];
    s.first += bf16->as_number();
    s.second += 1;
  }
  if (sums.empty()) return make_error(ErrorCode::parse_error, location + ": no device has a measured gemm_tflops.bf16");
  std::vector<GpuThroughput> out;
  for (const auto& [key, s] : sums)
    out.push_back({key, s.first / s.second, true, location + " (measured by gpuhost bench, " + std::to_string(s.second) + " device(s))"});
  return out;
}

SpotRisk spot_risk(double work_hours, const SpotPolicy& p) {
  SpotRisk r;
  const double lambda = p.interruptions_per_hour;
  auto expected = [&](double tau) -> std::optional<double> {
    const double loss = lambda * (p.restart_hours + tau / 2);
    if (loss >= 1) return std::nullopt;
    return work_hours * (1 + p.checkpoint_write_hours / tau) / (1 - loss);
  };
  auto t = expected(p.checkpoint_interval_hours);
  r.optimal_interval_hours = lambda > 0 ? std::sqrt(2 * p.checkpoint_write_hours / lambda) : 0;
  if (lambda <= 0) {
    r.expected_hours = work_hours * (1 + p.checkpoint_write_hours / p.checkpoint_interval_hours);
    r.expected_hours_at_optimum = work_hours;
    r.overhead_hours = r.expected_hours - work_hours;
    return r;
  }
  if (!t) {
    r.finishes = false;
    return r;
  }
  r.expected_hours = *t;
  r.expected_interruptions = lambda * *t;
  r.overhead_hours = *t - work_hours;
  r.expected_hours_at_optimum = expected(r.optimal_interval_hours).value_or(0);
  return r;
}

Result<Ranking> rank_instances(const InstanceCatalog& catalog, const ThroughputTable& throughput, const Work& work,
                               const SpotPolicy& spot, knowledge::Os os,
                               const std::function<Result<MemoryEstimate>(int)>& memory_for) {
  Ranking ranking;
  const GpuThroughput* ref = throughput.find(work.reference_gpu);
  if (work.reference_gpu_hours > 0 && !ref)
    return make_error(ErrorCode::invalid_argument, "no throughput figure for the reference GPU '" + work.reference_gpu +
                                                       "'; pick one of the GPUs in gpu_throughput.json or pass --bench");
  std::map<int, MemoryEstimate> by_count;
  for (const auto& in : catalog.instances) {
    RankedOption o;
    o.instance = &in;
    auto it = by_count.find(in.gpu_count);
    if (it == by_count.end()) it = by_count.emplace(in.gpu_count, GPUHOST_TRY(memory_for(in.gpu_count))).first;
    o.needed_bytes_per_gpu = it->second.total_bytes;
    o.fits = o.needed_bytes_per_gpu <= in.gpu_memory_gb * 1024 * 1024 * 1024;
    for (const auto& w : in.warnings) o.flags.push_back(w);
    if (work.reference_gpu_hours > 0) {
      if (const GpuThroughput* t = throughput.find(in.gpu))
        o.hours = work.reference_gpu_hours * (ref->tflops / t->tflops) / in.gpu_count;
      else
        o.flags.push_back("no throughput figure for " + in.gpu + ": time and total cost unknown");
    }
    std::string why;
    if (os == knowledge::Os::windows) {
      o.price_per_hour = catalog.windows_price(in, &why);
      if (!o.price_per_hour) o.flags.push_back("Windows price missing: " + why);
    } else {
      o.price_per_hour = in.on_demand;
      if (!o.price_per_hour) o.flags.push_back("on-demand price missing");
    }
    o.spot_price_per_hour = in.spot;
    if (os == knowledge::Os::windows && in.spot) {
      o.spot_price_per_hour.reset();
      for (const auto& l : catalog.licences)
        if (l.cloud == in.cloud && l.usd_per_vcpu_hour && in.vcpus) o.spot_price_per_hour = *in.spot + *l.usd_per_vcpu_hour * *in.vcpus;
    }
    if (!o.spot_price_per_hour) o.flags.push_back("spot price missing");
    if (o.hours) {
      if (o.price_per_hour) o.on_demand_total = *o.price_per_hour * *o.hours;
      if (in.reserved && os == knowledge::Os::linux) {
        o.reserved_total = *in.reserved * *o.hours;
        o.reserved_commitment_total = *in.reserved * std::max(*o.hours, in.reserved_min_hours);
        if (*o.hours < in.reserved_min_hours) {
          char text[160];
          std::snprintf(text, sizeof text, "reserved: a %.0f-hour commitment for a %.1f-hour job costs $%.0f",
                        in.reserved_min_hours, *o.hours, *o.reserved_commitment_total);
          o.flags.push_back(text);
        }
      }
      if (o.spot_price_per_hour) {
        SpotRisk r = spot_risk(*o.hours, spot);
        o.risk = r;
        if (r.finishes)
          o.spot_total = *o.spot_price_per_hour * r.expected_hours;
        else
          o.flags.push_back("spot: interruptions outpace progress at this checkpoint interval");
      }
      for (auto [total, name] : {std::pair{o.spot_total, "spot"},
                                 {o.on_demand_total, "on-demand"},
                                 {o.reserved_commitment_total, "reserved"}})
        if (total && (!o.best_total || *total < *o.best_total)) {
          o.best_total = total;
          o.best_option = name;
        }
    }
    if (!o.fits) o.flags.push_back("does not fit: needs " + format_bytes(o.needed_bytes_per_gpu) + " per GPU");
    ranking.options.push_back(std::move(o));
  }
  // Nodes bigger than the job: left out unless asked for.
  if (!work.all_instances) {
    int limit = work.max_gpus;
    if (limit <= 0) {
      for (const auto& o : ranking.options)
        if (o.fits && (limit <= 0 || o.instance->gpu_count < limit)) limit = o.instance->gpu_count;
    }
    if (limit > 0) {
      const auto before = ranking.options.size();
      std::erase_if(ranking.options, [&](const RankedOption& o) { return o.instance->gpu_count > limit; });
      if (const auto dropped = before - ranking.options.size(); dropped > 0)
        ranking.notes.push_back(
            std::to_string(dropped) + " instance types with more than " + std::to_string(limit) + " GPU" +
            (limit == 1 ? "" : "s") + " are left out: the job " + (work.max_gpus > 0 ? "uses " : "fits on ") +
            std::to_string(limit) +
            ", and more GPUs do not speed it up in proportion (--gpus N to plan for more, "
            "--all-instances to list every node)");
    }
  }
  auto group = [](const RankedOption& o) { return !o.fits ? 2 : o.best_total ? 0 : 1; };
  std::stable_sort(ranking.options.begin(), ranking.options.end(), [&](const RankedOption& a, const RankedOption& b) {
    if (group(a) != group(b)) return group(a) < group(b);
    if (a.best_total && b.best_total) return *a.best_total < *b.best_total;
    return false;
  });
  if (spot.rate_assumed)
    ranking.notes.push_back("spot interruption rate " + std::to_string(spot.interruptions_per_hour).substr(0, 5) +
                            "/h is gpuhost's assumption, not a sourced figure: set --spot-interruptions-per-hour");
  ranking.notes.push_back("time scales with dense 16-bit TFLOPS and GPU count (no communication overhead)");
  ranking.notes.push_back(
      "reserved prices are best only for jobs as long as their least term (a Capacity Block: 24 h; "
      "a reservation: 1 year), which is paid in full");
  return ranking;
}

}  // namespace gpuhost::plan
