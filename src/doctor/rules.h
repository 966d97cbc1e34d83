#pragma once

#include "doctor/facts.h"
#include "doctor/finding.h"

namespace gpuhost::knowledge {
class Knowledge;
}

namespace gpuhost::doctor {

// Judges what was observed. Pure: reads only `facts` and `knowledge`, so the same facts give the
// same findings on any host (that is what `doctor --from` relies on). Fix texts are for the OS in
// the facts, not the OS running the judgement.
[[nodiscard]] Findings evaluate(const HostFacts& facts, const knowledge::Knowledge& knowledge);

// One function per layer, in report order.
void judge_host(const HostFacts& facts, Findings& out);
void judge_gpu(const HostFacts& facts, const knowledge::Knowledge& knowledge, Findings& out);
void judge_cuda(const HostFacts& facts, const knowledge::Knowledge& knowledge, Findings& out);
void judge_frameworks(const HostFacts& facts, const knowledge::Knowledge& knowledge, Findings& out);
void judge_os(const HostFacts& facts, Findings& out);
void judge_security(const HostFacts& facts, Findings& out);
void judge_preflight(const HostFacts& facts, const knowledge::Knowledge& knowledge, Findings& out);

// Facts several layers need.
// True when NVML sees at least one GPU, or the OS shows an NVIDIA PCI device.
[[nodiscard]] bool host_has_nvidia_gpu(const HostFacts& facts);
// The install command for the NVIDIA driver on the facts' OS/distribution.
[[nodiscard]] std::string driver_install_fix(const HostFacts& facts);

}  // namespace gpuhost::doctor
