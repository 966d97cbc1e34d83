#!/usr/bin/env bash
# Runs a Windows executable under Wine for CTest (CMAKE_CROSSCOMPILING_EMULATOR) and for the
# integration tests. Uses a prefix private to gpuhost's tests so a user's ~/.wine is never touched,
# and creates it once (about 15 s on first use).
set -euo pipefail
export WINEPREFIX="${GPUHOST_WINEPREFIX:-${HOME:-/tmp}/.cache/gpuhost-wine}"
export WINEDEBUG="${WINEDEBUG:--all}"
export WINEDLLOVERRIDES="${WINEDLLOVERRIDES:-mscoree,mshtml=}"
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  mkdir -p "$WINEPREFIX"
  wineboot --init >/dev/null 2>&1 || true
  wineserver --wait || true
fi
if [ "${1:-}" = "--init-prefix" ]; then
  exit 0
fi
exec wine "$@"
