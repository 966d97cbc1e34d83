#!/usr/bin/env bash
# Builds everything and runs every test, from a fresh Debian 12 machine (as root) or an existing
# checkout: installs the Debian packages, then
#   1. Linux build (RelWithDebInfo, warnings as errors): unit + integration tests
#   2. Linux ASan + UBSan build: unit tests
#   3. Windows build (MinGW-w64 cross compiler): the same tests under Wine
# Ends with one line "N passed, N failed". Exit status is non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

jobs=$(nproc)
total_passed=0
total_failed=0
log_dir=build/test-logs
mkdir -p "$log_dir"

# run_suite NAME PRESET: configure, build, test; adds the CTest counts to the totals.
run_suite() {
  local name=$1 preset=$2
  echo "== $name: configure and build"
  cmake --preset "$preset" >"$log_dir/$preset-configure.log" || { cat "$log_dir/$preset-configure.log"; return 1; }
  if ! cmake --build --preset "$preset" >"$log_dir/$preset-build.log" 2>&1; then
    tail -n 60 "$log_dir/$preset-build.log"
    echo "$name: build failed (full log: $log_dir/$preset-build.log)"
    return 1
  fi
  echo "== $name: test"
  local rc=0
  ctest --preset "$preset" -j "$jobs" 2>&1 | tee "$log_dir/$preset-ctest.log" || rc=$?
  local line passed failed all
  line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log_dir/$preset-ctest.log" | tail -n 1 || true)
  if [ -z "$line" ]; then
    echo "$name: ctest printed no summary"
    return 1
  fi
  failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  all=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/' <<<"$line")
  passed=$((all - failed))
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  return $rc
}

status=0
run_suite "Linux" linux || status=1
run_suite "Linux ASan+UBSan" sanitize || status=1
scripts/wine-run.sh --init-prefix
run_suite "Windows (MinGW-w64, under Wine)" windows || status=1

echo
echo "$total_passed passed, $total_failed failed"
if [ $status -ne 0 ] && [ $total_failed -eq 0 ]; then
  echo "a build step failed (see above)"
fi
exit $status
