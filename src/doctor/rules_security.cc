#include <map>

#include "base/strings.h"
#include "doctor/rules.h"

namespace gpuhost::doctor {

namespace {

struct KnownService {
  int port;
  const char* name;
  const char* risk;
  const char* fix;
};

// Default ports of ML services that are commonly started on all interfaces.
const KnownService k_services[] = {
    {8888, "Jupyter", "Jupyter runs code for whoever reaches it; without a token or password that is remote code execution",
     "restart it bound to loopback (jupyter lab --ip 127.0.0.1) and reach it with: ssh -L 8888:localhost:8888 HOST"},
    {6006, "TensorBoard", "TensorBoard has no authentication",
     "restart it without --bind_all (it then listens on localhost) and use: ssh -L 6006:localhost:6006 HOST"},
    {8265, "Ray dashboard", "the Ray dashboard accepts jobs without authentication",
     "start Ray with --dashboard-host 127.0.0.1 and tunnel: ssh -L 8265:localhost:8265 HOST"},
    {7860, "Gradio", "a Gradio app on all interfaces is public", "launch(server_name=\"127.0.0.1\") and tunnel over SSH"},
    {5000, "MLflow (or Flask)", "the MLflow tracking server has no authentication by default",
     "mlflow server --host 127.0.0.1 and tunnel over SSH"},
    {9400, "dcgm-exporter", "dcgm-exporter serves GPU metrics without authentication",
     "bind it to 127.0.0.1 (-a 127.0.0.1:9400) or restrict the port in the firewall"},
    {9808, "gpuhost serve", "gpuhost requires a token when bound beyond loopback; check that one is set",
     "bind to 127.0.0.1 (the default) or pass --token-file"},
};

}  // namespace

void judge_security(const HostFacts& facts, Findings& out) {
  const auto& s = facts.security;
  bool windows = facts.is_windows();
  {
    Severity sev = s.firewall_state == "on" ? Severity::ok : s.firewall_state == "off" ? Severity::warn : Severity::info;
    auto& f = out.add(Layer::security, sev, sev == Severity::warn ? "security.firewall.off" : "security.firewall",
                      s.firewall_state == "on" ? "Host firewall on" : s.firewall_state == "off" ? "Host firewall off" : "Host firewall state unknown");
    f.evidence = s.firewall_evidence;
    if (sev == Severity::warn) {
      f.evidence.push_back("a cloud security group may still filter traffic, but anything listening on all interfaces "
                           "is exposed to whatever it allows");
      f.fix = windows ? "netsh advfirewall set allprofiles state on"
                      : "sudo apt-get install -y ufw && sudo ufw allow OpenSSH && sudo ufw enable   (RHEL: sudo systemctl enable --now firewalld)";
    }
  }
  {
    Severity sev = s.encryption_state == "encrypted" ? Severity::ok : Severity::info;
    auto& f = out.add(Layer::security, sev, "security.disk_encryption",
                      s.encryption_state == "encrypted" ? "System disk encrypted"
                      : s.encryption_state == "not encrypted" ? "Disk not encrypted inside the OS"
                                                              : "Disk encryption state unknown");
    f.evidence = s.encryption_evidence;
    if (s.encryption_state == "not encrypted") {
      f.evidence.push_back("cloud volumes may still be encrypted at rest by the provider; check the volume's settings");
      f.fix = windows ? "manage-bde -on C: (BitLocker), or enable the provider's volume encryption"
                      : "enable the provider's volume encryption (EBS / managed disk / PD) or use LUKS for data volumes "
                        "(cryptsetup luksFormat); encrypt checkpoints before upload (gpuhost run --encrypt)";
    }
  }
  if (!s.listening_error.empty()) {
    auto& f = out.add(Layer::security, Severity::info, "security.listening.unknown", "Listening sockets not readable");
    f.evidence.push_back(s.listening_error);
    return;
  }
  std::map<int, std::vector<const platform::ListeningSocket*>> exposed;
  for (const auto& sock : s.listening)
    if (sock.all_interfaces()) exposed[sock.port].push_back(&sock);
  bool any = false;
  for (const auto& svc : k_services) {
    auto it = exposed.find(svc.port);
    if (it == exposed.end()) continue;
    any = true;
    auto& f = out.add(Layer::security, Severity::warn, "security.exposed." + std::to_string(svc.port),
                      std::string(svc.name) + " port " + std::to_string(svc.port) + " is open on all interfaces");
    for (const auto* sock : it->second)
      f.evidence.push_back("listening on " + sock->address + ":" + std::to_string(sock->port) +
                           (sock->pid ? " (pid " + std::to_string(sock->pid) + ")" : ""));
    f.evidence.push_back(svc.risk);
    f.fix = svc.fix;
  }
  if (!any) {
    auto& f = out.add(Layer::security, Severity::ok, "security.exposed", "No well-known ML service listens on all interfaces");
    std::size_t all = 0;
    for (const auto& [port, list] : exposed) all += list.size();
    f.evidence.push_back(std::to_string(s.listening.size()) + " listening TCP sockets, " + std::to_string(all) +
                         " on all interfaces; none on Jupyter/TensorBoard/Ray/Gradio/MLflow/dcgm-exporter/gpuhost ports");
  }
}

}  // namespace gpuhost::doctor
