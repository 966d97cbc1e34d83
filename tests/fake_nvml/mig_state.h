#pragma once
// The fake NVML's MIG state machine (README.md, "MIG state machine"): per GPU the mode (current
// and pending), the profile table the scenario gives, GPU instances at placements and compute
// instances inside them, with the errors NVML gives (INSUFFICIENT_RESOURCES when no placement is
// free, IN_USE for an instance a process or a compute instance holds, a pending mode where the
// platform cannot reset the GPU). Plain C++ over json::Value: fake_nvml_mig.cc exports it as
// NVML's C functions. The state can live in a file ($GPUHOST_FAKE_NVML_MIG_STATE) so that one
// process sees what another created, as with a real driver; a changed $GPUHOST_FAKE_NVML_BOOT
// is a reboot: pending modes become current and instances are gone (MIG guide: they do not
// survive one).

#include <list>
#include <string>
#include <vector>

#include "base/json.h"
#include "gpu/nvml_types.h"

namespace fake_nvml {

using gpuhost::gpu::nvml::nvmlReturn_t;

struct MigProfileSpec {
  unsigned index = 0;  // NVML_GPU_INSTANCE_PROFILE_*
  unsigned id = 0;
  std::string name;  // "1g.10gb"
  unsigned slices = 0;
  unsigned instances = 0;
  unsigned long long memory_mb = 0;
  unsigned multiprocessors = 0;
  std::vector<unsigned> starts;  // placements, in the order NVML tries them
  unsigned size = 0;             // memory slices one instance takes
};

struct MigCompute {
  unsigned id = 0;
  unsigned profile = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_*
  unsigned slices = 0;
};

struct MigInstance {
  unsigned id = 0;
  const MigProfileSpec* profile = nullptr;
  unsigned start = 0;
  std::list<MigCompute> computes;  // list: a compute instance's handle is its address
  gpuhost::json::Value processes;  // what a test wrote into the state file: compute processes on it
};

struct MigGpu {
  bool present = false;  // the scenario gives this GPU a "mig" object
  unsigned current = 0, pending = 0;
  bool hypervisor = false;       // "reset": "hypervisor": a passthrough VM, no reset
  gpuhost::json::Value clients;  // "clients": what holds the GPU open (blocks a reset)
  unsigned compute_slices = 7;
  unsigned memory_slices = 8;
  std::vector<MigProfileSpec> profiles;
  std::list<MigInstance> instances;  // list: an instance's handle is its address

  [[nodiscard]] const MigProfileSpec* by_index(unsigned index) const;
  [[nodiscard]] const MigProfileSpec* by_id(unsigned id) const;
};

class MigMachine {
 public:
  // Reads each device's "mig" from the scenario, then the state file when one is named and
  // exists. False with `error` on a malformed scenario or state file.
  bool load(const gpuhost::json::Value& scenario, std::string& error);
  [[nodiscard]] MigGpu* gpu(std::size_t index);

  // The calls, already past the init and handle checks. `busy` is true when the GPU itself has
  // compute processes (the scenario's "processes").
  nvmlReturn_t set_mode(std::size_t gpu, unsigned mode, bool busy, nvmlReturn_t* activation);
  nvmlReturn_t create_instance(std::size_t gpu, unsigned profile_id, MigInstance** out);
  nvmlReturn_t destroy_instance(std::size_t gpu, MigInstance* instance);
  nvmlReturn_t create_compute(MigInstance* instance, unsigned profile, MigCompute** out);
  nvmlReturn_t destroy_compute(MigInstance* instance, MigCompute* compute);

  // The GPU owning a live instance / compute handle; -1 when the handle is not live.
  [[nodiscard]] int owner(const void* instance) const;
  [[nodiscard]] MigInstance* instance_of_compute(const void* compute, int* gpu) const;

  // Writes the state file (when named): after every change.
  void save() const;

 private:
  std::vector<MigGpu> m_gpus;
  std::string m_state_path;
  std::string m_boot;
};

// Slices of NVML_COMPUTE_INSTANCE_PROFILE_* index `profile`; 0 for one the fake does not model.
unsigned compute_profile_slices(unsigned profile);

}  // namespace fake_nvml
