#!/usr/bin/env bash
# Packs what a GPU run needs from this machine's build into build-carry.tar.xz (~9 MB): the test
# binary and the CLI, stripped. Carry it with the device tool and pass it to scripts/gpu.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${IGNIS_BUILD_DIR:-$root/build}"
"$root/scripts/build.sh"
stage="$(mktemp -d)"
mkdir -p "$stage/tests" "$stage/src/cli"
cp "$build/tests/ignis_tests" "$stage/tests/" && cp "$build/src/cli/ignis" "$stage/src/cli/"
strip "$stage/tests/ignis_tests" "$stage/src/cli/ignis"
tar -C "$stage" -cf - tests src | xz -T2 -6 > "$root/build-carry.tar.xz"
rm -rf "$stage"
ls -la "$root/build-carry.tar.xz"
