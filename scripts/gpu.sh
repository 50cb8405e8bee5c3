#!/usr/bin/env bash
# The GPU loop: run through the `device` tool from the repo root on the lent GPU machine.
#   scripts/gpu.sh [BUILD_DIR | PACK.tar.xz]   IGNIS_GPU_STAGES=tests,sanitize,python,engine (default: all)
# Uses BUILD_DIR when it holds a build, or unpacks PACK (made by scripts/pack_carry.sh on a
# development machine: the stripped test binary and CLI, ~9 MB), otherwise configures and builds
# one there. Stages:
#   tests     the C++ test suite on the GPU
#   sanitize  compute-sanitizer memcheck and racecheck over the CUDA cases, one process a case,
#             several at once (scripts/sanitize_cases.sh)
#   python    pip-installs the module there, runs pytest (torch on the GPU) and the kernel benchmarks
#   engine    bench/bench_engine.py: ignis against HF transformers end to end; needs
#             IGNIS_TEST_MODEL (the SmolLM2 GGUF) and the `gguf` wheel in .whl/
# A short table comes last. Full logs go to $OUT (when set) or BUILD_DIR/gpu-logs.
# Narrower runs: IGNIS_GPU_TEST_FILTER (a gtest filter) for the tests and sanitize stages;
# IGNIS_SANITIZER_TOOLS (memcheck, racecheck or both, comma-separated; default both) for the sanitize
# stage (racecheck over every CUDA case is ~7 minutes); the python stage takes IGNIS_PYTEST=0 and
# IGNIS_BENCH_OPS (see scripts/gpu_python.sh). The module is pip-installed while the GPU tests run.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
if [[ "$build" == *.tar.xz ]]; then
  unpacked=/tmp/ignis-carried
  rm -rf "$unpacked" && mkdir -p "$unpacked" && tar -xJf "$build" -C "$unpacked" ||
    { echo "cannot unpack $build"; exit 1; }
  build="$unpacked"
fi
logs="${OUT:-$build/gpu-logs}"
stages=",${IGNIS_GPU_STAGES:-tests,sanitize,python,engine},"
mkdir -p "$logs"
export PATH="/usr/local/cuda/bin:$PATH"

# Each row is also printed and appended to gpu-summary.txt as its stage ends, so a run the device tool cuts off at
# its limit still brings back what finished (the name sorts before the per-case logs, past the tool's file limit).
declare -a rows=()
: > "$logs/gpu-summary.txt"
row() {
  rows+=("$(printf '%-34s %s' "$1" "$2")")
  printf '%s\n' "${rows[-1]}" | tee -a "$logs/gpu-summary.txt"
}
has() { [[ "$stages" == *",$1,"* ]]; }
filter="${IGNIS_GPU_TEST_FILTER:-}"

if has python; then  # builds on the CPUs while the GPU tests run
  ( IGNIS_PY_INSTALL=only OUT="$logs" "$root/scripts/gpu_python.sh" > "$logs/python-install.log" 2>&1
    echo $? > "$logs/python-install.rc" ) &
  installer=$!
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$logs/gpu.txt" 2>&1
row "device" "$(head -1 "$logs/gpu.txt")"

tests="$build/tests/ignis_tests"
if has tests || has sanitize; then
  if [ ! -x "$tests" ]; then
    start=$(date +%s)
    cmake -S "$root" -B "$build" -G Ninja -DIGNIS_CUDA_GENCODE="-gencode=arch=compute_90a,code=sm_90a" \
        > "$logs/configure.log" 2>&1 && ninja -C "$build" ignis_tests > "$logs/build.log" 2>&1
    status=$?
    row "build on device" "$([ $status -eq 0 ] && echo ok || echo FAILED) ($(( $(date +%s) - start )) s)"
    [ $status -eq 0 ] || { tail -30 "$logs/build.log"; printf '%s\n' "${rows[@]}"; exit 1; }
  else
    row "build" "carried: $build"
  fi
fi

failed=0
if has tests; then
  start=$(date +%s)
  # IGNIS_REQUIRE_GPU: CudaSupport.GpuIsUsableWhereRequired fails, rather than every CUDA case skipping,
  # when the GPU does not answer.
  IGNIS_REQUIRE_GPU=1 "$tests" --gtest_brief=1 ${filter:+"--gtest_filter=$filter"} > "$logs/tests.log" 2>&1
  status=$?
  summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$logs/tests.log" | tr '\n' ' ')
  verdict=$([ $status -eq 0 ] && echo ok || echo FAILED)
  row "gpu tests (${filter:-all}, on GPU)" "$verdict: $summary ($(( $(date +%s) - start )) s)"
  [ $status -eq 0 ] || { failed=1; grep -E '^\[  FAILED  \]' "$logs/tests.log" | head -30; }
  # Hopper runs the wgmma flash kernels; the mma.sync one (every other GPU's) is covered by its cases again, and
  # the forward's two unit shapes at head_dim 64 each alone (the planner picks one by the problem's size); only
  # when the filter takes in the flash cases.
  if [[ -z "$filter" || "$filter" == *Flash* || "$filter" == *cuda* ]] &&
     grep -q "^9\.0" <(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1); then
    for variant in IGNIS_FLASH_KERNEL=mma_sync IGNIS_FLASH_D64_ROWS=192 IGNIS_FLASH_D64_ROWS=128; do
      start=$(date +%s)
      env "$variant" "$tests" --gtest_brief=1 --gtest_filter='*Flash*cuda*' > "$logs/tests-${variant//=/-}.log" 2>&1
      status=$?
      summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$logs/tests-${variant//=/-}.log" | tr '\n' ' ')
      verdict=$([ $status -eq 0 ] && echo ok || echo FAILED)
      row "flash cases, $variant" "$verdict: $summary ($(( $(date +%s) - start )) s)"
      [ $status -eq 0 ] || failed=1
    done
  fi
fi

if has sanitize; then
  tools="${IGNIS_SANITIZER_TOOLS:-memcheck,racecheck}"
  for tool in ${tools//,/ }; do
    if [ "$tool" != memcheck ] && [ "$tool" != racecheck ]; then
      row "compute-sanitizer $tool" "FAILED: IGNIS_SANITIZER_TOOLS names memcheck and racecheck only"
      failed=1
      continue
    fi
    result=$("$root/scripts/sanitize_cases.sh" "$tests" "$logs" "$tool" ${filter:+"$filter"})
    status=$?
    row "compute-sanitizer $tool" "$(head -1 <<< "$result")"
    while IFS= read -r line; do row "" "$line"; done < <(tail -n +2 <<< "$result" | head -20)
    [ $status -eq 0 ] || failed=1
  done
fi

if has python; then
  wait "$installer"
  if [ "$(cat "$logs/python-install.rc")" = 0 ]; then
    IGNIS_PY_INSTALL=skip OUT="$logs" "$root/scripts/gpu_python.sh" > "$logs/python.log" 2>&1
    status=$?
  else
    cp "$logs/python-install.log" "$logs/python.log"
    status=1
  fi
  row "python: pip install" "$(grep -m1 '^pip install' "$logs/python-install.log")"
  row "python: pytest (torch on GPU)" "$(grep -E '[0-9]+ (passed|failed)' "$logs/python.log" | tail -1)"
  row "python: benchmarks" "$([ $status -eq 0 ] && echo ok || echo "FAILED (rc $status)"): bench-ops.md"
  [ -f "$logs/bench-ops.md" ] && row "python: kernel targets" "$(grep -m1 '^Targets' "$logs/bench-ops.md")"
  [ $status -eq 0 ] || { failed=1; tail -40 "$logs/python.log"; }
  [ -f "$logs/bench-ops.md" ] && { echo; cat "$logs/bench-ops.md"; }
fi

if has engine; then
  if [ -z "${IGNIS_TEST_MODEL:-}" ] || [ ! -x "$build/src/cli/ignis" ]; then
    row "engine vs HF" "skipped (needs IGNIS_TEST_MODEL and $build/src/cli/ignis)"
  else
    python3 -m pip install --no-deps --target /tmp/ignis-gguf "$root"/.whl/gguf-*.whl > "$logs/engine.log" 2>&1
    PYTHONPATH="/tmp/ignis-gguf${PYTHONPATH:+:$PYTHONPATH}" timeout 400 python3 "$root/bench/bench_engine.py" \
        --ignis "$build/src/cli/ignis" --model "$IGNIS_TEST_MODEL" --out "$logs/engine.md" >> "$logs/engine.log" 2>&1
    status=$?
    row "engine vs HF (bench_engine.py)" "$([ $status -eq 0 ] && echo ok || echo "FAILED (rc $status)"): engine.md"
    [ $status -eq 0 ] || { failed=1; tail -30 "$logs/engine.log"; }
    [ -f "$logs/engine.md" ] && { echo; cat "$logs/engine.md"; }
  fi
fi

echo
echo "== ignis GPU run, $(date -u +%Y-%m-%dT%H:%MZ), stages ${stages//,/ } =="
printf '%s\n' "${rows[@]}"
exit $failed
