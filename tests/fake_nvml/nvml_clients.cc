#include "nvml_clients.h"

#include <cstdlib>
#include <string>

#ifndef _WIN32
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace fake_nvml {

#ifndef _WIN32
namespace {

int g_client_fd = -1;

std::string clients_dir() {
  const char* state = std::getenv("GPUHOST_FAKE_NVML_MIG_STATE");
  return state && *state ? std::string(state) + ".clients" : std::string();
}

}  // namespace

void register_nvml_client() {
  const std::string dir = clients_dir();
  if (dir.empty() || g_client_fd >= 0) return;
  ::mkdir(dir.c_str(), 0777);
  const std::string path = dir + "/" + std::to_string(::getpid());
  g_client_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (g_client_fd >= 0) ::flock(g_client_fd, LOCK_EX);
}

void unregister_nvml_client() {
  if (g_client_fd < 0) return;
  const std::string path = clients_dir() + "/" + std::to_string(::getpid());
  ::unlink(path.c_str());
  ::close(g_client_fd);
  g_client_fd = -1;
}

std::vector<long> other_nvml_clients() {
  std::vector<long> out;
  const std::string dir = clients_dir();
  if (dir.empty()) return out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  const std::string self = std::to_string(::getpid());
  while (dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name == "." || name == ".." || name == self) continue;
    const std::string path = dir + "/" + name;
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      ::unlink(path.c_str());  // its process is gone
    } else {
      out.push_back(std::strtol(name.c_str(), nullptr, 10));
    }
    ::close(fd);
  }
  ::closedir(d);
  return out;
}
#else
void register_nvml_client() {}
void unregister_nvml_client() {}
std::vector<long> other_nvml_clients() {
  return {};
}
#endif

}  // namespace fake_nvml
