#pragma once
// Which processes have the fake NVML open, across processes, as a real driver knows who holds
// /dev/nvidia*: a GPU reset (a MIG mode change) fails with NVML_ERROR_IN_USE while another does.
// Each process with NVML initialised holds an flock on <$GPUHOST_FAKE_NVML_MIG_STATE>.clients/<pid>
// (only when a MIG state file is named: the state is shared through it). POSIX only; the Windows
// build cannot change MIG modes at all (nvml.h).

#include <vector>

namespace fake_nvml {

void register_nvml_client();    // on the first nvmlInit of this process
void unregister_nvml_client();  // on its last nvmlShutdown
// The other processes that have NVML open now (their pids); a file whose process is gone is removed.
[[nodiscard]] std::vector<long> other_nvml_clients();

}  // namespace fake_nvml
