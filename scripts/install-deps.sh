#!/usr/bin/env bash
# Installs every build and test dependency of gpuhost from Debian 12 packages.
# Idempotent and quiet: when everything is already installed it only runs dpkg-query.
# Usage: scripts/install-deps.sh        (as root, or with sudo available)
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config git ca-certificates
  nlohmann-json3-dev libtomlplusplus-dev libxxhash-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  clang-format
  # Windows cross build and the Wine that runs its tests
  g++-mingw-w64-x86-64-posix mingw-w64-tools wine wine64
  # test parts: Debian's PyTorch for real trainers, tmux for terminal tests
  python3 python3-torch tmux procps iproute2
  # benchmarks; fio and iperf3 are the anchors `bench` is cross-checked against
  hyperfine fio iperf3
  # promtool (package prometheus) lints gpuhost serve's /metrics in the integration tests
  prometheus
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${#missing[@]} Debian packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
