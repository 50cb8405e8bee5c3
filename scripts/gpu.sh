#!/usr/bin/env bash
# The GPU loop: run through the `device` tool from the repo root on the lent GPU machine.
#   scripts/gpu.sh [BUILD_DIR]
# Uses BUILD_DIR when it already holds a build (carried from a development machine, where
# scripts/test.sh built it), otherwise configures and builds one there. Then: GPU tests,
# compute-sanitizer memcheck and racecheck over the GPU tests, the benchmarks, and a short
# table last. Full logs go to $OUT (when set) or build/gpu-logs.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
logs="${OUT:-$build/gpu-logs}"
mkdir -p "$logs"
export PATH="/usr/local/cuda/bin:$PATH"

declare -a rows=()
row() { rows+=("$(printf '%-34s %s' "$1" "$2")"); }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$logs/gpu.txt" 2>&1
row "device" "$(head -1 "$logs/gpu.txt")"

if [ ! -x "$build/tests/ignis_tests" ]; then
  start=$(date +%s)
  cmake -S "$root" -B "$build" -G Ninja -DIGNIS_CUDA_GENCODE="-gencode=arch=compute_90a,code=sm_90a" \
      > "$logs/configure.log" 2>&1 && ninja -C "$build" > "$logs/build.log" 2>&1
  status=$?
  row "build on device" "$([ $status -eq 0 ] && echo ok || echo FAILED) ($(( $(date +%s) - start )) s)"
  [ $status -eq 0 ] || { tail -30 "$logs/build.log"; printf '%s\n' "${rows[@]}"; exit 1; }
else
  row "build" "carried: $build"
fi

tests="$build/tests/ignis_tests"
"$tests" --gtest_brief=1 > "$logs/tests.log" 2>&1
status=$?
summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$logs/tests.log" | tr '\n' ' ')
row "gpu tests (all, on GPU)" "$([ $status -eq 0 ] && echo ok || echo FAILED): $summary"
[ $status -eq 0 ] || grep -E 'Failure|FAILED|error' "$logs/tests.log" | head -30

# The sanitizers run over the CUDA cases only (the CPU cases add nothing but time).
cuda_filter='*cuda*:*Cuda*:*CUDA*'
for tool in memcheck racecheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 3 "$tests" --gtest_filter="$cuda_filter" --gtest_brief=1 \
      > "$logs/sanitizer-$tool.log" 2>&1
  status=$?
  row "compute-sanitizer $tool" "$([ $status -eq 0 ] && echo ok || echo "FAILED (rc $status)"): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/sanitizer-$tool.log" | tail -1)"
done

# The Python module is built there (its Python differs from the dev machine's), then its
# pytest suite (torch CUDA cases included) and the kernel benchmark against torch.
OUT="$logs" "$root/scripts/gpu_python.sh" > "$logs/python.log" 2>&1
status=$?
row "python: pip install" "$(grep -m1 '^pip install' "$logs/python.log")"
row "python: pytest (torch on GPU)" "$(grep -E '[0-9]+ (passed|failed)' "$logs/python.log" | tail -1)"
row "python: benchmarks" "$([ $status -eq 0 ] && echo ok || echo "FAILED (rc $status)"): bench-ops.md"
[ $status -eq 0 ] || tail -40 "$logs/python.log"
[ -f "$logs/bench-ops.md" ] && { echo; cat "$logs/bench-ops.md"; }

echo
echo "== ignis GPU run, $(date -u +%Y-%m-%dT%H:%MZ) =="
printf '%s\n' "${rows[@]}"
