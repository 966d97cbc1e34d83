#!/bin/sh
# gpuhost setup plan. Review it before running it.
# host: Debian GNU/Linux 12 (bookworm); no NVIDIA GPU; no working NVIDIA driver
# environment: /opt/venv
# decided: GPU generation unknown without a driver: open kernel modules, which need Turing or newer; pass --driver-flavour proprietary for Maxwell, Pascal or Volta
# decided: driver branch R595 (PB, end of life 2027-03)
# decided: the kernel packages are held (apt-mark hold) so an upgrade cannot leave the driver's module unbuilt; apt-mark unhold them to upgrade the kernel, then reinstall the driver
# decided: /usr/bin/python3 is externally managed (PEP 668): pip refuses to install into it, so the frameworks go into a virtual environment
# decided: the torchvision and torchaudio releases built for torch 2.13.0 are not in the knowledge tables, so only torch is installed; add them pinned to their matching versions, from the same index
# decided: torch 2.13.0 cu130 (stable) is the newest PyTorch wheel that runs on this host: CUDA 13.0 needs driver >= 580.65.06 on linux; driver 595.0 meets it. (release row is secondary: Research marked >= 2.12 as future-dated; the release was confirmed from the PyTorch release manager's announcement, not from pytorch.org. Python 3.15t experimental.)
# decided: --for-image: the runtime checks are not run here; run the first_boot commands on the first boot with a GPU
# Each step checks first, so running this again does only what is left. A step that needs a restart stops the script (exit 6): restart, then run it again.
# --for-image: run the verification at the end of this file on the first boot with a GPU.
set -eu

# [1/6] driver.prerequisites: Install kernel headers and DKMS for the driver's module build
# why: the driver's kernel module is built by DKMS against the running kernel
# after: headers for $(uname -r) and dkms are installed
# source: GoogleCloudPlatform/compute-gpu-installation linux/cuda_installer/os_installers/debian.py
if ! { dpkg -s "linux-headers-$(uname -r)" dkms >/dev/null 2>&1; } >/dev/null 2>&1; then
  echo 'gpuhost setup: driver.prerequisites: Install kernel headers and DKMS for the driver'\''s module build'
  apt-get update
  apt-get install -y "linux-headers-$(uname -r)" dkms
fi

# [2/6] driver.repository: Add NVIDIA's CUDA repository (debian12)
# why: the driver packages come from NVIDIA's repository for debian12
# after: apt-get sees NVIDIA's packages, signed by the keyring's key
# source: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb
if ! { dpkg -s cuda-keyring >/dev/null 2>&1; } >/dev/null 2>&1; then
  echo 'gpuhost setup: driver.repository: Add NVIDIA'\''s CUDA repository (debian12)'
  curl -fsSL -o /tmp/cuda-keyring.deb https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb
  dpkg -i /tmp/cuda-keyring.deb
  rm -f /tmp/cuda-keyring.deb
  apt-get update
fi

# [3/6] driver.install: Install the NVIDIA driver (nvidia-open)
# why: --for-image: the image gets the driver
# after: after a reboot, nvidia-smi -L lists every GPU
# source: GoogleCloudPlatform/compute-gpu-installation debian.py (nvidia-open; kernel hold); NVIDIA/ansible-role-nvidia-driver (cuda-drivers-<branch>)
if ! { dpkg -s nvidia-open >/dev/null 2>&1; } >/dev/null 2>&1; then
  echo 'gpuhost setup: driver.install: Install the NVIDIA driver (nvidia-open)'
  apt-get install -y nvidia-open
  apt-mark hold "linux-image-$(uname -r)" "linux-headers-$(uname -r)"
  echo 'gpuhost setup: driver.install needs a restart: restart, then run this again' >&2
  exit 6
fi

# [4/6] python.venv_support: Install the venv module
# why: Debian and Ubuntu ship venv and ensurepip in a separate package
# after: /usr/bin/python3 -m venv works
# source: Debian package python3-venv
if ! { /usr/bin/python3 -c 'import ensurepip, venv'; } >/dev/null 2>&1; then
  echo 'gpuhost setup: python.venv_support: Install the venv module'
  apt-get install -y python3-venv
fi

# [5/6] python.env: Create the virtual environment /opt/venv
# why: a virtual environment keeps the training stack apart from the system's Python
# after: /opt/venv holds a Python 3.11 environment
# source: https://docs.python.org/3/library/venv.html; PEP 668
if ! { test -x /opt/venv/bin/python; } >/dev/null 2>&1; then
  echo 'gpuhost setup: python.env: Create the virtual environment /opt/venv'
  /usr/bin/python3 -m venv /opt/venv
fi

# [6/6] torch.install: Install PyTorch 2.13.0 (CUDA 13.0) into /opt/venv
# why: torch 2.13.0 cu130 (stable) is the newest PyTorch wheel that runs on this host: CUDA 13.0 needs driver >= 580.65.06 on linux; driver 595.0 meets it. (release row is secondary: Research marked >= 2.12 as future-dated; the release was confirmed from the PyTorch release manager's announcement, not from pytorch.org. Python 3.15t experimental.)
# after: torch 2.13.0 built for CUDA 13.0 imports
# source: data/pytorch.json (https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix (read via a stored mirror); https://github.com/pytorch/pytorch/pull/187075 (2.13 row); release announced 2026-07-09 in https://github.com/googlecolab/colabtools/issues/6053)
if ! { /opt/venv/bin/python -c 'import sys, torch; sys.exit(0 if torch.__version__.partition(chr(43))[0] == sys.argv[1] and str(torch.version.cuda) == sys.argv[2] else 1)' 2.13.0 13.0; } >/dev/null 2>&1; then
  echo 'gpuhost setup: torch.install: Install PyTorch 2.13.0 (CUDA 13.0) into /opt/venv'
  /opt/venv/bin/python -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu130
fi

# First boot with a GPU (--for-image): run these, and keep the image only if they pass.
#   nvidia-smi -L
#   gpuhost setup --apply --yes --framework torch --env /opt/venv
echo 'gpuhost setup: done'
