#!/usr/bin/env bash
# Nsight Compute over chosen kernel-benchmark cases on the lent GPU machine (device tool, repo root):
#   IGNIS_PROFILE_CASES=layer_norm_backward:4096x4096:bf16,... scripts/gpu_profile.sh
#   IGNIS_TIMING_CASES=top_p_mask:1x262144:bf16,...            (kernel durations only, torch's too)
# installs ignis through scripts/gpu_python.sh (IGNIS_PY_CARRIED works), then runs bench/profile_ops.py under ncu:
# the profile cases with the sections below (ignis kernels only), the timing cases with every
# kernel's duration (ignis and torch). Reports go to $OUT (when set) or build/gpu-logs.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
logs="${OUT:-$root/build/gpu-logs}"
site="${IGNIS_PY_SITE:-/tmp/ignis-site}"
mkdir -p "$logs"
export PATH="/usr/local/cuda/bin:$PATH" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" PYTHONDONTWRITEBYTECODE=1
cd "$root"

# The module as scripts/gpu_python.sh installs it (pip install, or IGNIS_PY_CARRIED: a module packed here and
# carried); one that an earlier call of this machine session installed is kept unless IGNIS_REINSTALL is set.
if [ -n "${IGNIS_REINSTALL:-}" ] || ! PYTHONPATH="$site" python3 -c "import ignis" 2> /dev/null; then
  IGNIS_PY_INSTALL=only "$root/scripts/gpu_python.sh" || exit 1
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

default_sections="SpeedOfLight Occupancy LaunchStats WarpStateStats SchedulerStats MemoryWorkloadAnalysis"
sections="${IGNIS_NCU_SECTIONS:-$default_sections}"
section_args=()
for s in $sections; do section_args+=(--section "$s"); done

if [ -n "${IGNIS_PROFILE_CASES:-}" ]; then
  ncu --clock-control none --kernel-name-base demangled -k 'regex:ignis::' "${section_args[@]}" \
    python3 bench/profile_ops.py --calls 1 --cases "$IGNIS_PROFILE_CASES" > "$logs/ncu-profile.txt" 2>&1
  echo "ncu profile: exit $? ($(grep -c 'ignis::' "$logs/ncu-profile.txt") kernel reports)"
fi
if [ -n "${IGNIS_TIMING_CASES:-}" ]; then
  ncu --clock-control none --csv --print-units base --metrics gpu__time_duration.sum \
    python3 bench/profile_ops.py --calls 1 --torch --cases "$IGNIS_TIMING_CASES" > "$logs/ncu-timing.csv" 2>&1
  echo "ncu timing: exit $?"
fi
