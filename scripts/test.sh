#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite. GPU cases skip when no GPU is present.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
cd "${IGNIS_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)"
