#!/usr/bin/env bash
# SM4 on Windows (libgcrypt-20.dll, gpuhost.exe's library, run under Wine) against SM4 on Linux
# (OpenSSL 3.0, the anchor), same machine, same run: bench/crypto_throughput of both builds, one
# core and all cores, then the ratio Windows / Linux per row. Wine runs the Windows code natively
# (no emulation of x86), so the cipher rows compare the libraries; rows whose Windows side goes
# through Wine's own bcrypt.dll (SHA-256, AES-GCM) measure Wine's CNG, not Windows'. The format
# rows (crypt/encrypted_file.h end to end) also pay Wine's thread start-up and fresh-page cost on
# every call: under Wine they fall far below the cipher rows, so take those on real Windows.
# Needs: cmake --build --preset linux --target crypto_throughput, and the windows preset built.
# Usage: bench/sm4_cross_os.sh [--seconds 0.5]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=0.5
[ "${1:-}" = "--seconds" ] && seconds=$2
linux_bin=build/linux/bench/crypto_throughput
windows_bin=build/windows/bench/crypto_throughput.exe
for b in "$linux_bin" "$windows_bin"; do
  [ -x "$b" ] || [ -f "$b" ] || { echo "missing $b: build the linux and windows presets" >&2; exit 2; }
done
linux=$("$linux_bin" --seconds "$seconds")
windows=$(scripts/wine-run.sh "$windows_bin" --seconds "$seconds" | tr -d '\r')
echo "== Linux"; echo "$linux"
echo "== Windows (Wine)"; echo "$windows"
echo
echo "== Windows / Linux (MB/s ratio; > 1: the Windows build is faster)"
printf '%-18s %10s %10s\n' "" "1 core" "all cores"
for row in SM4-CTR HMAC-SM3 SM4-CTR+HMAC-SM3 AES-256-GCM; do
  l=$(grep -E "^$(printf '%s' "$row" | sed 's/+/\\+/g') " <<<"$linux" | awk '{print $2, $4}')
  w=$(grep -E "^$(printf '%s' "$row" | sed 's/+/\\+/g') " <<<"$windows" | awk '{print $2, $4}')
  [ -n "$l" ] && [ -n "$w" ] || continue
  awk -v row="$row" -v l="$l" -v w="$w" 'BEGIN { split(l, a, " "); split(w, b, " ");
    printf "%-18s %10.2f %10.2f\n", row, b[1] / a[1], b[2] / a[2] }'
done
for suite in sm4-ctr-hmac-sm3 aes-256-gcm; do
  l=$(grep -E "^format $suite " <<<"$linux" | awk '{print $4, $10}')
  w=$(grep -E "^format $suite " <<<"$windows" | awk '{print $4, $10}')
  [ -n "$l" ] && [ -n "$w" ] || continue
  awk -v s="$suite" -v l="$l" -v w="$w" 'BEGIN { split(l, a, " "); split(w, b, " ");
    printf "format %-16s encrypt %.2f, decrypt %.2f\n", s, b[1] / a[1], b[2] / a[2] }'
done
