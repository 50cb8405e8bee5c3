#!/usr/bin/env bash
# Environment-knob A/B on the lent GPU (device tool, repo root): one pip install of this tree, then
# bench/bench_ops.py (or IGNIS_KNOB_SCRIPT, below) under each setting, the settings interleaved round by round so
# drift hits all alike (each round starting one setting later), and bench/compare_tables.py over every (setting,
# round) table, with each setting's median over the rounds. Knobs are environment
# variables that an experiment branch's host code reads; main reads none.
#   IGNIS_KNOB_BENCH="--ops layer_norm_backward --dtypes bf16" IGNIS_KNOB_ROUNDS=2 \
#     scripts/gpu_knobs.sh base "IGNIS_X_A=1" "IGNIS_X_A=1 IGNIS_X_B=1"
# "base" is the empty setting. A setting may start with a label and a colon ("fast:IGNIS_X_A=1"), which then names
# its tables. IGNIS_PY_INSTALL=skip installs nothing (scripts/gpu_modules.sh's settings set PYTHONPATH themselves).
# IGNIS_KNOB_SCRIPT=bench_attention.py or bench_attention_backward.py runs that benchmark instead of bench_ops.py
# (IGNIS_KNOB_BENCH then holds its arguments, e.g. "--reps 10 --seqlens 1024,4096"), compared by
# bench/compare_attention_tables.py: each setting's median TFLOP/s over the rounds and its ratio to the first's.
# Tables and logs go to $OUT (when set) or build/gpu-logs.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
logs="${OUT:-$root/build/gpu-logs}"
mkdir -p "$logs"
[ $# -gt 0 ] || { echo "usage: scripts/gpu_knobs.sh SETTING..."; exit 2; }
script="${IGNIS_KNOB_SCRIPT:-bench_ops.py}"
case "$script" in
  bench_ops.py) compare=compare_tables.py ;;
  bench_attention.py | bench_attention_backward.py) compare=compare_attention_tables.py ;;
  *)
    echo "gpu_knobs: IGNIS_KNOB_SCRIPT must be bench_ops.py, bench_attention.py or bench_attention_backward.py"
    exit 2
    ;;
esac
if [ "${IGNIS_PY_INSTALL:-}" != skip ]; then
  IGNIS_PY_INSTALL=only "$root/scripts/gpu_python.sh" || exit 1
fi
export PYTHONPATH="${IGNIS_PY_SITE:-/tmp/ignis-site}${PYTHONPATH:+:$PYTHONPATH}"
read -r -a bench_args <<< "${IGNIS_KNOB_BENCH:-}"
tables=()
settings=("$@")
for round in $(seq 1 "${IGNIS_KNOB_ROUNDS:-2}"); do
  # Each round starts one setting later: a setting's place in the round seemed to move a cell by 1-2 points
  # (PERF_NOTES session 15), so every setting takes every place.
  for i in "${!settings[@]}"; do
    setting="${settings[$(( (i + round - 1) % ${#settings[@]} ))]}"
    label=""
    if [[ "$setting" =~ ^([A-Za-z0-9_-]+):(.*)$ ]]; then label="${BASH_REMATCH[1]}" setting="${BASH_REMATCH[2]}"; fi
    name="${label:-$(printf '%s' "$setting" | sed -e 's/IGNIS_X_//g' | tr -c 'A-Za-z0-9._-' '_')}-r$round"
    read -r -a assignments <<< "$([ "$setting" = base ] || printf '%s' "$setting")"
    env ${assignments[@]+"${assignments[@]}"} python3 "$root/bench/$script" --out "$logs/knob-$name.md" \
      ${bench_args[@]+"${bench_args[@]}"} > "$logs/knob-$name.log" 2>&1 \
      || { tail -20 "$logs/knob-$name.log"; echo "$name: bench FAILED"; exit 1; }
    tables+=("$name=$logs/knob-$name.md")
  done
done
python3 "$root/bench/$compare" "${tables[@]}" | tee "$logs/knobs.md"
