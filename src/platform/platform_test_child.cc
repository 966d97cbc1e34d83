// The child the process tests run. Its arguments are a little program, run left to right:
//   out TEXT      write TEXT to stdout           err TEXT    write TEXT to stderr
//   flood N       write N bytes to stdout        cat         copy stdin to stdout
//   env NAME      print NAME's value or <unset>  cwd         print the working directory
//   args          print every remaining argument on its own line, then stop
//   sleep MS      sleep                          touch PATH  create an empty file
//   spawn N A1..AN  start this program again with A1..AN (sharing stdout/stderr), no wait
//   child N A1..AN  start this program again with A1..AN as a ChildProcess (sharing stdout/stderr),
//                 kept until we exit, so it dies with us however we end
//   trap NAME N   from now on, request NAME (POSIX: int term hup usr1 usr2; Windows: break) prints
//                 "trapped <EVENT>" and exits with status N; see test_support.h
//   pidfile PATH  write this process's id to PATH (complete when PATH appears)
//   setsid        POSIX: leave the process group and session (as a daemon does); Windows: nothing
//   exit N        exit with status N (the default is 0)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "platform/child_process.h"
#include "platform/environment.h"
#include "platform/process.h"
#include "platform/test_support.h"

#ifndef _WIN32
#include <unistd.h>
#endif

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::ios::sync_with_stdio(true);
  std::vector<gpuhost::platform::ChildProcess> children;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& command = args[i];
    auto next = [&]() -> std::string { return i + 1 < args.size() ? args[++i] : std::string(); };
    if (command == "out") {
      std::cout << next() << std::flush;
    } else if (command == "err") {
      std::cerr << next() << std::flush;
    } else if (command == "flood") {
      std::cout << std::string(std::stoul(next()), 'x') << std::flush;
    } else if (command == "cat") {
      std::cout << std::cin.rdbuf() << std::flush;
      std::cout.clear();  // inserting an empty streambuf sets failbit
    } else if (command == "env") {
      auto value = gpuhost::platform::get_env(next());
      std::cout << value.value_or("<unset>") << std::flush;
    } else if (command == "cwd") {
      std::cout << std::filesystem::current_path().string() << std::flush;
    } else if (command == "args") {
      for (++i; i < args.size(); ++i) std::cout << args[i] << "\n";
      std::cout << std::flush;
    } else if (command == "sleep") {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stoul(next())));
    } else if (command == "touch") {
      std::ofstream(next()).flush();
    } else if (command == "spawn") {
      std::size_t count = std::stoul(next());
      std::vector<std::string> child_args(
          args.begin() + static_cast<long>(i) + 1,
          args.begin() + static_cast<long>(std::min(args.size(), i + 1 + count)));
      i += count;
      if (!gpuhost::platform::test_support::spawn_self(child_args)) return 125;
    } else if (command == "child") {
      std::size_t count = std::stoul(next());
      gpuhost::platform::ChildOptions options;
      options.argv.push_back(gpuhost::platform::current_executable_path().value_or(argv[0]));
      options.argv.insert(options.argv.end(), args.begin() + static_cast<long>(i) + 1,
                          args.begin() + static_cast<long>(std::min(args.size(), i + 1 + count)));
      i += count;
      auto started = gpuhost::platform::ChildProcess::spawn(options);
      if (!started) {
        std::cerr << "platform_test_child: " << started.error().message << "\n";
        return 125;
      }
      children.push_back(std::move(*started));
    } else if (command == "trap") {
      std::string name = next();
      if (!gpuhost::platform::test_support::trap(name, std::stoi(next()))) return 124;
    } else if (command == "pidfile") {
      std::filesystem::path path = next();
      std::filesystem::path partial = path;
      partial += ".partial";
      std::ofstream(partial) << gpuhost::platform::current_process_id() << std::flush;
      std::filesystem::rename(partial, path);
    } else if (command == "setsid") {
#ifndef _WIN32
      ::setsid();
#endif
    } else if (command == "exit") {
      return std::stoi(next());
    } else {
      std::cerr << "platform_test_child: unknown command " << command << "\n";
      return 126;
    }
  }
  return 0;
}
