#!/usr/bin/env bash
# Sets up, builds and runs the main job: `ignis info`, `ignis selfcheck`, then the engine answers
# a prompt with the default model on the CPU (text on stdout, speed on stderr).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
ignis="${IGNIS_BUILD_DIR:-$root/build}/src/cli/ignis"
"$ignis" info
"$ignis" selfcheck
"$ignis" generate -p "What is the capital of France?" -n 64
