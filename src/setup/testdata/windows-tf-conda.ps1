# gpuhost setup plan. Review it before running it.
# host: Windows Server 2022 Datacenter on Amazon Web Services; 1x Tesla T4; driver 553.62
# environment: conda env tf
# decided: driver 553.62 works and is a licensed vGPU/GRID driver from the cloud: it is never replaced; it is left as it is unless a framework needs a newer one
# decided: CUDA toolkit 12.4 for nvcc (--toolkit), the newest the driver fully supports
# Each step checks first, so running this again does only what is left. A step that needs a restart stops the script (exit 6): restart, then run it again.
[CmdletBinding(SupportsShouldProcess)]
param()
$ErrorActionPreference = 'Stop'
function Test-Step([scriptblock]$Probe) {
  try { [bool](& $Probe) } catch { $false }
}

# [1/8] windows.long_paths: Turn on long paths
# why: long paths are off: pip installs of torch and TensorFlow fail past 260 characters (pytorch#23823)
# after: LongPathsEnabled = 1
# source: tensorflow/docs site/en/install/pip.md (Windows native, step 2); pytorch/test-infra#6648
if (-not (Test-Step { (Get-ItemProperty -Path 'HKLM:\SYSTEM\CurrentControlSet\Control\FileSystem' -Name 'LongPathsEnabled' -ErrorAction SilentlyContinue).LongPathsEnabled -eq 1 })) {
  if ($PSCmdlet.ShouldProcess('windows.long_paths', 'Turn on long paths')) {
    $global:LASTEXITCODE = 0
    New-Item -Path 'HKLM:\SYSTEM\CurrentControlSet\Control\FileSystem' -Force | Out-Null
    if ($LASTEXITCODE) { throw ('windows.long_paths failed with exit code ' + $LASTEXITCODE) }
    $global:LASTEXITCODE = 0
    Set-ItemProperty -Path 'HKLM:\SYSTEM\CurrentControlSet\Control\FileSystem' -Name 'LongPathsEnabled' -Type DWord -Value 1
    if ($LASTEXITCODE) { throw ('windows.long_paths failed with exit code ' + $LASTEXITCODE) }
  }
}

# [2/8] windows.vc_runtime: Install the Microsoft Visual C++ runtime
# why: torch and TensorFlow load msvcp140_1.dll and vcruntime140_1.dll; without them import fails with WinError 126 (pytorch#131662, #129568)
# after: msvcp140_1.dll in System32
# source: tensorflow/docs site/en/install/pip.md (MSVC 2015-2019 redistributable)
if (-not (Test-Step { Test-Path (Join-Path $env:windir 'System32\msvcp140_1.dll') })) {
  if ($PSCmdlet.ShouldProcess('windows.vc_runtime', 'Install the Microsoft Visual C++ runtime')) {
    $global:LASTEXITCODE = 0
    winget install --id Microsoft.VCRedist.2015+.x64 --exact --silent --accept-package-agreements --accept-source-agreements
    if ($LASTEXITCODE) { throw ('windows.vc_runtime failed with exit code ' + $LASTEXITCODE) }
  }
}

# [3/8] windows.fast_startup: Turn Fast Startup off
# why: with Fast Startup, 'Shut down' hibernates the kernel and the GPU driver is not restarted
# after: HiberbootEnabled = 0
# source: doctor rule os.windows.fast_startup (research/01 §6)
if (-not (Test-Step { (Get-ItemProperty -Path 'HKLM:\SYSTEM\CurrentControlSet\Control\Session Manager\Power' -Name 'HiberbootEnabled' -ErrorAction SilentlyContinue).HiberbootEnabled -eq 0 })) {
  if ($PSCmdlet.ShouldProcess('windows.fast_startup', 'Turn Fast Startup off')) {
    $global:LASTEXITCODE = 0
    New-Item -Path 'HKLM:\SYSTEM\CurrentControlSet\Control\Session Manager\Power' -Force | Out-Null
    if ($LASTEXITCODE) { throw ('windows.fast_startup failed with exit code ' + $LASTEXITCODE) }
    $global:LASTEXITCODE = 0
    Set-ItemProperty -Path 'HKLM:\SYSTEM\CurrentControlSet\Control\Session Manager\Power' -Name 'HiberbootEnabled' -Type DWord -Value 0
    if ($LASTEXITCODE) { throw ('windows.fast_startup failed with exit code ' + $LASTEXITCODE) }
  }
}

# [4/8] toolkit.install: Install the CUDA 12.4 toolkit (nvcc), without a driver
# why: --toolkit: nvcc for building CUDA extensions; the framework wheels do not need it
# after: nvcc 12.4 under %ProgramFiles%\NVIDIA GPU Computing Toolkit\CUDA\v12.4, the driver untouched
# source: pytorch/pytorch#96595 (a local toolkit matters only for extension builds); research/07 §7.5
if (-not (Test-Step { Test-Path (Join-Path $env:ProgramFiles 'NVIDIA GPU Computing Toolkit\CUDA\v12.4\bin\nvcc.exe') })) {
  if ($PSCmdlet.ShouldProcess('toolkit.install', 'Install the CUDA 12.4 toolkit (nvcc), without a driver')) {
    $global:LASTEXITCODE = 0
    winget install --id Nvidia.CUDA --version 12.4 --exact --silent --accept-package-agreements --accept-source-agreements --override '-s nvcc_12.4 cudart_12.4 -n'
    if ($LASTEXITCODE) { throw ('toolkit.install failed with exit code ' + $LASTEXITCODE) }
  }
}

# [5/8] python.env: Create the conda environment tf (Python 3.10)
# why: --conda tf
# after: conda env tf with Python 3.10
if (-not (Test-Step { (conda env list) -match '^tf ' })) {
  if ($PSCmdlet.ShouldProcess('python.env', 'Create the conda environment tf (Python 3.10)')) {
    $global:LASTEXITCODE = 0
    conda create -y -n tf python=3.10
    if ($LASTEXITCODE) { throw ('python.env failed with exit code ' + $LASTEXITCODE) }
  }
}

# [6/8] tensorflow.install: Install TensorFlow 2.10.0 into conda env tf
# why: TensorFlow 2.10.0 is the newest with GPU support on native Windows; it needs CUDA 11.2 and cuDNN 8.1
# after: tensorflow 2.10.0 imports and lists the GPU
# source: data/tensorflow.json; tensorflow/docs site/en/install/pip.md
if (-not (Test-Step { & { conda run -n tf python -c 'import sys, importlib.metadata as m; sys.exit(0 if m.version(sys.argv[1]) == sys.argv[2] else 1)' tensorflow 2.10.0 2>$null; $LASTEXITCODE -eq 0 } })) {
  if ($PSCmdlet.ShouldProcess('tensorflow.install', 'Install TensorFlow 2.10.0 into conda env tf')) {
    $global:LASTEXITCODE = 0
    conda install -y -n tf -c conda-forge cudatoolkit=11.2 cudnn=8.1.0
    if ($LASTEXITCODE) { throw ('tensorflow.install failed with exit code ' + $LASTEXITCODE) }
    $global:LASTEXITCODE = 0
    conda run -n tf python -m pip install tensorflow==2.10.0
    if ($LASTEXITCODE) { throw ('tensorflow.install failed with exit code ' + $LASTEXITCODE) }
  }
}

# [7/8] verify.driver: Check that the driver sees every GPU
# why: verification: the driver answers before any framework is asked
# after: one line per GPU
if ($PSCmdlet.ShouldProcess('verify.driver', 'Check that the driver sees every GPU')) {
  $global:LASTEXITCODE = 0
  nvidia-smi.exe -L
  if ($LASTEXITCODE) { throw ('verify.driver failed with exit code ' + $LASTEXITCODE) }
}

# [8/8] verify.frameworks: Check the frameworks in conda env tf for real
# why: verification: import, cuda.is_available(), a matmul on the GPU with synchronize and a finite check, cuDNN; a CPU build on this GPU host fails
# after: every framework computes on the GPU
# source: research/07 §7.8
if ($PSCmdlet.ShouldProcess('verify.frameworks', 'Check the frameworks in conda env tf for real')) {
  $global:LASTEXITCODE = 0
@'
# Run by `gpuhost setup` as its last step, in the environment it set up (embedded into the
# binary). Standard library plus the frameworks named on the command line:
#   python - torch [tensorflow] [--expect-gpu]
# Prints one line "GPUHOST_VERIFY <json>" and exits 1 when any check fails.
import json, math, sys

args = sys.argv[1:]
expect_gpu = "--expect-gpu" in args
report = {"expect_gpu": expect_gpu, "problems": []}
problems = report["problems"]


def error_text(e):
    return "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")


if "torch" in args:
    t = {}
    report["torch"] = t
    try:
        import torch
        t["version"] = torch.__version__
        t["cuda_build"] = torch.version.cuda or ""
        t["cuda_available"] = bool(torch.cuda.is_available())
        device = "cuda" if t["cuda_available"] else "cpu"
        a = torch.randn(512, 512, device=device)
        b = a @ a
        if device == "cuda":
            torch.cuda.synchronize()
            t["device"] = torch.cuda.get_device_name(0)
            t["cudnn"] = torch.backends.cudnn.version()
        else:
            t["device"] = "cpu"
        t["matmul_finite"] = bool(torch.isfinite(b).all().item())
        if not t["matmul_finite"]:
            problems.append("a 512x512 matmul on %s gave non-finite values" % device)
        if expect_gpu:
            if t["version"].endswith("+cpu") or not t["cuda_build"]:
                problems.append("torch %s is a CPU-only build on a host with an NVIDIA GPU" % t["version"])
            elif not t["cuda_available"]:
                problems.append("torch %s (CUDA %s) says torch.cuda.is_available() is False" % (t["version"], t["cuda_build"]))
        try:
            import torchvision
            t["torchvision"] = torchvision.__version__
            tv_local = torchvision.__version__.partition("+")[2]
            torch_local = t["version"].partition("+")[2]
            if tv_local and torch_local and tv_local != torch_local:
                problems.append("torch is +%s but torchvision is +%s: they come from different indexes" % (torch_local, tv_local))
        except ImportError:
            pass
    except Exception as e:
        problems.append("torch: " + error_text(e))

if "tensorflow" in args:
    f = {}
    report["tensorflow"] = f
    try:
        import os
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf
        f["version"] = tf.__version__
        f["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
        total = float(tf.reduce_sum(tf.random.normal([1000, 1000])).numpy())
        f["sum_finite"] = math.isfinite(total)
        if not f["sum_finite"]:
            problems.append("tensorflow: reduce_sum of a random matrix is not finite")
        if expect_gpu and not f["gpus"]:
            problems.append("tensorflow %s lists no GPU" % f["version"])
    except Exception as e:
        problems.append("tensorflow: " + error_text(e))

report["ok"] = not problems
sys.stdout.write("GPUHOST_VERIFY " + json.dumps(report) + "\n")
for p in problems:
    sys.stderr.write("verification failed: " + p + "\n")
sys.exit(0 if report["ok"] else 1)
'@ | conda run -n tf python '-' 'tensorflow' '--expect-gpu'
  if ($LASTEXITCODE) { throw ('verify.frameworks failed with exit code ' + $LASTEXITCODE) }
}
Write-Output 'gpuhost setup: done'
