// A stand-in for powershell.exe, for `gpuhost setup --apply` on Windows under Wine (which has no
// PowerShell). gpuhost runs `<powershell> -NoProfile -NonInteractive -ExecutionPolicy Bypass
// -File <state>\steps\<id>.ps1` (an action) or `<id>.probe.ps1` (a probe). This program
// interprets neither: it records each call in GPUHOST_FAKE_PS_LOG and keeps the set of steps
// "done" in GPUHOST_FAKE_PS_DONE, so the engine's order, skips, restarts and failures can be
// checked at the process boundary:
//   probe   exit 0 when the step is in the done file, else 1
//   action  add the step to the done file and exit 0, or exit 3 when the step is named in
//           GPUHOST_FAKE_PS_FAIL (printing a line the engine must keep in the step's log)
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool is_done(const std::string& done_file, const std::string& id) {
  std::ifstream in(done_file);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line.back() == '\r' ? line.substr(0, line.size() - 1) == id : line == id)
      return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string file;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "-File") file = argv[i + 1];
  if (file.empty()) {
    std::cerr << "fake powershell: no -File\n";
    return 2;
  }
  std::string name = file.substr(file.find_last_of("/\\") + 1);
  const bool probe = name.size() > 10 && name.compare(name.size() - 10, 10, ".probe.ps1") == 0;
  std::string id = name.substr(0, name.size() - (probe ? 10 : 4));
  std::ofstream(env("GPUHOST_FAKE_PS_LOG"), std::ios::app) << (probe ? "probe " : "run ") << id << "\n";
  const std::string done = env("GPUHOST_FAKE_PS_DONE");
  if (probe) return is_done(done, id) ? 0 : 1;
  if (env("GPUHOST_FAKE_PS_FAIL") == id) {
    std::cout << "fake powershell: " << id << " failed as asked\n";
    return 3;
  }
  std::ofstream(done, std::ios::app) << id << "\n";
  return 0;
}
