// The Python environment, the framework builds and the verification steps. Rules:
// research/07 §2 (wheels, TensorFlow), §7.6-7.8; PEP 668 (never pip into Debian's python3).

#include <algorithm>

#include "base/strings.h"
#include "doctor/rules_support.h"
#include "knowledge/tensorflow_advice.h"
#include "knowledge/torch_advice.h"
#include "setup/plan_internal.h"

namespace gpuhost::setup {

namespace {

using knowledge::major_minor;

bool debian_like(const doctor::HostFacts& f) {
  const std::string name = to_lower(f.system.os.name);
  return name.find("debian") != std::string::npos || name.find("ubuntu") != std::string::npos;
}

// The command that runs a program in the plan's shell: sh takes the quoted path, PowerShell
// needs the call operator before a quoted path.
std::string run_program(const PlanContext& c, const std::string& path) {
  return c.windows ? "& " + ps_quote(path) : sh_quote(path);
}

// A step action that stops with `message`.
std::string fail_action(const PlanContext& c, const std::string& message) {
  return c.windows ? "throw " + ps_quote(message) : "echo " + sh_quote(message) + " >&2; exit 1";
}

struct Environment {
  std::string base;      // the interpreter that creates it (venv), as a command
  std::string python;    // the environment's interpreter, as a command
  std::string location;  // the venv directory or conda env name
  std::optional<Version> version;
};

// Chooses the interpreter and adds the steps that make the environment.
std::optional<Environment> plan_environment(PlanContext& c) {
  const auto& f = c.facts;
  const auto& r = c.request;
  Environment env;
  if (!r.conda_name.empty()) {
    const Version version = r.python.value_or(Version({3, 11}));
    env.python = "conda run -n " + r.conda_name + " python";
    env.location = "conda env " + r.conda_name;
    env.version = version;
    auto& s = add_step(
        c, "python.env",
        "Create the conda environment " + r.conda_name + " (Python " + major_minor(version).str() + ")");
    s.reason = "--conda " + r.conda_name;
    s.probe = c.windows ? "(conda env list) -match " + ps_quote("^" + r.conda_name + " ")
                        : "conda run -n " + r.conda_name + " python -c pass";
    s.actions = {"conda create -y -n " + r.conda_name + " python=" + major_minor(version).str()};
    s.expect = "conda env " + r.conda_name + " with Python " + major_minor(version).str();
    return env;
  }

  // The base interpreter: the requested version, else the first one on PATH that is not itself
  // inside a venv.
  const doctor::PythonFacts* base = nullptr;
  for (const auto& p : f.pythons) {
    if (!p.probed || p.in_venv) continue;
    auto v = Version::parse(p.version);
    if (r.python && (!v || major_minor(*v) != major_minor(*r.python))) continue;
    base = &p;
    break;
  }
  if (!base && r.python) {
    std::vector<std::string> found;
    for (const auto& p : f.pythons) found.push_back(p.version + " (" + p.interpreter + ")");
    if (!c.windows) {
      c.plan.blockers.push_back("Python " + r.python->str() + " is not installed here" +
                                (found.empty() ? std::string() : " (found " + join(found, ", ") + ")") +
                                ": use --conda NAME, which installs it, or install python" +
                                major_minor(*r.python).str() + " and run gpuhost setup again");
      return std::nullopt;
    }
    const std::string mm = major_minor(*r.python).str();
    auto& s = add_step(c, "python.install", "Install Python " + mm);
    s.reason = "--python " + mm + " is not installed";
    s.probe = "$null -ne (py -" + mm + " -c pass 2>$null; if ($LASTEXITCODE -eq 0) { 1 })";
    s.actions = {"winget install --id Python.Python." + mm +
                 " --exact --silent --accept-package-agreements --accept-source-agreements"};
    s.expect = "py -" + mm + " runs Python " + mm;
    s.source = "microsoft/winget-pkgs manifests (Python.Python.3.X)";
    env.base = "py -" + mm;
    env.version = *r.python;
  } else if (!base) {
    if (c.windows) {
      auto& s = add_step(c, "python.install", "Install Python 3.12");
      s.reason = "no Python interpreter on PATH";
      s.probe = "$null -ne (Get-Command py.exe -ErrorAction SilentlyContinue)";
      s.actions = {
          "winget install --id Python.Python.3.12 --exact --silent --accept-package-agreements "
          "--accept-source-agreements"};
      s.expect = "py -3.12 runs Python 3.12";
      s.source = "microsoft/winget-pkgs manifests (Python.Python.3.12)";
      env.base = "py -3.12";
      env.version = Version({3, 12});
    } else if (debian_like(f)) {
      auto& s = add_step(c, "python.install", "Install Python 3");
      s.reason = "no Python interpreter on PATH";
      s.admin = true;
      s.probe = "command -v python3 >/dev/null";
      s.actions = {"apt-get install -y python3"};
      s.expect = "python3 on PATH";
      env.base = "python3";
    } else {
      c.plan.blockers.push_back(
          "no Python interpreter on PATH: install Python 3, then run gpuhost setup again");
      return std::nullopt;
    }
  } else {
    env.base = run_program(c, base->interpreter);
    env.version = Version::parse(base->version);
    if (base->externally_managed)
      c.plan.decisions.push_back(base->interpreter +
                                 " is externally managed (PEP 668): pip refuses to install into it, so "
                                 "the frameworks go into a virtual environment");
  }

  const std::string dir = r.env_dir;
  env.location = dir;
  env.python = run_program(c, c.windows ? dir + "\\Scripts\\python.exe" : dir + "/bin/python");
  const bool system_site = r.offline;
  if (!c.windows && debian_like(f)) {
    auto& s = add_step(c, "python.venv_support", "Install the venv module");
    s.reason = "Debian and Ubuntu ship venv and ensurepip in a separate package";
    s.admin = true;
    s.probe = env.base + " -c 'import ensurepip, venv'";
    s.actions = {"apt-get install -y python3-venv"};
    s.expect = env.base + " -m venv works";
    s.source = "Debian package python3-venv";
  }
  auto& s = add_step(c, "python.env", "Create the virtual environment " + dir);
  s.reason = system_site ? "--offline: the environment sees the system's packages (--system-site-packages), "
                           "because no wheel index "
                           "is used"
                         : "a virtual environment keeps the training stack apart from the system's Python";
  if (c.windows)
    s.probe = "Test-Path " + ps_quote(dir + "\\Scripts\\python.exe");
  else if (system_site)
    s.probe = "test -x " + sh_quote(dir + "/bin/python") +
              " && grep -q 'include-system-site-packages = true' " + sh_quote(dir + "/pyvenv.cfg");
  else
    s.probe = "test -x " + sh_quote(dir + "/bin/python");
  s.actions = {env.base + " -m venv " +
               (system_site ? std::string("--system-site-packages ") : std::string()) + quote(c, dir)};
  s.expect = dir + " holds a Python " +
             (env.version ? major_minor(*env.version).str() + " " : std::string()) + "environment";
  s.source = "https://docs.python.org/3/library/venv.html; PEP 668";
  return env;
}

// torch, torchvision and torchaudio from one index in one command (research/07 §7.6).
void plan_torch(PlanContext& c, const Environment& env, const FrameworkRequest& want) {
  const auto& r = c.request;
  if (r.offline) {
    c.plan.decisions.push_back(
        "--offline: torch is not installed from a wheel index; the environment uses the system's torch "
        "through --system-site-packages" +
        std::string(debian_like(c.facts) ? " (Debian's python3-torch)" : ""));
    if (!c.windows && debian_like(c.facts)) {
      auto& s = add_step(c, "torch.system", "Install the system's PyTorch (python3-torch)");
      s.reason = "--offline: no wheel index is reachable, so torch comes from the distribution";
      s.admin = true;
      s.probe = "dpkg -s python3-torch >/dev/null 2>&1";
      s.actions = {"apt-get install -y python3-torch"};
      s.expect = "python3 -c 'import torch' works";
      s.source = "Debian package python3-torch";
    }
    auto& s = add_step(c, "torch.install", "Use the system's PyTorch in " + env.location);
    s.reason = "--offline: torch from the system's packages, seen through --system-site-packages";
    s.probe = env.python + " -c 'import torch'";
    s.actions = {fail_action(
        c,
        "--offline: torch is not importable in the environment and no wheel index is used; install the "
        "system's torch package, or run gpuhost setup without --offline")};
    s.expect = "import torch works in the environment";
    c.plan.expected["torch"] = json::Value::object();
    c.plan.expected["torch"]["source"] = "system";
    return;
  }

  knowledge::TorchHost host;
  host.os = c.plan.os;
  host.python = env.version;
  host.compute_capability = c.compute_capability;
  if (c.gpu_host()) {
    host.driver = c.driver;
    if (c.driver_working) host.driver_cuda_version = doctor::driver_cuda_version(c.facts);
    if (!host.driver) {
      // No driver yet (Windows, where the plan cannot install one): choose for the production
      // branch the driver step asks for.
      for (const auto& b : c.k.cuda_drivers.driver_branches)
        if (b.kind == "PB" && (!host.driver || Version({b.branch, 0}) > *host.driver))
          host.driver = Version({b.branch, 0});
    }
  }
  knowledge::TorchAdviceOptions options;
  options.release_line = want.version;
  auto rec = knowledge::recommend_torch(c.k, host, options);
  const bool wants_cuda = c.gpu_host() && !r.allow_cpu;
  if (rec && wants_cuda && (!rec->build) && c.driver_working && !c.driver_planned) {
    // The working driver is too old for every wheel that fits: only --upgrade-driver replaces it.
    const std::string why = rec->explanation;
    if (!r.upgrade_driver) {
      c.plan.blockers.push_back(
          "driver " + c.facts.gpu.driver_version + " is too old for every PyTorch CUDA wheel that fits (" +
          why +
          "): pass --upgrade-driver to plan a newer driver (it replaces the working one), or --allow-cpu "
          "for a CPU build");
      return;
    }
    plan_driver_upgrade(
        c, "driver " + c.facts.gpu.driver_version + " is too old for every PyTorch CUDA wheel that fits");
    if (!c.driver_planned) return;
    host.driver = c.driver;
    host.driver_cuda_version.reset();
    rec = knowledge::recommend_torch(c.k, host, options);
  }
  if (!rec) {
    std::string what = want.version ? "PyTorch " + want.version->str() : std::string("any PyTorch release");
    c.plan.blockers.push_back(what + " has no build for Python " +
                              (env.version ? major_minor(*env.version).str() : std::string("?")) +
                              " in the knowledge tables: ask for another --python or --framework torch==X.Y");
    return;
  }
  if (wants_cuda && !rec->build) {
    c.plan.blockers.push_back(
        "no PyTorch CUDA build runs on this host (" + rec->explanation +
        "); gpuhost does not fall back to a CPU build silently: pass --allow-cpu to accept one");
    return;
  }
  const knowledge::TorchRelease& release = *rec->release;
  const std::string pin = release.pin_version().str();
  std::string command = rec->install_command;  // "pip install torch==2.8.0 --index-url ..."
  std::string index_url = rec->index_url;
  if (!r.torch_index.empty()) {
    // A mirror of download.pytorch.org/whl: the same per-backend folders under another base.
    constexpr std::string_view official = "https://download.pytorch.org/whl";
    command = replace_all(command, official, r.torch_index);
    index_url = replace_all(index_url, official, r.torch_index);
    c.plan.decisions.push_back("wheels from the mirror " + r.torch_index + " (--torch-index) instead of " +
                               std::string(official));
  }
  if (command.rfind("pip ", 0) == 0) command = command.substr(4);
  std::string packages = "torch==" + pin;
  if (release.companions && command.find("+") == std::string::npos) {
    packages += " torchvision==" + release.companions->torchvision.str() +
                " torchaudio==" + release.companions->torchaudio.str();
    command = replace_all(command, "torch==" + pin, packages);
  } else {
    c.plan.decisions.push_back(
        "the torchvision and torchaudio releases built for torch " + pin +
        " are not in the knowledge tables, so only torch is installed; add them pinned to their "
        "matching versions, from the same index");
  }
  c.plan.decisions.push_back(rec->explanation);
  const std::string cuda = rec->build ? rec->build->cuda.str() : "None";
  auto& s =
      add_step(c, "torch.install",
               "Install PyTorch " + pin + (rec->build ? " (CUDA " + cuda + ")" : std::string(" (CPU)")) +
                   " into " + env.location);
  s.reason = rec->explanation;
  s.probe = env.python + " -c " +
            quote(c,
                  "import sys, torch; sys.exit(0 if torch.__version__.partition(chr(43))[0] == sys.argv[1] "
                  "and str(torch.version.cuda) == sys.argv[2] else 1)") +
            " " + pin + " " + cuda;
  if (c.windows) s.probe = "& { " + s.probe + " 2>$null; $LASTEXITCODE -eq 0 }";
  s.actions = {env.python + " -m pip " + command};
  s.expect =
      "torch " + pin + (rec->build ? " built for CUDA " + cuda : std::string(" CPU build")) + " imports";
  s.source = "data/pytorch.json (" + release.provenance.source + ")";
  json::Value t = json::Value::object();
  t["version"] = pin;
  t["cuda"] = rec->build ? json::Value(cuda) : json::Value();
  t["index_url"] = index_url;
  c.plan.expected["torch"] = std::move(t);
}

void plan_tensorflow(PlanContext& c, const Environment& env, const FrameworkRequest& want) {
  const auto& tf = c.k.tensorflow;
  knowledge::TensorflowHost host{c.plan.os, c.driver, env.version, doctor::windows_build(c.facts)};
  const knowledge::TensorflowRelease* release = nullptr;
  if (want.version) {
    release = tf.find_release(*want.version);
    if (!release) {
      c.plan.blockers.push_back("TensorFlow " + want.version->str() + " is not in the knowledge tables");
      return;
    }
    if (c.gpu_host()) {
      auto support = knowledge::tensorflow_gpu_support(c.k, *want.version, c.plan.os);
      if (!support.gpu) {
        c.plan.blockers.push_back(support.reason);
        return;
      }
    }
  } else if (c.gpu_host()) {
    auto advice = knowledge::recommend_tensorflow(c.k, host);
    if (advice.options.empty() || advice.options.front().path == knowledge::TensorflowInstallPath::wsl2) {
      c.plan.blockers.push_back(
          "no TensorFlow uses the GPU here" +
          (advice.problems.empty() ? std::string() : " (" + join(advice.problems, "; ") + ")") +
          (c.windows
               ? ": TensorFlow GPU on native Windows ended at 2.10 (Python <= 3.10); use WSL2 "
                 "(tensorflow[and-cuda] inside it) or --framework tensorflow==2.10 --conda NAME --python 3.10"
               : std::string()));
      return;
    }
    release = advice.options.front().release;
  } else {
    for (const auto& rel : tf.releases)
      if (!env.version || rel.supports_python(*env.version)) {
        release = &rel;
        break;
      }
    if (!release) {
      c.plan.blockers.push_back("no TensorFlow release supports Python " +
                                (env.version ? env.version->str() : std::string("?")));
      return;
    }
  }
  if (env.version && !release->supports_python(*env.version)) {
    c.plan.blockers.push_back("TensorFlow " + release->version.str() + " supports Python " +
                              release->python_min.str() + " to " + release->python_max.str() + ", not " +
                              major_minor(*env.version).str() + ": pass --python");
    return;
  }
  const std::string pin = release->version.str();
  auto& s = add_step(c, "tensorflow.install", "Install TensorFlow " + pin + " into " + env.location);
  s.probe = env.python + " -c " +
            quote(c,
                  "import sys, importlib.metadata as m; sys.exit(0 if m.version(sys.argv[1]) == sys.argv[2] "
                  "else 1)") +
            " tensorflow " + pin;
  if (c.windows) s.probe = "& { " + s.probe + " 2>$null; $LASTEXITCODE -eq 0 }";
  s.source = "data/tensorflow.json; tensorflow/docs site/en/install/pip.md";
  if (c.windows && c.gpu_host()) {
    if (c.request.conda_name.empty()) {
      c.plan.blockers.push_back("TensorFlow " + pin +
                                " on native Windows needs CUDA 11.2 and cuDNN 8.1 from conda-forge: pass "
                                "--conda NAME (with --python 3.10 or older), or use WSL2");
      return;
    }
    s.reason = "TensorFlow " + pin +
               " is the newest with GPU support on native Windows; it needs CUDA 11.2 and cuDNN 8.1";
    s.actions = {
        "conda install -y -n " + c.request.conda_name + " -c conda-forge cudatoolkit=11.2 cudnn=8.1.0",
        env.python + " -m pip install tensorflow==" + pin};
    s.expect = "tensorflow " + pin + " imports and lists the GPU";
  } else if (c.gpu_host() && !(release->version < tf.rules.and_cuda_since)) {
    s.reason = "the and-cuda extra brings the CUDA and cuDNN libraries TensorFlow " + pin +
               " was built with, as wheels";
    s.actions = {env.python + " -m pip install " + quote(c, "tensorflow[and-cuda]==" + pin)};
    s.expect = "tensorflow " + pin + " imports and lists the GPU";
  } else {
    s.reason = c.gpu_host() ? "TensorFlow " + pin + " predates the and-cuda extra; it needs CUDA " +
                                  release->cuda.str() + " installed"
                            : "no NVIDIA GPU: the CPU build";
    s.actions = {env.python + " -m pip install tensorflow==" + pin};
    s.expect = "tensorflow " + pin + " imports";
  }
  json::Value t = json::Value::object();
  t["version"] = pin;
  c.plan.expected["tensorflow"] = std::move(t);
}

void plan_verification(PlanContext& c, const Environment& env) {
  std::vector<std::string> args;
  for (const auto& w : c.request.frameworks)
    args.push_back(w.framework == Framework::torch ? "torch" : "tensorflow");
  if (c.gpu_host() && !c.request.allow_cpu) args.push_back("--expect-gpu");
  const std::string script(verify_script());
  std::string verify;
  if (c.windows) {
    // Native arguments quoted: a bare "-" or "--flag" is where PowerShell grammars disagree.
    std::string quoted = ps_quote("-");
    for (const auto& a : args) quoted += " " + ps_quote(a);
    verify = "@'\n" + script + "'@ | " + env.python + " " + quoted;
  } else {
    verify = env.python + " - " + join(args, " ") + " <<'GPUHOST_VERIFY'\n" + script + "GPUHOST_VERIFY";
  }
  const bool gpu = c.gpu_host();
  const std::string smi = c.windows ? "nvidia-smi.exe -L" : "nvidia-smi -L";
  if (c.request.for_image) {
    // On the first boot the same command without --for-image finds every step in place and runs
    // the runtime checks.
    if (gpu) c.plan.first_boot.push_back(smi);
    std::string again = "gpuhost setup --apply --yes";
    if (c.request.frameworks.size() > 1)
      again += " --framework both";
    else
      for (const auto& w : c.request.frameworks)
        again += std::string(" --framework ") + (w.framework == Framework::torch ? "torch" : "tensorflow") +
                 (w.version ? "==" + w.version->str() : std::string());
    again += c.request.conda_name.empty() ? " --env " + quote(c, c.request.env_dir)
                                          : " --conda " + c.request.conda_name;
    if (c.request.offline) again += " --offline";
    c.plan.first_boot.push_back(again);
    c.plan.decisions.push_back(
        "--for-image: the runtime checks are not run here; run the first_boot commands on the first boot "
        "with a GPU");
    return;
  }
  if (gpu) {
    auto& s = add_step(c, "verify.driver", "Check that the driver sees every GPU");
    s.reason = "verification: the driver answers before any framework is asked";
    s.actions = {smi};
    s.expect = "one line per GPU";
    s.runtime = true;
  }
  auto& s = add_step(c, "verify.frameworks", "Check the frameworks in " + env.location + " for real");
  s.reason = gpu ? "verification: import, cuda.is_available(), a matmul on the GPU with synchronize and a "
                   "finite check, cuDNN; a CPU "
                   "build on this GPU host fails"
                 : "verification: import and a matmul; no NVIDIA GPU here, so a CPU build is the right one";
  s.actions = {verify};
  s.expect = gpu ? "every framework computes on the GPU" : "every framework imports and computes on the CPU";
  s.runtime = true;
  s.source = "research/07 §7.8";
}

}  // namespace

void plan_python(PlanContext& c) {
  auto env = plan_environment(c);
  if (!env) return;
  c.plan.python = env->python;
  c.plan.environment = env->location;
  for (const auto& want : c.request.frameworks) {
    if (want.framework == Framework::torch)
      plan_torch(c, *env, want);
    else
      plan_tensorflow(c, *env, want);
  }
  plan_verification(c, *env);
}

}  // namespace gpuhost::setup
