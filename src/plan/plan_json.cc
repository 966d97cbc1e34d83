#include "plan/plan_json.h"

#include <cmath>

namespace gpuhost::plan {

namespace {

json::Value opt(const std::optional<double>& v) {
  if (!v) return nullptr;
  return std::round(*v * 10000) / 10000;
}

double gib_rounded(double bytes) {
  return std::round(bytes / (1024.0 * 1024 * 1024) * 1000) / 1000;
}

}  // namespace

json::Value to_json(const MemoryEstimate& e) {
  json::Value out = json::Value::object();
  out["total_gib"] = gib_rounded(e.total_bytes);
  out["total_bytes"] = std::round(e.total_bytes);
  out["basis"] = e.basis;
  out["trainable_params"] = e.trainable_params;
  if (e.seq > 0) out["seq"] = e.seq;
  json::Value items = json::Value::array();
  for (const auto& i : e.items) {
    json::Value item = json::Value::object();
    item["id"] = i.id;
    item["label"] = i.label;
    item["gib"] = gib_rounded(i.bytes);
    item["bytes"] = std::round(i.bytes);
    item["explanation"] = i.explanation;
    items.push_back(std::move(item));
  }
  out["items"] = std::move(items);
  json::Value notes = json::Value::array();
  for (const auto& n : e.notes) notes.push_back(n);
  out["notes"] = std::move(notes);
  return out;
}

json::Value to_json(const Ranking& r) {
  json::Value out = json::Value::object();
  json::Value options = json::Value::array();
  int rank = 0;
  for (const auto& o : r.options) {
    json::Value v = json::Value::object();
    v["rank"] = ++rank;
    v["cloud"] = o.instance->cloud;
    v["region"] = o.instance->region;
    v["instance_type"] = o.instance->instance_type;
    v["gpu"] = o.instance->gpu;
    v["gpu_count"] = o.instance->gpu_count;
    v["gpu_memory_gb"] = o.instance->gpu_memory_gb;
    v["fits"] = o.fits;
    v["needed_gib_per_gpu"] = gib_rounded(o.needed_bytes_per_gpu);
    v["hours"] = opt(o.hours);
    v["usd_per_hour"] = opt(o.price_per_hour);
    v["on_demand_total_usd"] = opt(o.on_demand_total);
    v["reserved_total_usd"] = opt(o.reserved_total);
    v["reserved_commitment_total_usd"] = opt(o.reserved_commitment_total);
    v["spot_usd_per_hour"] = opt(o.spot_price_per_hour);
    v["spot_total_usd"] = opt(o.spot_total);
    if (o.risk) {
      json::Value risk = json::Value::object();
      risk["expected_hours"] = opt(o.risk->expected_hours);
      risk["expected_interruptions"] = opt(o.risk->expected_interruptions);
      risk["overhead_hours"] = opt(o.risk->overhead_hours);
      risk["optimal_checkpoint_interval_hours"] = opt(o.risk->optimal_interval_hours);
      risk["finishes"] = o.risk->finishes;
      v["spot_risk"] = std::move(risk);
    } else {
      v["spot_risk"] = nullptr;
    }
    v["best_total_usd"] = opt(o.best_total);
    v["best_option"] = o.best_option.empty() ? json::Value(nullptr) : json::Value(o.best_option);
    json::Value flags = json::Value::array();
    for (const auto& f : o.flags) flags.push_back(f);
    v["flags"] = std::move(flags);
    v["source"] = o.instance->provenance.source;
    v["as_of"] = o.instance->provenance.as_of;
    if (!o.instance->provenance.note.empty()) v["note"] = o.instance->provenance.note;
    options.push_back(std::move(v));
  }
  out["options"] = std::move(options);
  json::Value notes = json::Value::array();
  for (const auto& n : r.notes) notes.push_back(n);
  out["notes"] = std::move(notes);
  return out;
}

}  // namespace gpuhost::plan
