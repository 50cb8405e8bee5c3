#!/usr/bin/env bash
# A/B of Python modules built here, on the lent GPU (device tool, repo root): each NAME=PACK argument is an archive
# made by scripts/pack_python.sh (for instance on two branches, with IGNIS_PY_PACK naming the output), carried with
# the device tool. Each is unpacked into its own folder and must import there; then scripts/gpu_knobs.sh runs
# bench/bench_ops.py (or IGNIS_KNOB_SCRIPT's benchmark) under each module (the setting NAME:PYTHONPATH=<its
# folder>), the modules rotating their places round by round, and prints every (module, round) table with each
# module's median. Nothing is installed or built on the device: a call takes about a minute (longer with an
# attention benchmark's sweep).
#   IGNIS_KNOB_BENCH="--ops layer_norm_backward" IGNIS_KNOB_ROUNDS=3 \
#     scripts/gpu_modules.sh main=python-main.tar.xz aligned=python-aligned.tar.xz
#   IGNIS_KNOB_SCRIPT=bench_attention_backward.py IGNIS_KNOB_BENCH="--reps 10" IGNIS_KNOB_ROUNDS=2 \
#     scripts/gpu_modules.sh main=python-main.tar.xz draft=python-draft.tar.xz
# Tables and logs go to $OUT (when set) or build/gpu-logs.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
logs="${OUT:-$root/build/gpu-logs}"
mkdir -p "$logs"
[ $# -ge 2 ] || { echo "usage: scripts/gpu_modules.sh NAME=PACK.tar.xz NAME=PACK.tar.xz..."; exit 2; }
settings=()
for arg in "$@"; do
  name="${arg%%=*}" pack="${arg#*=}"
  [[ "$arg" == *=* && "$name" =~ ^[A-Za-z0-9_-]+$ ]] || { echo "gpu_modules: expected NAME=PACK, got '$arg'"; exit 2; }
  site="/tmp/ignis-module-$name"
  rm -rf "$site" && mkdir -p "$site" && tar -C "$site" -xJf "$pack" \
    || { echo "gpu_modules: cannot unpack $pack"; exit 1; }
  PYTHONPATH="$site" python3 -c "import ignis" 2> "$logs/module-$name-import.log" \
    || { echo "gpu_modules: $name does not import: $(tail -1 "$logs/module-$name-import.log")"; exit 1; }
  echo "$name: module of $(cat "$site/REVISION")"
  settings+=("$name:PYTHONPATH=$site")
done
IGNIS_PY_INSTALL=skip exec "$root/scripts/gpu_knobs.sh" "${settings[@]}"
