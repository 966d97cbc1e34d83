#include <map>
#include <set>
#include <string>
#include <vector>

#include <windows.h>
// After windows.h, which it needs.
#include <tlhelp32.h>

#include "platform/process_info.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {

std::optional<std::string> process_name(unsigned pid) {
  if (pid == 0) return std::nullopt;
  // PROCESS_QUERY_LIMITED_INFORMATION is granted for most processes of other users too
  // (QueryFullProcessImageNameW, Microsoft Learn).
  UniqueHandle process(OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, pid));
  if (!process.valid()) return std::nullopt;
  std::wstring path(32768, L'\0');
  DWORD size = static_cast<DWORD>(path.size());
  if (!QueryFullProcessImageNameW(process.get(), 0, path.data(), &size)) return std::nullopt;
  path.resize(size);
  const auto slash = path.find_last_of(L"\\/");
  const std::wstring name = slash == std::wstring::npos ? path : path.substr(slash + 1);
  if (name.empty()) return std::nullopt;
  return to_utf8(name);
}

namespace {

// 100 ns units of a FILETIME, in seconds.
double seconds_of(const FILETIME& t) {
  return static_cast<double>((static_cast<std::uint64_t>(t.dwHighDateTime) << 32) | t.dwLowDateTime) * 1e-7;
}

// A process's command line through NtQueryInformationProcess(ProcessCommandLineInformation = 60,
// Windows 8.1+), with PROCESS_QUERY_LIMITED_INFORMATION; "" where it is not given.
std::string command_line_of(HANDLE process) {
  using Query = LONG(WINAPI*)(HANDLE, ULONG, PVOID, ULONG, PULONG);
  static const auto query = reinterpret_cast<Query>(
      reinterpret_cast<void*>(GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "NtQueryInformationProcess")));
  if (!query) return {};
  struct CountedString {  // UNICODE_STRING
    USHORT length;
    USHORT maximum_length;
    PWSTR buffer;
  };
  std::vector<unsigned char> buffer(4096);
  ULONG needed = 0;
  LONG status = query(process, 60, buffer.data(), static_cast<ULONG>(buffer.size()), &needed);
  if (status != 0 && needed > buffer.size() && needed < (1u << 20)) {
    buffer.resize(needed);
    status = query(process, 60, buffer.data(), static_cast<ULONG>(buffer.size()), &needed);
  }
  if (status != 0) return {};
  const auto* text = reinterpret_cast<const CountedString*>(buffer.data());
  if (!text->buffer) return {};
  return to_utf8(std::wstring_view(text->buffer, text->length / sizeof(wchar_t)));
}

// GetThreadDescription (Windows 10 1607+), looked up at run time so that older systems still start.
std::string thread_name_of(HANDLE thread) {
  using Describe = HRESULT(WINAPI*)(HANDLE, PWSTR*);
  static const auto describe = reinterpret_cast<Describe>(
      reinterpret_cast<void*>(GetProcAddress(GetModuleHandleW(L"kernel32.dll"), "GetThreadDescription")));
  if (!describe) return {};
  PWSTR text = nullptr;
  if (FAILED(describe(thread, &text)) || !text) return {};
  std::string name = to_utf8(text);
  LocalFree(text);
  return name;
}

}  // namespace

Result<GroupActivity> read_group_activity(long pgid) {
  UniqueHandle snapshot(CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS | TH32CS_SNAPTHREAD, 0));
  if (!snapshot.valid() || snapshot.get() == INVALID_HANDLE_VALUE)
    return make_error(ErrorCode::io_error, "CreateToolhelp32Snapshot failed");
  // The process tree under `pgid`: parent links, followed until nothing is added.
  std::map<long, PROCESSENTRY32W> all;
  PROCESSENTRY32W entry{};
  entry.dwSize = sizeof entry;
  for (BOOL more = Process32FirstW(snapshot.get(), &entry); more;
       more = Process32NextW(snapshot.get(), &entry))
    all[static_cast<long>(entry.th32ProcessID)] = entry;
  if (!all.contains(pgid))
    return make_error(ErrorCode::not_found, "no process " + std::to_string(pgid) + " is running");
  std::set<long> tree{pgid};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [pid, e] : all)
      if (!tree.contains(pid) && tree.contains(static_cast<long>(e.th32ParentProcessID)) && pid != 0) {
        tree.insert(pid);
        grew = true;
      }
  }
  GroupActivity group;
  group.faults_visible = false;
  for (long pid : tree) {
    const PROCESSENTRY32W& e = all[pid];
    GroupProcess p;
    p.pid = pid;
    p.ppid = pid == pgid ? 0 : static_cast<long>(e.th32ParentProcessID);
    p.name = to_utf8(e.szExeFile);
    UniqueHandle process(OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, static_cast<DWORD>(pid)));
    if (process.valid()) {
      p.command_line = command_line_of(process.get());
      IO_COUNTERS io{};
      if (GetProcessIoCounters(process.get(), &io))
        group.read_bytes += io.ReadTransferCount;
      else
        group.io_visible = false;
    } else {
      group.io_visible = false;
    }
    group.processes.push_back(std::move(p));
  }
  THREADENTRY32 thread{};
  thread.dwSize = sizeof thread;
  for (BOOL more = Thread32First(snapshot.get(), &thread); more;
       more = Thread32Next(snapshot.get(), &thread)) {
    const long pid = static_cast<long>(thread.th32OwnerProcessID);
    if (!tree.contains(pid)) continue;
    UniqueHandle handle(OpenThread(THREAD_QUERY_LIMITED_INFORMATION, FALSE, thread.th32ThreadID));
    if (!handle.valid()) continue;
    FILETIME created{}, exited{}, kernel{}, user{};
    if (!GetThreadTimes(handle.get(), &created, &exited, &kernel, &user)) continue;
    ThreadTimes t;
    t.pid = pid;
    t.tid = static_cast<long>(thread.th32ThreadID);
    t.name = thread_name_of(handle.get());
    if (t.name.empty()) t.name = to_utf8(all[pid].szExeFile);
    t.cpu_seconds = seconds_of(kernel) + seconds_of(user);
    group.threads.push_back(std::move(t));
  }
  return group;
}

std::optional<double> pressure_some_avg10(std::string_view) {
  return std::nullopt;
}

std::optional<std::uint64_t> swapped_in_pages() {
  return std::nullopt;
}

}  // namespace gpuhost::platform
