#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "platform/test_support.h"

namespace gpuhost::platform::test_support {

LoopbackListener::LoopbackListener() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  m_socket = fd;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 1) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0)
    return;
  m_port = ntohs(addr.sin_port);
}

LoopbackListener::~LoopbackListener() {
  if (m_socket >= 0) ::close(static_cast<int>(m_socket));
}

bool spawn_self(const std::vector<std::string>& args) {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return false;
  self[n] = '\0';
  std::vector<char*> argv;
  argv.push_back(self);
  std::vector<std::string> copies = args;
  for (std::string& arg : copies) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    ::execv(self, argv.data());
    ::_exit(127);
  }
  return true;
}

}  // namespace gpuhost::platform::test_support
