#include "platform/service.h"

namespace gpuhost::platform {
namespace {

Error windows_only() {
  return Error{ErrorCode::unsupported,
               "Windows services are Windows-only; on Linux the systemd units do this: "
               "systemctl enable --now gpuhost-serve, systemctl start gpuhost-run@NAME (README)"};
}

}  // namespace

Result<std::vector<std::string>> install_service(const ServiceDefinition&) {
  return std::unexpected(windows_only());
}
Result<void> uninstall_service(const std::string&) {
  return std::unexpected(windows_only());
}
Result<void> start_service(const std::string&) {
  return std::unexpected(windows_only());
}
Result<ServiceState> query_service(const std::string&) {
  return std::unexpected(windows_only());
}
Result<ServiceState> stop_service(const std::string&, std::chrono::milliseconds) {
  return std::unexpected(windows_only());
}
Result<int> run_as_service(const std::string&, const std::function<int()>&, const std::vector<int>&) {
  return std::unexpected(windows_only());
}
bool report_event(EventType, const std::string&) {
  return false;
}

}  // namespace gpuhost::platform
