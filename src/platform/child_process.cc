#include "platform/child_process.h"

#include <cctype>
#include <utility>

namespace gpuhost::platform {

const char* child_signal_name(ChildSignal signal) {
  switch (signal) {
    case ChildSignal::interrupt: return "SIGINT";
    case ChildSignal::terminate: return "SIGTERM";
    case ChildSignal::hangup: return "SIGHUP";
    case ChildSignal::user1: return "SIGUSR1";
    case ChildSignal::user2: return "SIGUSR2";
    case ChildSignal::ctrl_break: return "CTRL_BREAK";
  }
  return "?";
}

std::optional<ChildSignal> parse_child_signal(std::string_view text) {
  std::string key;
  for (char c : text)
    key.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  if (key.starts_with("SIG") && key != "SIGBREAK") key.erase(0, 3);
  static constexpr std::pair<std::string_view, ChildSignal> k_names[] = {
      {"INT", ChildSignal::interrupt},
      {"TERM", ChildSignal::terminate},
      {"HUP", ChildSignal::hangup},
      {"USR1", ChildSignal::user1},
      {"USR2", ChildSignal::user2},
      {"CTRL_BREAK", ChildSignal::ctrl_break},
      {"CTRL_BREAK_EVENT", ChildSignal::ctrl_break},
      {"SIGBREAK", ChildSignal::ctrl_break},
  };
  for (const auto& [name, signal] : k_names)
    if (key == name) return signal;
  return std::nullopt;
}

}  // namespace gpuhost::platform
