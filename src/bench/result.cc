#include "bench/result.h"

#include <algorithm>

namespace gpuhost::bench {

const char* status_name(Status status) {
  switch (status) {
    case Status::pass: return "pass";
    case Status::warn: return "warn";
    case Status::fail: return "fail";
    case Status::info: return "info";
  }
  return "info";
}

int BenchReport::count(Status status) const {
  return static_cast<int>(
      std::count_if(measurements.begin(), measurements.end(), [&](const Measurement& m) { return m.status == status; }));
}

namespace {

void put_optional(json::Value& object, const char* key, const std::optional<double>& value) {
  object[key] = value ? json::Value(*value) : json::Value(nullptr);
}

// Absent values are left out (not null), so readers can test for the key alone.
void put_if(json::Value& object, const char* key, const std::optional<double>& value) {
  if (value) object[key] = *value;
}

std::optional<double> get_optional(const json::Value& object, const char* key) {
  const json::Value* v = object.find(key);
  if (!v || !v->is_number()) return std::nullopt;
  return v->as_number();
}

Result<Status> parse_status(const std::string& text) {
  for (Status s : {Status::pass, Status::warn, Status::fail, Status::info})
    if (text == status_name(s)) return s;
  return make_error(ErrorCode::parse_error, "unknown status \"" + text + "\"");
}

}  // namespace

json::Value to_json(const BenchReport& report) {
  json::Value root = json::Value::object();
  root["schema"] = "gpuhost.bench/1";
  root["mode"] = report.mode;
  json::Value parts = json::Value::array();
  for (const auto& p : report.parts) parts.push_back(p);
  root["parts"] = std::move(parts);
  root["interrupted"] = report.interrupted;
  json::Value summary = json::Value::object();
  for (Status s : {Status::pass, Status::warn, Status::fail, Status::info}) summary[status_name(s)] = report.count(s);
  root["summary"] = std::move(summary);
  json::Value measurements = json::Value::array();
  for (const auto& m : report.measurements) {
    json::Value o = json::Value::object();
    o["id"] = m.id;
    o["subject"] = m.subject;
    o["title"] = m.title;
    o["value"] = m.value;
    o["unit"] = m.unit;
    put_optional(o, "expected", m.expected);
    o["expected_text"] = m.expected_text;
    o["basis"] = m.basis;
    put_optional(o, "ratio", m.ratio);
    o["status"] = status_name(m.status);
    json::Value notes = json::Value::array();
    for (const auto& n : m.notes) notes.push_back(n);
    o["notes"] = std::move(notes);
    measurements.push_back(std::move(o));
  }
  root["measurements"] = std::move(measurements);
  json::Value unavailable = json::Value::array();
  for (const auto& u : report.unavailable) {
    json::Value o = json::Value::object();
    o["part"] = u.part;
    o["reason"] = u.reason;
    unavailable.push_back(std::move(o));
  }
  root["unavailable"] = std::move(unavailable);
  // `gpuhost plan --bench` reads gpu.devices[].name and .gemm_tflops.bf16.
  json::Value devices = json::Value::array();
  for (const auto& g : report.gpus) {
    json::Value o = json::Value::object();
    o["cuda_index"] = g.cuda_index;
    o["name"] = g.name;
    o["model_key"] = g.model_key;
    o["pci_bus_id"] = g.pci_bus_id;
    json::Value gemm = json::Value::object();
    put_if(gemm, "fp32", g.fp32_tflops);
    put_if(gemm, "tf32", g.tf32_tflops);
    put_if(gemm, "fp16", g.fp16_tflops);
    put_if(gemm, "bf16", g.bf16_tflops);
    o["gemm_tflops"] = std::move(gemm);
    json::Value copy = json::Value::object();
    put_if(copy, "h2d_pinned", g.h2d_pinned_gbps);
    put_if(copy, "d2h_pinned", g.d2h_pinned_gbps);
    put_if(copy, "h2d_pageable", g.h2d_pageable_gbps);
    put_if(copy, "d2h_pageable", g.d2h_pageable_gbps);
    put_if(copy, "d2d", g.d2d_gbps);
    o["copy_gbps"] = std::move(copy);
    devices.push_back(std::move(o));
  }
  json::Value gpu = json::Value::object();
  gpu["devices"] = std::move(devices);
  root["gpu"] = std::move(gpu);
  return root;
}

Result<BenchReport> report_from_json(const json::Value& value) {
  if (!value.is_object() || value.get_string("schema") != "gpuhost.bench/1")
    return make_error(ErrorCode::parse_error, "not a gpuhost bench result (schema \"gpuhost.bench/1\" expected)");
  BenchReport report;
  report.mode = value.get_string("mode");
  report.interrupted = value.get_bool("interrupted");
  if (const auto* parts = value.find("parts"); parts && parts->is_array())
    for (const auto& p : parts->items())
      if (p.is_string()) report.parts.push_back(p.as_string());
  if (const auto* ms = value.find("measurements"); ms && ms->is_array()) {
    for (const auto& o : ms->items()) {
      Measurement m;
      m.id = o.get_string("id");
      m.subject = o.get_string("subject");
      m.title = o.get_string("title");
      m.value = o.get_number("value");
      m.unit = o.get_string("unit");
      m.expected = get_optional(o, "expected");
      m.expected_text = o.get_string("expected_text");
      m.basis = o.get_string("basis");
      m.ratio = get_optional(o, "ratio");
      m.status = GPUHOST_TRY(parse_status(o.get_string("status", "info")));
      if (const auto* notes = o.find("notes"); notes && notes->is_array())
        for (const auto& n : notes->items())
          if (n.is_string()) m.notes.push_back(n.as_string());
      report.measurements.push_back(std::move(m));
    }
  }
  if (const auto* us = value.find("unavailable"); us && us->is_array())
    for (const auto& o : us->items()) report.unavailable.push_back({o.get_string("part"), o.get_string("reason")});
  const json::Value* gpu = value.find("gpu");
  const json::Value* devices = gpu ? gpu->find("devices") : nullptr;
  if (devices && devices->is_array()) {
    json::Value none = json::Value::object();
    for (const auto& o : devices->items()) {
      GpuSummary g;
      g.cuda_index = static_cast<int>(o.get_int("cuda_index"));
      g.name = o.get_string("name");
      g.model_key = o.get_string("model_key");
      g.pci_bus_id = o.get_string("pci_bus_id");
      const json::Value* gemm = o.find("gemm_tflops");
      const json::Value& t = gemm ? *gemm : none;
      g.fp32_tflops = get_optional(t, "fp32");
      g.tf32_tflops = get_optional(t, "tf32");
      g.fp16_tflops = get_optional(t, "fp16");
      g.bf16_tflops = get_optional(t, "bf16");
      const json::Value* copy = o.find("copy_gbps");
      const json::Value& c = copy ? *copy : none;
      g.h2d_pinned_gbps = get_optional(c, "h2d_pinned");
      g.d2h_pinned_gbps = get_optional(c, "d2h_pinned");
      g.h2d_pageable_gbps = get_optional(c, "h2d_pageable");
      g.d2h_pageable_gbps = get_optional(c, "d2h_pageable");
      g.d2d_gbps = get_optional(c, "d2d");
      report.gpus.push_back(std::move(g));
    }
  }
  return report;
}

}  // namespace gpuhost::bench
