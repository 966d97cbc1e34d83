// clang-format off
#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
// clang-format on

#include <atomic>
#include <cstring>

#include "platform/test_support.h"
#include "platform/win32_util.h"

namespace gpuhost::platform::test_support {

LoopbackListener::LoopbackListener() {
  WSADATA data;
  if (WSAStartup(MAKEWORD(2, 2), &data) != 0) return;
  SOCKET s = ::socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  if (s == INVALID_SOCKET) return;
  m_socket = static_cast<std::intptr_t>(s);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int length = sizeof addr;
  if (::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(s, 1) != 0 ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&addr), &length) != 0)
    return;
  m_port = ntohs(addr.sin_port);
}

LoopbackListener::~LoopbackListener() {
  if (m_socket != -1) ::closesocket(static_cast<SOCKET>(m_socket));
  WSACleanup();
}

bool spawn_self(const std::vector<std::string>& args) {
  wchar_t self[MAX_PATH * 4];
  DWORD n = GetModuleFileNameW(nullptr, self, static_cast<DWORD>(std::size(self)));
  if (n == 0 || n >= std::size(self)) return false;
  // Test arguments hold no quotes and never end in a backslash, so plain quoting is enough here.
  std::wstring command_line = L"\"" + std::wstring(self) + L"\"";
  for (const std::string& arg : args) command_line += L" \"" + to_wide(arg) + L"\"";
  STARTUPINFOW startup{};
  startup.cb = sizeof startup;
  startup.dwFlags = STARTF_USESTDHANDLES;
  startup.hStdInput = GetStdHandle(STD_INPUT_HANDLE);
  startup.hStdOutput = GetStdHandle(STD_OUTPUT_HANDLE);
  startup.hStdError = GetStdHandle(STD_ERROR_HANDLE);
  PROCESS_INFORMATION process{};
  if (!CreateProcessW(self, command_line.data(), nullptr, nullptr, TRUE, 0, nullptr, nullptr, &startup,
                      &process))
    return false;
  CloseHandle(process.hThread);
  CloseHandle(process.hProcess);
  return true;
}

namespace {

std::atomic<int> g_trap_exit_code{0};

BOOL WINAPI on_trapped_event(DWORD event) {
  if (event != CTRL_BREAK_EVENT && event != CTRL_C_EVENT) return FALSE;
  const char* message = event == CTRL_BREAK_EVENT ? "trapped CTRL_BREAK\n" : "trapped CTRL_C\n";
  DWORD written = 0;
  WriteFile(GetStdHandle(STD_OUTPUT_HANDLE), message, static_cast<DWORD>(strlen(message)), &written, nullptr);
  ExitProcess(static_cast<UINT>(g_trap_exit_code.load()));
}

}  // namespace

// CREATE_NEW_PROCESS_GROUP starts us with Ctrl-C ignored; re-enabling it lets the CTRL_C_EVENT
// that ChildProcess::send delivers under Wine in place of CTRL_BREAK reach the handler.
bool trap(const std::string& name, int exit_code) {
  if (name != "break") return false;
  g_trap_exit_code.store(exit_code);
  return SetConsoleCtrlHandler(nullptr, FALSE) && SetConsoleCtrlHandler(on_trapped_event, TRUE);
}

bool process_is_running(long pid) {
  UniqueHandle process(OpenProcess(SYNCHRONIZE, FALSE, static_cast<DWORD>(pid)));
  return process.valid() && WaitForSingleObject(process.get(), 0) == WAIT_TIMEOUT;
}

}  // namespace gpuhost::platform::test_support
