#!/usr/bin/env bash
# Builds gpuhost's MSI from the Windows build tree with wixl (Debian's msitools): stages
# `cmake --install --strip` (the same files as the portable zip), lists doc/ and deploy/ with
# wixl-heat, then compiles deploy/windows/gpuhost.wxs. Called by the `msi` target:
#   cmake --build --preset windows --target msi   -> build/windows/gpuhost-<version>-x64.msi
# Usage: make-msi.sh BUILD_DIR SOURCE_DIR VERSION OUTPUT   (stages beside OUTPUT)
set -euo pipefail
build=$(realpath "$1") source=$(realpath "$2") version=$3 output=$(realpath -m "$4")
stage=$(dirname "$output")/msi-stage
rm -rf "$stage"
cmake --install "$build" --prefix "$stage" --strip >/dev/null
for dir in doc deploy; do
  ref=$(tr '[:lower:]' '[:upper:]' <<<"$dir")DIR
  (cd "$stage/$dir" && find . -type f | sort) |
    wixl-heat -p ./ --directory-ref "$ref" --component-group "CG.$dir" --var "var.${dir^}Dir" --win64 \
      >"$stage.$dir.wxs"
done
# wixl looks Source paths up under its working directory (an absolute one is refused).
cd "$stage"
wixl -a x64 -o "$output" -D Version="$version" -D SourceDir=. -D DocDir=doc -D DeployDir=deploy -D Win64=yes \
  "$source/deploy/windows/gpuhost.wxs" "$stage.doc.wxs" "$stage.deploy.wxs"
echo "$output"
