#!/bin/sh
# gpuhost setup plan. Review it before running it.
# host: Debian GNU/Linux 12 (bookworm); 1x Tesla V100-SXM2-16GB; driver 595.58.03
# environment: /opt/my venv
# decided: driver 595.58.03 works; it is left as it is unless a framework needs a newer one
# decided: /usr/bin/python3 is externally managed (PEP 668): pip refuses to install into it, so the frameworks go into a virtual environment
# decided: the torchvision and torchaudio releases built for torch 2.13.0 are not in the knowledge tables, so only torch is installed; add them pinned to their matching versions, from the same index
# decided: torch 2.13.0 cu126 (stable) is the newest PyTorch wheel that runs on this host: CUDA 12.6 needs driver >= 560.28.03 on linux; driver 595.58.03 meets it. sm_70 machine code runs on compute capability 7.0. (release row is secondary: Research marked >= 2.12 as future-dated; the release was confirmed from the PyTorch release manager's announcement, not from pytorch.org. Python 3.15t experimental.)
# Each step checks first, so running this again does only what is left. A step that needs a restart stops the script (exit 6): restart, then run it again.
set -eu

# [1/6] python.venv_support: Install the venv module
# why: Debian and Ubuntu ship venv and ensurepip in a separate package
# after: /usr/bin/python3 -m venv works
# source: Debian package python3-venv
if ! { /usr/bin/python3 -c 'import ensurepip, venv'; } >/dev/null 2>&1; then
  echo 'gpuhost setup: python.venv_support: Install the venv module'
  apt-get install -y python3-venv
fi

# [2/6] python.env: Create the virtual environment /opt/my venv
# why: a virtual environment keeps the training stack apart from the system's Python
# after: /opt/my venv holds a Python 3.11 environment
# source: https://docs.python.org/3/library/venv.html; PEP 668
if ! { test -x '/opt/my venv/bin/python'; } >/dev/null 2>&1; then
  echo 'gpuhost setup: python.env: Create the virtual environment /opt/my venv'
  /usr/bin/python3 -m venv '/opt/my venv'
fi

# [3/6] torch.install: Install PyTorch 2.13.0 (CUDA 12.6) into /opt/my venv
# why: torch 2.13.0 cu126 (stable) is the newest PyTorch wheel that runs on this host: CUDA 12.6 needs driver >= 560.28.03 on linux; driver 595.58.03 meets it. sm_70 machine code runs on compute capability 7.0. (release row is secondary: Research marked >= 2.12 as future-dated; the release was confirmed from the PyTorch release manager's announcement, not from pytorch.org. Python 3.15t experimental.)
# after: torch 2.13.0 built for CUDA 12.6 imports
# source: data/pytorch.json (https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix (read via a stored mirror); https://github.com/pytorch/pytorch/pull/187075 (2.13 row); release announced 2026-07-09 in https://github.com/googlecolab/colabtools/issues/6053)
if ! { '/opt/my venv/bin/python' -c 'import sys, torch; sys.exit(0 if torch.__version__.partition(chr(43))[0] == sys.argv[1] and str(torch.version.cuda) == sys.argv[2] else 1)' 2.13.0 12.6; } >/dev/null 2>&1; then
  echo 'gpuhost setup: torch.install: Install PyTorch 2.13.0 (CUDA 12.6) into /opt/my venv'
  '/opt/my venv/bin/python' -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126
fi

# [4/6] tensorflow.install: Install TensorFlow 2.21.0 into /opt/my venv
# why: the and-cuda extra brings the CUDA and cuDNN libraries TensorFlow 2.21.0 was built with, as wheels
# after: tensorflow 2.21.0 imports and lists the GPU
# source: data/tensorflow.json; tensorflow/docs site/en/install/pip.md
if ! { '/opt/my venv/bin/python' -c 'import sys, importlib.metadata as m; sys.exit(0 if m.version(sys.argv[1]) == sys.argv[2] else 1)' tensorflow 2.21.0; } >/dev/null 2>&1; then
  echo 'gpuhost setup: tensorflow.install: Install TensorFlow 2.21.0 into /opt/my venv'
  '/opt/my venv/bin/python' -m pip install 'tensorflow[and-cuda]==2.21.0'
fi

# [5/6] verify.driver: Check that the driver sees every GPU
# why: verification: the driver answers before any framework is asked
# after: one line per GPU
echo 'gpuhost setup: verify.driver: Check that the driver sees every GPU'
nvidia-smi -L

# [6/6] verify.frameworks: Check the frameworks in /opt/my venv for real
# why: verification: import, cuda.is_available(), a matmul on the GPU with synchronize and a finite check, cuDNN; a CPU build on this GPU host fails
# after: every framework computes on the GPU
# source: research/07 §7.8
echo 'gpuhost setup: verify.frameworks: Check the frameworks in /opt/my venv for real'
'/opt/my venv/bin/python' - torch tensorflow --expect-gpu <<'GPUHOST_VERIFY'
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
GPUHOST_VERIFY
echo 'gpuhost setup: done'
