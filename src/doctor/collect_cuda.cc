#include <algorithm>
#include <filesystem>
#include <regex>

#include "base/json.h"
#include "base/strings.h"
#include "doctor/collect.h"
#include "platform/environment.h"
#include "platform/files.h"
#include "platform/process.h"

namespace gpuhost::doctor {

namespace fs = std::filesystem;

const std::vector<std::string>& risky_cuda_variables() {
  // DCGM's level-1 "Environment Variables" subtest list (repo NVIDIA/DCGM nvvs/src/Software.cpp),
  // plus CUDA_VISIBLE_DEVICES, which hides GPUs when empty or wrong.
  static const std::vector<std::string> names = {
      "NSIGHT_CUDA_DEBUGGER", "CUDA_INJECTION32_PATH",  "CUDA_INJECTION64_PATH",
      "CUDA_AUTO_BOOST",      "CUDA_ENABLE_COREDUMP_ON_EXCEPTION", "CUDA_COREDUMP_FILE",
      "CUDA_DEVICE_WAITS_ON_EXCEPTION", "CUDA_PROFILE", "COMPUTE_PROFILE", "OPENCL_PROFILE",
      "CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING"};
  return names;
}

std::string parse_cuda_version_text(std::string_view text) {
  if (auto doc = json::parse(text); doc && doc->is_object()) {
    if (const json::Value* cuda = doc->find("cuda")) return cuda->get_string("version");
    return {};
  }
  std::smatch m;
  std::string s(text);
  static const std::regex version_txt(R"(CUDA Version (\d+\.\d+(\.\d+)?))");
  static const std::regex nvcc(R"(release \d+\.\d+, V(\d+\.\d+(\.\d+)?))");
  if (std::regex_search(s, m, nvcc)) return m[1];
  if (std::regex_search(s, m, version_txt)) return m[1];
  return {};
}

std::string parse_cudnn_header(std::string_view text) {
  std::string s(text);
  auto define = [&](const char* name) -> std::string {
    std::smatch m;
    std::regex re(std::string("#define ") + name + R"(\s+(\d+))");
    return std::regex_search(s, m, re) ? std::string(m[1]) : std::string();
  };
  std::string major = define("CUDNN_MAJOR"), minor = define("CUDNN_MINOR"), patch = define("CUDNN_PATCHLEVEL");
  if (major.empty() || minor.empty()) return {};
  return major + "." + minor + (patch.empty() ? "" : "." + patch);
}

namespace {

std::string toolkit_version(const fs::path& root) {
  if (auto text = platform::read_file(root / "version.json", 1 << 20)) {
    if (auto v = parse_cuda_version_text(*text); !v.empty()) return v;
  }
  if (auto text = platform::read_file(root / "version.txt", 1 << 20)) {
    if (auto v = parse_cuda_version_text(*text); !v.empty()) return v;
  }
  fs::path nvcc = root / "bin" / "nvcc";
  if (platform::current_os() == platform::OsFamily::windows) nvcc += ".exe";
  std::error_code ec;
  if (fs::exists(nvcc, ec)) {
    platform::ProcessOptions run;
    run.argv = {nvcc.string(), "--version"};
    run.timeout = std::chrono::seconds(10);
    if (auto r = platform::run_process(run); r && r->succeeded()) return parse_cuda_version_text(r->stdout_text);
  }
  return {};
}

void add_toolkit(CudaFacts& cuda, const fs::path& root, const std::string& found_by) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  fs::path canonical = fs::weakly_canonical(root, ec);
  std::string key = (ec ? root : canonical).string();
  for (const auto& t : cuda.toolkits)
    if (t.path == key) return;
  cuda.toolkits.push_back(CudaToolkit{key, toolkit_version(root), found_by});
}

void add_cudnn_header(CudaFacts& cuda, const fs::path& header) {
  auto text = platform::read_file(header, 4 << 20);
  if (!text) return;
  std::string version = parse_cudnn_header(*text);
  if (version.empty()) return;
  for (const auto& c : cuda.cudnn)
    if (c.version == version) return;
  cuda.cudnn.push_back(CudnnInstall{header.string(), version});
}

void scan_cudnn_headers(CudaFacts& cuda, const fs::path& include_dir) {
  std::error_code ec;
  if (!fs::is_directory(include_dir, ec)) return;
  for (const char* name : {"cudnn_version.h", "cudnn.h"}) {
    if (fs::exists(include_dir / name, ec)) {
      add_cudnn_header(cuda, include_dir / name);
      return;
    }
  }
}

}  // namespace

void collect_cuda(HostFacts& facts) {
  CudaFacts& cuda = facts.cuda;
  bool windows = platform::current_os() == platform::OsFamily::windows;

  // CUDA_PATH and the per-version CUDA_PATH_V12_2 variables the Windows installer sets.
  for (const auto& [name, value] : platform::environment()) {
    if ((name == "CUDA_PATH" || name.rfind("CUDA_PATH_V", 0) == 0 || name == "CUDA_HOME") && !value.empty())
      add_toolkit(cuda, value, name);
  }
  std::vector<fs::path> roots;
  if (windows) {
    std::string program_files = platform::get_env("ProgramFiles").value_or("C:\\Program Files");
    roots.push_back(fs::path(program_files) / "NVIDIA GPU Computing Toolkit" / "CUDA");
  } else {
    roots.push_back("/usr/local");
    roots.push_back("/opt");
  }
  for (const auto& root : roots) {
    auto entries = platform::list_directory(root);
    if (!entries) continue;
    for (const auto& e : *entries) {
      bool candidate = windows ? (e.name.size() > 1 && e.name[0] == 'v')
                               : (e.name == "cuda" || e.name.rfind("cuda-", 0) == 0);
      if (candidate && (e.is_directory || e.is_symlink)) add_toolkit(cuda, root / e.name, (root / e.name).string());
    }
  }
  if (auto nvcc = platform::find_executable("nvcc")) {
    std::error_code ec;
    fs::path resolved = fs::weakly_canonical(*nvcc, ec);
    cuda.nvcc_on_path = (ec ? fs::path(*nvcc) : resolved).string();
    add_toolkit(cuda, fs::path(cuda.nvcc_on_path).parent_path().parent_path(), "nvcc on PATH");
  }

  for (const auto& t : cuda.toolkits) scan_cudnn_headers(cuda, fs::path(t.path) / "include");
  if (windows) {
    std::string program_files = platform::get_env("ProgramFiles").value_or("C:\\Program Files");
    fs::path cudnn_root = fs::path(program_files) / "NVIDIA" / "CUDNN";
    if (auto versions = platform::list_directory(cudnn_root)) {
      for (const auto& v : *versions) {
        scan_cudnn_headers(cuda, cudnn_root / v.name / "include");
        if (auto subs = platform::list_directory(cudnn_root / v.name / "include"))
          for (const auto& s : *subs)
            if (s.is_directory) scan_cudnn_headers(cuda, cudnn_root / v.name / "include" / s.name);
      }
    }
  } else {
    scan_cudnn_headers(cuda, "/usr/include");
    scan_cudnn_headers(cuda, "/usr/include/x86_64-linux-gnu");
    scan_cudnn_headers(cuda, "/usr/include/aarch64-linux-gnu");
  }

  for (const auto& name : risky_cuda_variables()) {
    if (auto value = platform::get_env(name)) cuda.risky_environment.emplace_back(name, *value);
  }
}

}  // namespace gpuhost::doctor
