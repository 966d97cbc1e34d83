#include "doctor/report.h"

#include "doctor/rules.h"

namespace gpuhost::doctor {

json::Value report_to_json(const Report& report) {
  json::Value v;
  v["schema"] = k_report_schema;
  v["gpuhost_version"] = report.facts.gpuhost_version;
  v["host"] = report.facts.system.hostname;
  v["os"] = platform::os_family_name(report.facts.system.os.family);
  v["collected_at"] = report.facts.collected_at;
  v["judged_from"] = report.judged_from;
  v["knowledge"] = report.knowledge_summary;
  json::Value& summary = v["summary"];
  for (Severity s : {Severity::ok, Severity::info, Severity::warn, Severity::fail})
    summary[severity_name(s)] = report.findings.count(s);
  json::Value findings = json::Value::array();
  for (const auto& f : report.findings.all()) findings.push_back(to_json(f));
  v["findings"] = std::move(findings);
  v["facts"] = to_json(report.facts);
  return v;
}

Result<HostFacts> facts_from_report(std::string_view text) {
  auto doc = json::parse(text);
  if (!doc) return make_error(ErrorCode::parse_error, "not JSON: " + doc.error().message);
  if (!doc->is_object()) return make_error(ErrorCode::parse_error, "not a gpuhost doctor report: the top level is not an object");
  std::string schema = doc->get_string("schema");
  if (schema.empty())
    return make_error(ErrorCode::parse_error, "not a gpuhost doctor report: no \"schema\" field (expected \"" +
                                                  std::string(k_report_schema) + "\")");
  if (schema.rfind("gpuhost.doctor/", 0) != 0)
    return make_error(ErrorCode::parse_error, "not a gpuhost doctor report: schema is \"" + schema + "\"");
  if (schema != k_report_schema)
    return make_error(ErrorCode::parse_error, "report schema \"" + schema + "\" is not one this gpuhost reads (\"" +
                                                  std::string(k_report_schema) + "\"); update gpuhost");
  const json::Value* facts = doc->find("facts");
  if (!facts) return make_error(ErrorCode::parse_error, "report has no \"facts\" section; save it with 'gpuhost doctor --json'");
  return facts_from_json(*facts);
}

}  // namespace gpuhost::doctor
