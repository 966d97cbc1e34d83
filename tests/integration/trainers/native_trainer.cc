// A deterministic stand-in trainer in C++, for gpuhost's integration tests on Windows (Wine has no
// Python) and Linux. Same spirit as stdlib_trainer.py:
//
//   native_trainer [--steps N] [--step-time-ms MS] [--every N] [--out DIR] [--size K]
//                  [--resume PATH] [--resume-log FILE] [--final-state FILE] [--pid-file FILE]
//                  [--save-request FILE] [--ignore-save-requests] [--fail-at-step N
//                  [--fail-once-marker FILE]] [--spawn-grandchild PIDFILE] [--spin]
//   native_trainer --sleep-forever --pid-file FILE
//
// The model is K doubles; step s sets w[i] = w[i]*0.999 + sin(s*i)*1e-3, so a run resumed from an
// exact checkpoint ends bit-identical. Every --every steps it writes OUT/ckpt-000010.safetensors
// (one F64 tensor "w", __metadata__ {"step": "10", "fnv1a64": checksum of the data}) to a hidden
// temp name, flushes it to disk and renames it into place. It resumes from --resume or
// GPUHOST_RESUME_FROM after checking the file (header bounds, sizes, checksum) and appends
// "OK <path> <step>" or "INVALID <path> <reason>" to --resume-log (exit 3 when invalid).
//
// Save requests (SIGUSR1; Windows CTRL_BREAK_EVENT; or the file GPUHOST_SAVE_REQUEST) save at the
// end of the current step and print "save requested at step N". SIGTERM ends the run after the
// current step with exit 143, SIGINT / CTRL_C / console close with 130.
// --spawn-grandchild starts a copy of this program in --sleep-forever mode (it writes its pid to
// PIDFILE and ignores every polite signal), to test that gpuhost kills the whole tree.
// This is a test program: the #ifdef _WIN32 below is allowed here, not in src/.
#include <atomic>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#ifdef _WIN32
#include <io.h>
#include <windows.h>
#else
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#endif

namespace fs = std::filesystem;

namespace {

constexpr int k_exit_invalid_checkpoint = 3;
constexpr int k_exit_sigint = 130;
constexpr int k_exit_sigterm = 143;
static_assert(std::endian::native == std::endian::little, "the checkpoint stores little-endian doubles");

// Lock-free atomics are safe in POSIX signal handlers and across the Windows console-handler
// thread.
std::atomic<int> g_save_requested{0};
std::atomic<int> g_stop_exit_code{0};
std::atomic<bool> g_ignore_save_requests{false};

struct Options {
  long steps = 100;
  long step_time_ms = 0;
  long every = 10;
  long size = 1024;
  long fail_at_step = -1;
  std::string out = "checkpoints";
  std::string resume, resume_log, final_state, pid_file, save_request, fail_once_marker, spawn_grandchild;
  bool ignore_save_requests = false;
  bool sleep_forever = false;
  bool spin = false;  // --spin: each step's time is spent computing (a busy main thread), not asleep
};

std::optional<Options> parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--ignore-save-requests") {
      o.ignore_save_requests = true;
      continue;
    }
    if (flag == "--sleep-forever") {
      o.sleep_forever = true;
      continue;
    }
    if (flag == "--spin") {
      o.spin = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "native_trainer: %s needs a value\n", flag.c_str());
      return std::nullopt;
    }
    const std::string value = argv[++i];
    long* number = flag == "--steps"          ? &o.steps
                   : flag == "--step-time-ms" ? &o.step_time_ms
                   : flag == "--every"        ? &o.every
                   : flag == "--size"         ? &o.size
                   : flag == "--fail-at-step" ? &o.fail_at_step
                                              : nullptr;
    std::string* text = flag == "--out"                ? &o.out
                        : flag == "--resume"           ? &o.resume
                        : flag == "--resume-log"       ? &o.resume_log
                        : flag == "--final-state"      ? &o.final_state
                        : flag == "--pid-file"         ? &o.pid_file
                        : flag == "--save-request"     ? &o.save_request
                        : flag == "--fail-once-marker" ? &o.fail_once_marker
                        : flag == "--spawn-grandchild" ? &o.spawn_grandchild
                                                       : nullptr;
    if (number != nullptr) {
      *number = std::strtol(value.c_str(), nullptr, 10);
    } else if (text != nullptr) {
      *text = value;
    } else {
      std::fprintf(stderr, "native_trainer: unknown flag %s\n", flag.c_str());
      return std::nullopt;
    }
  }
  if (o.size <= 0) o.size = 1;
  return o;
}

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

long current_pid() {
#ifdef _WIN32
  return static_cast<long>(GetCurrentProcessId());
#else
  return static_cast<long>(getpid());
#endif
}

void write_text(const std::string& path, const std::string& text, std::ios::openmode mode) {
  std::ofstream out(path, mode | std::ios::binary);
  out << text;
}

void say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

#ifdef _WIN32
BOOL WINAPI on_console_event(DWORD event) {
  // Both group-targetable console events ask for a save: gpuhost sends CTRL_BREAK, which Wine 8
  // cannot deliver, so under Wine its fallback sends the one event wineserver implements, CTRL_C
  // (platform/child_process_win32.cc). On real Windows CTRL_C cannot reach a process group.
  if (event == CTRL_BREAK_EVENT || event == CTRL_C_EVENT) {
    if (!g_ignore_save_requests.load()) g_save_requested.store(1);
    return TRUE;
  }
  g_stop_exit_code.store(k_exit_sigint);  // close, logoff, shutdown
  return TRUE;
}

BOOL WINAPI ignore_console_event(DWORD) { return TRUE; }
#else
void on_save_signal(int) { g_save_requested.store(1); }
void on_stop_signal(int signal_number) {
  g_stop_exit_code.store(signal_number == SIGTERM ? k_exit_sigterm : k_exit_sigint);
}

void set_handler(int signal_number, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  sigaction(signal_number, &action, nullptr);
}
#endif

void install_handlers(const Options& o) {
  g_ignore_save_requests.store(o.ignore_save_requests);
#ifdef _WIN32
  // A child started with CREATE_NEW_PROCESS_GROUP has CTRL_C disabled until it re-enables it.
  // Source: learn.microsoft.com, SetConsoleCtrlHandler ("This attribute ... is inherited").
  SetConsoleCtrlHandler(nullptr, FALSE);
  SetConsoleCtrlHandler(on_console_event, TRUE);
#else
  set_handler(SIGUSR1, o.ignore_save_requests ? SIG_IGN : on_save_signal);
  set_handler(SIGTERM, on_stop_signal);
  set_handler(SIGINT, on_stop_signal);
#endif
}

[[noreturn]] void sleep_forever(const Options& o) {
#ifdef _WIN32
  SetConsoleCtrlHandler(ignore_console_event, TRUE);
#else
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) set_handler(signal_number, SIG_IGN);
#endif
  if (!o.pid_file.empty()) write_text(o.pid_file, std::to_string(current_pid()) + "\n", std::ios::trunc);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

bool spawn_grandchild(const std::string& pid_file) {
#ifdef _WIN32
  wchar_t exe[MAX_PATH];
  if (GetModuleFileNameW(nullptr, exe, MAX_PATH) == 0) return false;
  std::wstring wide_pid_file(pid_file.size() + 1, L'\0');
  const int n = MultiByteToWideChar(CP_UTF8, 0, pid_file.c_str(), -1, wide_pid_file.data(),
                                    static_cast<int>(wide_pid_file.size()));
  if (n <= 0) return false;
  wide_pid_file.resize(static_cast<size_t>(n - 1));
  std::wstring command = L"\"" + std::wstring(exe) + L"\" --sleep-forever --pid-file \"" + wide_pid_file + L"\"";
  STARTUPINFOW startup{};
  startup.cb = sizeof(startup);
  PROCESS_INFORMATION process{};
  if (!CreateProcessW(exe, command.data(), nullptr, nullptr, FALSE, 0, nullptr, nullptr, &startup, &process)) {
    return false;
  }
  CloseHandle(process.hThread);
  CloseHandle(process.hProcess);
  return true;
#else
  const pid_t child = fork();
  if (child < 0) return false;
  if (child == 0) {
    execl("/proc/self/exe", "native_trainer", "--sleep-forever", "--pid-file", pid_file.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  return true;
#endif
}

std::uint64_t fnv1a64(const std::string& bytes) {
  std::uint64_t hash = 14695981039346656037ULL;  // FNV-1a, www.isthe.com/chongo/tech/comp/fnv/
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::string weights_bytes(const std::vector<double>& weights) {
  std::string raw(weights.size() * sizeof(double), '\0');
  std::memcpy(raw.data(), weights.data(), raw.size());
  return raw;
}

std::string hex(std::uint64_t value) {
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016" PRIx64, value);
  return buffer;
}

// safetensors: u64 little-endian header length N, N bytes of JSON (padded with spaces to a
// multiple of 8), then the tensor bytes. Source: huggingface/safetensors README.md.
std::string checkpoint_bytes(long step, const std::vector<double>& weights) {
  const std::string raw = weights_bytes(weights);
  std::string header = R"({"__metadata__":{"step":")" + std::to_string(step) + R"(","fnv1a64":")" +
                       hex(fnv1a64(raw)) + R"("},"w":{"dtype":"F64","shape":[)" +
                       std::to_string(weights.size()) + R"(],"data_offsets":[0,)" + std::to_string(raw.size()) +
                       "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  std::uint64_t length = header.size();
  std::memcpy(out.data(), &length, 8);
  return out + header + raw;
}

bool sync_and_close(std::FILE* file) {
  bool ok = std::fflush(file) == 0;
#ifdef _WIN32
  ok = ok && _commit(_fileno(file)) == 0;
#else
  ok = ok && fsync(fileno(file)) == 0;
#endif
  return std::fclose(file) == 0 && ok;
}

bool write_checkpoint(const Options& o, long step, const std::vector<double>& weights) {
  char name[64];
  std::snprintf(name, sizeof(name), "ckpt-%06ld.safetensors", step);
  const fs::path dir = o.out;
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path final_path = dir / name;
  const fs::path temp_path = dir / ("." + std::string(name) + ".tmp");
  const std::string bytes = checkpoint_bytes(step, weights);
  std::FILE* file = std::fopen(temp_path.string().c_str(), "wb");
  if (file == nullptr) return false;
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  if (!sync_and_close(file) || !written) return false;
#ifdef _WIN32
  // Source: learn.microsoft.com, MoveFileExW (MOVEFILE_WRITE_THROUGH returns after the move is on disk).
  if (!MoveFileExW(temp_path.wstring().c_str(), final_path.wstring().c_str(),
                   MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
    return false;
  }
#else
  fs::rename(temp_path, final_path, ec);
  if (ec) return false;
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd >= 0) {
    fsync(dir_fd);
    ::close(dir_fd);
  }
#endif
  say("saved " + final_path.string() + " at step " + std::to_string(step));
  return true;
}

// The value after `"key":` in `header`, as text up to the next `"` (strings) or `,]}` (numbers).
std::optional<std::string> field(const std::string& header, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t at = header.find(needle);
  if (at == std::string::npos) return std::nullopt;
  size_t begin = at + needle.size();
  if (begin < header.size() && header[begin] == '[') ++begin;
  const bool quoted = begin < header.size() && header[begin] == '"';
  if (quoted) ++begin;
  const size_t end = header.find_first_of(quoted ? "\"" : ",]}", begin);
  if (end == std::string::npos) return std::nullopt;
  return header.substr(begin, end - begin);
}

// Reads and checks a checkpoint; on failure returns the reason in `problem`.
std::optional<std::vector<double>> load_checkpoint(const std::string& path, long& step, std::string& problem) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    problem = "cannot open";
    return std::nullopt;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 8) {
    problem = "shorter than the 8-byte header length";
    return std::nullopt;
  }
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  if (length > bytes.size() - 8) {
    problem = "header length " + std::to_string(length) + " past the end of the file";
    return std::nullopt;
  }
  const std::string header = bytes.substr(8, length);
  const auto step_text = field(header, "step");
  const auto checksum = field(header, "fnv1a64");
  const auto count_text = field(header, "shape");
  const auto offsets = field(header, "data_offsets");  // "0" (the begin)
  const size_t end_at = header.find("\"data_offsets\":[0,");
  if (!step_text || !checksum || !count_text || !offsets || end_at == std::string::npos) {
    problem = "header lacks step, fnv1a64, shape or data_offsets";
    return std::nullopt;
  }
  const std::uint64_t count = std::strtoull(count_text->c_str(), nullptr, 10);
  const std::uint64_t data_end = std::strtoull(header.c_str() + end_at + 18, nullptr, 10);
  const std::string data = bytes.substr(8 + length);
  if (data_end != data.size() || data_end != count * sizeof(double)) {
    problem = "data is " + std::to_string(data.size()) + " bytes, header says " + std::to_string(data_end);
    return std::nullopt;
  }
  if (hex(fnv1a64(data)) != *checksum) {
    problem = "checksum mismatch";
    return std::nullopt;
  }
  std::vector<double> weights(static_cast<size_t>(count));
  std::memcpy(weights.data(), data.data(), data.size());
  step = std::strtol(step_text->c_str(), nullptr, 10);
  return weights;
}

bool take_request_file(const std::string& path) {
  if (path.empty()) return false;
  std::error_code ec;
  return fs::remove(path, ec);
}

}  // namespace

int main(int argc, char** argv) {
  const auto parsed = parse(argc, argv);
  if (!parsed) return 2;
  const Options& o = *parsed;
  if (o.sleep_forever) sleep_forever(o);
  install_handlers(o);
  if (!o.pid_file.empty()) write_text(o.pid_file, std::to_string(current_pid()) + "\n", std::ios::trunc);
  if (!o.spawn_grandchild.empty() && !spawn_grandchild(o.spawn_grandchild)) {
    std::fprintf(stderr, "native_trainer: cannot start the grandchild\n");
    return 1;
  }
  const std::string request_file =
      o.ignore_save_requests ? "" : (o.save_request.empty() ? env_or_empty("GPUHOST_SAVE_REQUEST") : o.save_request);
  const std::string resume = o.resume.empty() ? env_or_empty("GPUHOST_RESUME_FROM") : o.resume;

  long step = 0;
  std::vector<double> weights(static_cast<size_t>(o.size));
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<double>(i) / static_cast<double>(o.size);
  if (!resume.empty()) {
    std::string problem;
    auto loaded = load_checkpoint(resume, step, problem);
    if (loaded && loaded->size() != weights.size()) problem = "size differs from --size";
    if (!loaded || !problem.empty()) {
      if (!o.resume_log.empty()) write_text(o.resume_log, "INVALID " + resume + " " + problem + "\n", std::ios::app);
      std::fprintf(stderr, "invalid checkpoint %s: %s\n", resume.c_str(), problem.c_str());
      return k_exit_invalid_checkpoint;
    }
    weights = std::move(*loaded);
    if (!o.resume_log.empty()) write_text(o.resume_log, "OK " + resume + " " + std::to_string(step) + "\n", std::ios::app);
    say("resumed from " + resume + " at step " + std::to_string(step));
  }

  while (step < o.steps) {
    ++step;
    for (size_t i = 0; i < weights.size(); ++i) {
      weights[i] = weights[i] * 0.999 + std::sin(static_cast<double>(step) * static_cast<double>(i)) * 1e-3;
    }
    if (o.step_time_ms > 0 && o.spin) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.step_time_ms);
      volatile double sink = 0;
      while (std::chrono::steady_clock::now() < until)
        for (int k = 0; k < 1000; ++k) sink = sink + std::sin(k * 1e-3);
    } else if (o.step_time_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(o.step_time_ms));
    }
    say("step " + std::to_string(step));
    const bool by_signal = g_save_requested.exchange(0) != 0 && !o.ignore_save_requests;
    const bool by_file = take_request_file(request_file);
    const bool requested = by_signal || by_file;
    if (requested) say("save requested at step " + std::to_string(step));
    if (requested || (o.every > 0 && step % o.every == 0)) {
      if (!write_checkpoint(o, step, weights)) {
        std::fprintf(stderr, "native_trainer: cannot write a checkpoint in %s\n", o.out.c_str());
        return 1;
      }
    }
    if (step == o.fail_at_step && (o.fail_once_marker.empty() || !fs::exists(o.fail_once_marker))) {
      if (!o.fail_once_marker.empty()) write_text(o.fail_once_marker, "failed\n", std::ios::trunc);
      std::fprintf(stderr, "failing at step %ld\n", step);
      return 1;
    }
    if (const int code = g_stop_exit_code.load(); code != 0) {
      say("terminated at step " + std::to_string(step));
      return code;
    }
  }
  if (!o.final_state.empty()) {
    std::string text;
    for (char c : weights_bytes(weights)) {
      static constexpr char k_digits[] = "0123456789abcdef";
      const auto value = static_cast<unsigned char>(c);
      text += k_digits[value >> 4];
      text += k_digits[value & 15];
    }
    write_text(o.final_state, text + "\n", std::ios::trunc);
  }
  say("done at step " + std::to_string(step));
  return 0;
}
