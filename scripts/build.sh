#!/usr/bin/env bash
# Configures and builds ignis into build/ (Release, Ninja). CUDA kernels are built when nvcc is found.
# Quiet on success; on failure prints the end of the build log.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${IGNIS_BUILD_DIR:-$root/build}"
export PATH="/usr/local/cuda/bin:$PATH"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$root/.cmake-configure.log" 2>&1 \
    || { cat "$root/.cmake-configure.log"; exit 1; }
fi
if ! ninja -C "$build" > "$build/build.log" 2>&1; then
  grep -E 'error|FAILED' -A5 "$build/build.log" | head -80
  exit 1
fi
echo "build: ok ($build)"
