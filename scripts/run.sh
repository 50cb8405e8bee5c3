#!/usr/bin/env bash
# Sets up, builds and runs the main job. Until the engine lands: `ignis info` and `ignis selfcheck`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
ignis="${IGNIS_BUILD_DIR:-$root/build}/src/cli/ignis"
"$ignis" info
"$ignis" selfcheck
