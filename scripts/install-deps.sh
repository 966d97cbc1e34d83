#!/usr/bin/env bash
# Installs every build and test dependency of gpuhost from Debian 12 packages.
# Idempotent and quiet: when everything is already installed it only runs dpkg-query.
# Usage: scripts/install-deps.sh        (as root, or with sudo available)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  # build
  build-essential cmake ninja-build pkg-config git ca-certificates
  nlohmann-json3-dev libtomlplusplus-dev libxxhash-dev libcurl4-openssl-dev libssl-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  clang-format
  # Windows cross build and the Wine that runs its tests
  g++-mingw-w64-x86-64-posix mingw-w64-tools wine wine64
  # SM3/SM4 for the Windows build (platform/crypto_gcrypt_win32.h): libgcrypt's DLL and header
  libgcrypt-mingw-w64-dev
  # test parts: Debian's PyTorch for real trainers, tmux for terminal tests
  python3 python3-torch tmux procps iproute2
  # an independent YAML reader: what gpuhost mig export writes must load as mig-parted's files do
  python3-yaml
  # gpuhost setup: a real venv in its end-to-end test; sh -n and shellcheck on its scripts
  python3-venv shellcheck
  # a real two-node Slurm on 127.0.0.1 (tests/integration/slurm_cluster.py); started by the test
  slurmctld slurmd slurm-client munge
  # benchmarks; fio and iperf3 are the anchors `bench` is cross-checked against
  hyperfine fio iperf3
  # promtool (package prometheus) lints gpuhost serve's /metrics in the integration tests;
  # prometheus-node-exporter and wrk are the anchor and the load of the scrape benchmark
  prometheus prometheus-node-exporter wrk
  # the dashboard's browser test drives Debian's Chromium with npm playwright-core (tests/browser/)
  chromium
  # packaging (tests/integration/test_package.py): cpack's .deb needs dpkg-shlibdeps (dpkg-dev);
  # the units are checked with systemd-analyze and the user made by systemd-sysusers (systemd);
  # readelf (binutils) shows the packaged binary is stripped
  dpkg-dev systemd binutils
  # the Windows MSI (deploy/windows/make-msi.sh): wixl builds it, msiinfo reads its tables back
  wixl msitools
)
# uPlot (web/) and playwright-core come from npm. Debian's nodejs/npm only when no Node.js is
# installed: machines that have one (e.g. from NodeSource, whose nodejs bundles npm) would get a
# package conflict from Debian's npm.
if ! command -v npm >/dev/null 2>&1; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$p")
done

# npm packages, pinned by each folder's package-lock.json; node_modules/ is not committed.
install_npm() {
  local dir
  for dir in web tests/browser tests/powershell; do
    [ -f "$dir/package-lock.json" ] || continue
    if [ ! -d "$dir/node_modules" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules" ]; then
      echo "install-deps: npm ci in $dir"
      (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
      touch "$dir/node_modules"
    fi
  done
}

if [ ${#missing[@]} -eq 0 ]; then
  install_npm
  exit 0
fi

echo "install-deps: installing ${#missing[@]} Debian packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_npm
echo "install-deps: done"
