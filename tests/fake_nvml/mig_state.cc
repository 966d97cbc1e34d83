#include "mig_state.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#ifdef _WIN32
#include <windows.h>
#endif

namespace fake_nvml {

using gpuhost::json::Value;
using namespace gpuhost::gpu::nvml;

namespace {

constexpr const char* k_state_env = "GPUHOST_FAKE_NVML_MIG_STATE";
constexpr const char* k_boot_env = "GPUHOST_FAKE_NVML_BOOT";

std::string env(const char* name) {
#ifdef _WIN32
  char buffer[4096];
  DWORD n = GetEnvironmentVariableA(name, buffer, sizeof buffer);
  return n > 0 && n < sizeof buffer ? std::string(buffer, n) : std::string();
#else
  const char* v = std::getenv(name);
  return v ? v : "";
#endif
}

unsigned u(const Value& v, std::string_view key, unsigned fallback = 0) {
  return static_cast<unsigned>(v.get_int(key, fallback));
}

bool overlaps(unsigned a, unsigned a_size, unsigned b, unsigned b_size) {
  return a < b + b_size && b < a + a_size;
}

}  // namespace

unsigned compute_profile_slices(unsigned profile) {
  // NVML_COMPUTE_INSTANCE_PROFILE_{1,2,3,4,7,8,6}_SLICE (nvml.h).
  constexpr unsigned slices[] = {1, 2, 3, 4, 7, 8, 6};
  return profile < std::size(slices) ? slices[profile] : 0;
}

const MigProfileSpec* MigGpu::by_index(unsigned index) const {
  for (const auto& p : profiles)
    if (p.index == index) return &p;
  return nullptr;
}

const MigProfileSpec* MigGpu::by_id(unsigned id) const {
  for (const auto& p : profiles)
    if (p.id == id) return &p;
  return nullptr;
}

MigGpu* MigMachine::gpu(std::size_t index) {
  return index < m_gpus.size() && m_gpus[index].present ? &m_gpus[index] : nullptr;
}

bool MigMachine::load(const Value& scenario, std::string& error) {
  m_gpus.clear();
  m_state_path = env(k_state_env);
  m_boot = env(k_boot_env);
  if (const Value* devices = scenario.find("devices"); devices && devices->is_array()) {
    for (const auto& d : devices->items()) {
      MigGpu g;
      const Value* mig = d.find("mig");
      if (mig && mig->is_object()) {
        g.present = true;
        if (const Value* mode = d.find("mig_mode")) {
          g.current = u(*mode, "current");
          g.pending = u(*mode, "pending");
        }
        g.hypervisor = mig->get_string("reset", "allowed") == "hypervisor";
        if (const Value* c = mig->find("clients")) g.clients = *c;
        g.compute_slices = u(*mig, "compute_slices", 7);
        g.memory_slices = u(*mig, "memory_slices", 8);
        if (const Value* list = mig->find("profiles"); list && list->is_array())
          for (const auto& p : list->items()) {
            MigProfileSpec s{u(p, "profile"),         u(p, "id"),
                             p.get_string("name"),    u(p, "slices"),
                             u(p, "instances"),       static_cast<unsigned long long>(p.get_int("memory_mb")),
                             u(p, "multiprocessors"), {},
                             u(p, "size", 1)};
            if (const Value* starts = p.find("starts"); starts && starts->is_array())
              for (const auto& st : starts->items()) s.starts.push_back(static_cast<unsigned>(st.as_int()));
            if (s.name.empty() || s.slices == 0 || s.starts.empty()) {
              error = "a MIG profile needs name, slices and starts";
              return false;
            }
            g.profiles.push_back(std::move(s));
          }
      }
      m_gpus.push_back(std::move(g));
    }
  }
  if (m_state_path.empty()) return true;
  std::ifstream in(m_state_path, std::ios::binary);
  if (!in) return true;  // nothing saved yet
  std::stringstream text;
  text << in.rdbuf();
  auto state = gpuhost::json::parse(text.str());
  if (!state || !state->is_object()) {
    error = "MIG state file " + m_state_path + " is not a JSON object";
    return false;
  }
  const bool rebooted = state->get_string("boot") != m_boot;
  const Value* gpus = state->find("gpus");
  if (!gpus || !gpus->is_array()) return true;
  for (std::size_t i = 0; i < gpus->items().size() && i < m_gpus.size(); ++i) {
    MigGpu& g = m_gpus[i];
    const Value& s = gpus->items()[i];
    if (!g.present) continue;
    g.current = u(s, "current");
    g.pending = u(s, "pending");
    if (rebooted) {  // a reboot applies the pending mode and loses every instance
      g.current = g.pending;
      continue;
    }
    if (const Value* list = s.find("instances"); list && list->is_array() && g.current)
      for (const auto& gi : list->items()) {
        const MigProfileSpec* p = g.by_index(u(gi, "profile"));
        if (!p) {
          error = "MIG state file " + m_state_path + ": an instance of a profile the scenario lacks";
          return false;
        }
        MigInstance instance{u(gi, "id"), p, u(gi, "start"), {}, Value::array()};
        if (const Value* procs = gi.find("processes"); procs && procs->is_array())
          instance.processes = *procs;
        if (const Value* cis = gi.find("computes"); cis && cis->is_array())
          for (const auto& ci : cis->items())
            instance.computes.push_back(
                {u(ci, "id"), u(ci, "profile"), compute_profile_slices(u(ci, "profile"))});
        g.instances.push_back(std::move(instance));
      }
  }
  return true;
}

void MigMachine::save() const {
  if (m_state_path.empty()) return;
  Value state = Value::object();
  state["boot"] = m_boot;
  Value gpus = Value::array();
  for (const auto& g : m_gpus) {
    Value s = Value::object();
    s["current"] = g.current;
    s["pending"] = g.pending;
    Value list = Value::array();
    for (const auto& gi : g.instances) {
      Value v = Value::object();
      v["id"] = gi.id;
      v["profile"] = gi.profile->index;
      v["name"] = gi.profile->name;  // for a person reading the file
      v["start"] = gi.start;
      Value cis = Value::array();
      for (const auto& ci : gi.computes) {
        Value c = Value::object();
        c["id"] = ci.id;
        c["profile"] = ci.profile;
        cis.push_back(std::move(c));
      }
      v["computes"] = std::move(cis);
      v["processes"] = gi.processes.is_array() ? gi.processes : Value::array();
      list.push_back(std::move(v));
    }
    s["instances"] = std::move(list);
    gpus.push_back(std::move(s));
  }
  state["gpus"] = std::move(gpus);
  const std::string tmp = m_state_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << gpuhost::json::dump(state, 2) << "\n";
  }
  std::remove(m_state_path.c_str());
  std::rename(tmp.c_str(), m_state_path.c_str());
}

nvmlReturn_t MigMachine::set_mode(std::size_t index, unsigned mode, bool busy, nvmlReturn_t* activation) {
  MigGpu* g = gpu(index);
  if (!g) return NVML_ERROR_NOT_SUPPORTED;
  if (!activation || mode > 1) return NVML_ERROR_INVALID_ARGUMENT;
#ifdef _WIN32
  // "On Windows, only disabling MIG mode is supported" (nvml.h).
  if (mode == 1) return NVML_ERROR_NOT_SUPPORTED;
#endif
  if (g->current == 1 && mode == 0 && !g->instances.empty()) return NVML_ERROR_IN_USE;
  g->pending = mode;
  *activation = NVML_SUCCESS;
  if (g->pending != g->current) {
    const bool held = busy || (g->clients.is_array() && !g->clients.items().empty());
    if (held)
      *activation = NVML_ERROR_IN_USE;
    else if (g->hypervisor)
      *activation = NVML_ERROR_RESET_REQUIRED;
    else
      g->current = g->pending;
  }
  save();
  return NVML_SUCCESS;
}

nvmlReturn_t MigMachine::create_instance(std::size_t index, unsigned profile_id, MigInstance** out) {
  MigGpu* g = gpu(index);
  if (!g || !out) return g ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
#ifdef _WIN32
  return NVML_ERROR_NOT_SUPPORTED;  // "Supported on Linux only" (nvml.h)
#endif
  if (g->current != 1) return NVML_ERROR_NOT_SUPPORTED;
  const MigProfileSpec* p = g->by_id(profile_id);
  if (!p) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned same = 0, used_slices = 0;
  for (const auto& gi : g->instances) {
    same += gi.profile == p;
    used_slices += gi.profile->slices;
  }
  if (same >= p->instances || used_slices + p->slices > g->compute_slices)
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
  for (unsigned start : p->starts) {
    bool free = start + p->size <= g->memory_slices;
    for (const auto& gi : g->instances) free = free && !overlaps(start, p->size, gi.start, gi.profile->size);
    if (!free) continue;
    unsigned id = 1;
    for (bool taken = true; taken; ++id) {
      taken = false;
      for (const auto& gi : g->instances) taken = taken || gi.id == id;
      if (!taken) break;
    }
    g->instances.push_back({id, p, start, {}, Value::array()});
    *out = &g->instances.back();
    save();
    return NVML_SUCCESS;
  }
  return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

nvmlReturn_t MigMachine::destroy_instance(std::size_t index, MigInstance* instance) {
  MigGpu* g = gpu(index);
  if (!g) return NVML_ERROR_INVALID_ARGUMENT;
  if (!instance->computes.empty()) return NVML_ERROR_IN_USE;
  if (instance->processes.is_array() && !instance->processes.items().empty()) return NVML_ERROR_IN_USE;
  g->instances.remove_if([instance](const MigInstance& gi) { return &gi == instance; });
  save();
  return NVML_SUCCESS;
}

nvmlReturn_t MigMachine::create_compute(MigInstance* instance, unsigned profile, MigCompute** out) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned slices = compute_profile_slices(profile);
  if (slices == 0 || slices > instance->profile->slices) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned used = 0;
  for (const auto& ci : instance->computes) used += ci.slices;
  if (used + slices > instance->profile->slices) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  unsigned id = 0;
  for (bool taken = true; taken; ++id) {
    taken = false;
    for (const auto& ci : instance->computes) taken = taken || ci.id == id;
    if (!taken) break;
  }
  instance->computes.push_back({id, profile, slices});
  *out = &instance->computes.back();
  save();
  return NVML_SUCCESS;
}

nvmlReturn_t MigMachine::destroy_compute(MigInstance* instance, MigCompute* compute) {
  if (instance->processes.is_array() && !instance->processes.items().empty()) return NVML_ERROR_IN_USE;
  instance->computes.remove_if([compute](const MigCompute& ci) { return &ci == compute; });
  save();
  return NVML_SUCCESS;
}

int MigMachine::owner(const void* instance) const {
  for (std::size_t i = 0; i < m_gpus.size(); ++i)
    for (const auto& gi : m_gpus[i].instances)
      if (&gi == instance) return static_cast<int>(i);
  return -1;
}

MigInstance* MigMachine::instance_of_compute(const void* compute, int* gpu_index) const {
  for (std::size_t i = 0; i < m_gpus.size(); ++i)
    for (const auto& gi : m_gpus[i].instances)
      for (const auto& ci : gi.computes)
        if (&ci == compute) {
          if (gpu_index) *gpu_index = static_cast<int>(i);
          return const_cast<MigInstance*>(&gi);
        }
  return nullptr;
}

}  // namespace fake_nvml
