#include <fstream>
#include <iterator>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
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

namespace {

volatile sig_atomic_t g_trap_exit_code = 0;

extern "C" void on_trapped_signal(int signal_number) {
  char message[64] = "trapped SIG";
  const char* name = ::sigabbrev_np(signal_number);
  ::strncat(message, name ? name : "?", 16);
  ::strcat(message, "\n");
  ssize_t ignored = ::write(1, message, ::strlen(message));
  (void)ignored;
  ::_exit(g_trap_exit_code);
}

}  // namespace

bool trap(const std::string& name, int exit_code) {
  int number = name == "int"    ? SIGINT
               : name == "term" ? SIGTERM
               : name == "hup"  ? SIGHUP
               : name == "usr1" ? SIGUSR1
               : name == "usr2" ? SIGUSR2
                                : 0;
  if (number == 0) return false;
  g_trap_exit_code = exit_code;
  struct sigaction action {};
  action.sa_handler = on_trapped_signal;
  sigemptyset(&action.sa_mask);
  return ::sigaction(number, &action, nullptr) == 0;
}

bool process_is_running(long pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  if (!file) return false;
  std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // "pid (comm) S ...": the state follows the last ')', since comm may hold one.
  std::size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

}  // namespace gpuhost::platform::test_support
