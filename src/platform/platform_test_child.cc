// The child the process tests run. Its arguments are a little program, run left to right:
//   out TEXT      write TEXT to stdout           err TEXT    write TEXT to stderr
//   flood N       write N bytes to stdout        cat         copy stdin to stdout
//   env NAME      print NAME's value or <unset>  cwd         print the working directory
//   args          print every remaining argument on its own line, then stop
//   sleep MS      sleep                          touch PATH  create an empty file
//   spawn N A1..AN  start this program again with A1..AN (sharing stdout/stderr), no wait
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

#include "platform/environment.h"
#include "platform/test_support.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::ios::sync_with_stdio(true);
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
    } else if (command == "exit") {
      return std::stoi(next());
    } else {
      std::cerr << "platform_test_child: unknown command " << command << "\n";
      return 126;
    }
  }
  return 0;
}
