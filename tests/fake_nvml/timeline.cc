#include "timeline.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace fake_nvml {

namespace {

using gpuhost::json::Value;

void merge_into(Value& base, const Value& over) {
  if (!base.is_object() || !over.is_object()) {
    base = over;
    return;
  }
  for (const auto& [key, value] : over.members()) {
    if (key == "at_s") continue;
    Value& slot = base[key];  // added as null when new
    if (slot.is_object() && value.is_object())
      merge_into(slot, value);
    else
      slot = value;
  }
}

}  // namespace

bool Timeline::build(const Value& device, Timeline& out, std::string& error) {
  out = Timeline();
  Value base = device;
  const Value* timeline = device.find("timeline");
  if (const Value* repeat = device.find("timeline_repeat_s")) {
    if (!repeat->is_number() || repeat->as_number() <= 0) {
      error = "\"timeline_repeat_s\" must be a number of seconds above 0";
      return false;
    }
    out.m_repeat = repeat->as_number();
  }
  out.m_stages.emplace_back(0.0, base);
  if (!timeline) return true;
  if (!timeline->is_array()) {
    error = "\"timeline\" is not an array";
    return false;
  }
  for (const auto& entry : timeline->items()) {
    const Value* at = entry.is_object() ? entry.find("at_s") : nullptr;
    if (!at || !at->is_number() || at->as_number() < out.m_stages.back().first) {
      error = "each \"timeline\" entry needs \"at_s\": seconds, in ascending order";
      return false;
    }
    Value stage = out.m_stages.back().second;
    merge_into(stage, entry);
    out.m_stages.emplace_back(at->as_number(), std::move(stage));
  }
  return true;
}

const Value& Timeline::at(double seconds) const {
  if (m_repeat > 0 && seconds >= 0) seconds = std::fmod(seconds, m_repeat);
  const Value* current = &m_stages.front().second;
  for (const auto& [start, stage] : m_stages)
    if (start <= seconds) current = &stage;
  return *current;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double fake_clock_seconds(const std::string& clock_file, double start_seconds) {
  if (clock_file.empty()) return steady_seconds() - start_seconds;
  std::ifstream in(clock_file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return end != text.c_str() && std::isfinite(value) ? value : 0.0;
}

}  // namespace fake_nvml
