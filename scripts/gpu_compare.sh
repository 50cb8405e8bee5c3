#!/usr/bin/env bash
# Kernel benchmarks of several git revisions in one call on the lent GPU machine (device tool, repo root):
#   IGNIS_COMPARE_OPS=cast,layer_norm_backward scripts/gpu_compare.sh HEAD cast-shape norm-bwd-3blocks
# Each revision gets its own worktree and its own pip install, all built at once (the machine's
# cores split between them); then this tree's bench/bench_ops.py runs against each install in
# turn, in the order given, and bench/compare_tables.py prints the cases side by side. Tables and
# logs go to $OUT (when set) or build/gpu-logs. IGNIS_COMPARE_OPS empty: every op; IGNIS_COMPARE_SHAPES and
# IGNIS_COMPARE_DTYPES narrow the cases (bench_ops.py's --shapes and --dtypes).
# An install is reused while its revision still names the same commit (a warm machine), and
# IGNIS_COMPARE_INSTALL_ONLY=1 stops after the installs, so GPU tests can run while they build
# and the benchmarks run later on an idle GPU. The revision "." is the working tree as it is (named
# "worktree"; always reinstalled): the device machine's copy of .git can lag behind the tree. So can
# a directory holding a source tree (always reinstalled, named after it): for main against this tree,
#   git archive main | tar -x -C .base   (.base in .git/info/exclude, carried with the device tool)
#   scripts/gpu_compare.sh .base .
# IGNIS_COMPARE_ROUNDS=N runs the benchmarks N times, the revisions interleaved within each round.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
logs="${OUT:-$root/build/gpu-logs}"
work="${IGNIS_COMPARE_DIR:-/tmp/ignis-compare}"
mkdir -p "$logs" "$work"
export PATH="/usr/local/cuda/bin:$PATH" PYTHONDONTWRITEBYTECODE=1
[ $# -gt 0 ] || { echo "usage: scripts/gpu_compare.sh REVISION..."; exit 2; }

names=()
start=$(date +%s)
for rev in "$@"; do
  name="$(printf '%s' "${rev#.}" | tr -c 'A-Za-z0-9._-' '_')"
  [ "$rev" = . ] && name=worktree
  names+=("$name")
  dir="$work/$name"
  if [ -d "$rev" ]; then
    rm -f "$dir/pip.rc"
    mkdir -p "$dir"
    ln -sfn "$(cd "$rev" && pwd)" "$dir/src"
    commit="tree:$rev"
  else
    commit="$(git -C "$root" rev-parse --verify -q "$rev^{commit}")" || { echo "$rev: no such revision"; exit 2; }
    if [ -f "$dir/pip.rc" ] && [ "$(cat "$dir/pip.rc")" = 0 ] &&
       [ "$(cat "$dir/commit" 2>/dev/null)" = "$commit" ]; then
      continue
    fi
    rm -f "$dir/pip.rc"
    if [ -d "$dir/src" ]; then
      git -C "$dir/src" checkout -q --detach "$commit" > "$logs/compare-$name-worktree.log" 2>&1 \
        || { cat "$logs/compare-$name-worktree.log"; exit 2; }
    else
      git -C "$root" worktree add -f --detach "$dir/src" "$commit" > "$logs/compare-$name-worktree.log" 2>&1 \
        || { cat "$logs/compare-$name-worktree.log"; exit 2; }
    fi
  fi
  (
    cd "$dir/src" &&
      CMAKE_BUILD_PARALLEL_LEVEL=$(( ($(nproc) + $# - 1) / $# )) python3 -m pip install --no-build-isolation \
        --no-deps --upgrade --target "$dir/site" . > "$logs/compare-$name-pip.log" 2>&1
    echo $? > "$dir/pip.rc"
    echo "$commit" > "$dir/commit"
  ) &
done
wait
echo "pip installs: $(( $(date +%s) - start )) s"
[ "${IGNIS_COMPARE_INSTALL_ONLY:-0}" = 1 ] && exit 0

for name in "${names[@]}"; do
  if [ "$(cat "$work/$name/pip.rc")" != 0 ]; then
    tail -30 "$logs/compare-$name-pip.log"
    echo "$name: pip install FAILED"
    exit 1
  fi
done
rounds="${IGNIS_COMPARE_ROUNDS:-1}"
tables=()
for round in $(seq 1 "$rounds"); do
  # Each round starts one revision later, so every revision takes every place in a round (see gpu_knobs.sh).
  for i in "${!names[@]}"; do
    name="${names[$(( (i + round - 1) % ${#names[@]} ))]}"
    label="$name"
    [ "$rounds" -gt 1 ] && label="$name-r$round"
    args=(--out "$logs/compare-$label.md")
    [ -n "${IGNIS_COMPARE_OPS:-}" ] && args+=(--ops "$IGNIS_COMPARE_OPS")
    [ -n "${IGNIS_COMPARE_SHAPES:-}" ] && args+=(--shapes "$IGNIS_COMPARE_SHAPES")
    [ -n "${IGNIS_COMPARE_DTYPES:-}" ] && args+=(--dtypes "$IGNIS_COMPARE_DTYPES")
    PYTHONPATH="$work/$name/site" python3 "$root/bench/bench_ops.py" "${args[@]}" > "$logs/compare-$label.log" 2>&1 \
      || { tail -20 "$logs/compare-$label.log"; echo "$label: bench FAILED"; exit 1; }
    tables+=("$label=$logs/compare-$label.md")
  done
done
python3 "$root/bench/compare_tables.py" "${tables[@]}" | tee "$logs/compare.md"
