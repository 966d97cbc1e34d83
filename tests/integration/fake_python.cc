// A stand-in for a Python interpreter, for doctor's probe tests on both OSes (Wine has no
// Windows Python). doctor runs `<interpreter> -c <script>`; this program ignores the script and
// behaves as GPUHOST_FAKE_PYTHON says:
//   hang        sleep for ten minutes (doctor must stop it at --python-timeout)
//   crash       abort() (a crashing interpreter)
//   garbage     print lines that are not a probe result
//   reply=FILE  print FILE's contents (a canned "GPUHOST_PROBE {...}" line) and exit 0
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

int main() {
  const char* mode_env = std::getenv("GPUHOST_FAKE_PYTHON");
  std::string mode = mode_env ? mode_env : "";
  if (mode == "hang") {
    std::this_thread::sleep_for(std::chrono::minutes(10));
    return 0;
  }
  if (mode == "crash") {
    std::cout << "about to crash" << std::endl;
    std::abort();
  }
  if (mode == "garbage") {
    std::cout << "Traceback (most recent call last):\n  nothing useful here\n" << std::flush;
    return 1;
  }
  if (mode.rfind("reply=", 0) == 0) {
    std::ifstream in(mode.substr(6), std::ios::binary);
    if (!in) {
      std::cerr << "fake_python: cannot read " << mode.substr(6) << "\n";
      return 2;
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::cout << "some import noise\n" << buffer.str() << std::flush;
    return 0;
  }
  std::cerr << "fake_python: set GPUHOST_FAKE_PYTHON to hang, crash, garbage or reply=FILE\n";
  return 2;
}
