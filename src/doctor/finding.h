#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"

namespace gpuhost::doctor {

// ok: checked and fine. info: a fact worth showing, or a check that could not run here (the
// evidence says why). warn: works but will bite (slow, fragile, insecure). fail: broken, or will
// break the job; any fail makes `gpuhost doctor` exit 1.
enum class Severity { ok, info, warn, fail };

// The layers of the report, in display order.
enum class Layer { host, gpu, cuda, frameworks, os, security, preflight };

[[nodiscard]] const char* severity_name(Severity s);  // "ok", "info", "warn", "fail"
[[nodiscard]] const char* layer_id(Layer l);          // "host", "gpu", ...
[[nodiscard]] const char* layer_title(Layer l);       // "Host", "GPU and driver", ...

// One judged check. `id` is stable across releases ("gpu.row_remap.pending") so scripts and
// support can key on it; `subject` says what it is about ("GPU 0", "/usr/bin/python3").
struct Finding {
  std::string id;
  Layer layer = Layer::host;
  Severity severity = Severity::ok;
  std::string subject;
  std::string title;
  std::vector<std::string> evidence;  // the values seen, one per line
  std::string fix;                    // a command or setting for the report's OS; empty when none needed
  std::string reference;              // where the rule's facts come from (URL), optional
};

[[nodiscard]] json::Value to_json(const Finding& finding);

// Findings in the order rules produced them, plus helpers the rules use.
class Findings {
 public:
  Finding& add(Layer layer, Severity severity, std::string id, std::string title);
  [[nodiscard]] const std::vector<Finding>& all() const { return m_findings; }
  [[nodiscard]] std::size_t count(Severity s) const;
  [[nodiscard]] const Finding* find(std::string_view id) const;
  [[nodiscard]] std::vector<const Finding*> find_all(std::string_view id) const;

 private:
  std::vector<Finding> m_findings;
};

}  // namespace gpuhost::doctor
