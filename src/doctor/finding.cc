#include "doctor/finding.h"

namespace gpuhost::doctor {

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::ok: return "ok";
    case Severity::info: return "info";
    case Severity::warn: return "warn";
    case Severity::fail: return "fail";
  }
  return "ok";
}

const char* layer_id(Layer l) {
  switch (l) {
    case Layer::host: return "host";
    case Layer::gpu: return "gpu";
    case Layer::cuda: return "cuda";
    case Layer::frameworks: return "frameworks";
    case Layer::os: return "os";
    case Layer::security: return "security";
    case Layer::preflight: return "preflight";
  }
  return "host";
}

const char* layer_title(Layer l) {
  switch (l) {
    case Layer::host: return "Host";
    case Layer::gpu: return "GPU and driver";
    case Layer::cuda: return "CUDA stack";
    case Layer::frameworks: return "Frameworks";
    case Layer::os: return "OS settings";
    case Layer::security: return "Security";
    case Layer::preflight: return "Preflight";
  }
  return "";
}

json::Value to_json(const Finding& f) {
  json::Value v;
  v["id"] = f.id;
  v["layer"] = layer_id(f.layer);
  v["severity"] = severity_name(f.severity);
  v["subject"] = f.subject;
  v["title"] = f.title;
  json::Value evidence = json::Value::array();
  for (const auto& e : f.evidence) evidence.push_back(e);
  v["evidence"] = std::move(evidence);
  v["fix"] = f.fix;
  if (!f.reference.empty()) v["reference"] = f.reference;
  return v;
}

Finding& Findings::add(Layer layer, Severity severity, std::string id, std::string title) {
  Finding f;
  f.layer = layer;
  f.severity = severity;
  f.id = std::move(id);
  f.title = std::move(title);
  m_findings.push_back(std::move(f));
  return m_findings.back();
}

std::size_t Findings::count(Severity s) const {
  std::size_t n = 0;
  for (const auto& f : m_findings) n += f.severity == s;
  return n;
}

const Finding* Findings::find(std::string_view id) const {
  for (const auto& f : m_findings)
    if (f.id == id) return &f;
  return nullptr;
}

std::vector<const Finding*> Findings::find_all(std::string_view id) const {
  std::vector<const Finding*> out;
  for (const auto& f : m_findings)
    if (f.id == id) out.push_back(&f);
  return out;
}

}  // namespace gpuhost::doctor
