#!/usr/bin/env bash
# The Python module on the lent GPU machine: run through the `device` tool from the repo root.
#   scripts/gpu_python.sh
# pip-installs ignis offline (scikit-build-core, nanobind, CMake, ninja and nvcc are on that machine)
# into a scratch folder, runs the pytest suite (the torch CUDA tests included), then the kernel
# benchmarks (bench/bench_ops.py and the other bench/bench_*.py but the engine one). Logs and bench-ops.md go to $OUT
# (when set) or build/gpu-logs.
#   IGNIS_PY_INSTALL=only   install and stop (scripts/gpu.sh builds while the GPU tests run)
#   IGNIS_PY_INSTALL=skip   use what an earlier `only` call of this machine session installed
#   IGNIS_PY_CARRIED=F      unpack F (scripts/pack_python.sh, carried) instead of pip install, when its
#                           module imports on this machine's Python; else pip install as usual
#   IGNIS_PYTEST=0          no pytest
#   IGNIS_BENCH_OPS=a,b     bench_ops.py over these ops only, and no other bench script
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
logs="${OUT:-$root/build/gpu-logs}"
site="${IGNIS_PY_SITE:-/tmp/ignis-site}"
mkdir -p "$logs"
export PATH="/usr/local/cuda/bin:$PATH" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" PYTHONDONTWRITEBYTECODE=1
cd "$root"

install="${IGNIS_PY_INSTALL:-}"
carried="${IGNIS_PY_CARRIED:-}"
if [ "$install" != skip ] && [ -n "$carried" ]; then
  rm -rf "$site" && mkdir -p "$site" && tar -C "$site" -xJf "$carried"
  if PYTHONPATH="$site" python3 -c "import ignis" 2> "$logs/carried-import.log"; then
    echo "pip install: skipped, carried module of $(cat "$site/REVISION")"
    [ "$install" = only ] && exit 0
    install=skip
  else
    echo "carried module does not import here ($(tail -1 "$logs/carried-import.log")): pip install"
  fi
fi
if [ "$install" != skip ]; then
  start=$(date +%s)
  if ! python3 -m pip install --no-build-isolation --no-deps --upgrade --target "$site" . \
       > "$logs/pip-install.log" 2>&1; then
    tail -40 "$logs/pip-install.log"
    echo "pip install: FAILED (log: pip-install.log)"
    exit 1
  fi
  echo "pip install: ok ($(( $(date +%s) - start )) s)"
  [ "$install" = only ] && exit 0
fi
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

tests=0
if [ "${IGNIS_PYTEST:-1}" != 0 ]; then
  python3 -m pytest -q -rfE -p no:cacheprovider python/tests > "$logs/pytest.log" 2>&1
  tests=$?
  tail -25 "$logs/pytest.log"
fi

ops=()
[ -n "${IGNIS_BENCH_OPS:-}" ] && ops=(--ops "$IGNIS_BENCH_OPS")
python3 bench/bench_ops.py --out "$logs/bench-ops.md" ${ops[@]+"${ops[@]}"} 2>&1 | tee "$logs/bench-ops.log"
bench=${PIPESTATUS[0]}
# The other kernel benchmarks (attention, fused linears...), each printing its own table.
for script in bench/bench_*.py; do
  [ -n "${IGNIS_BENCH_OPS:-}" ] && break
  case "$script" in bench/bench_ops.py|bench/bench_engine.py) continue ;; esac
  echo "== $script"
  timeout "${IGNIS_BENCH_SECONDS:-120}" python3 "$script" || bench=1
done
exit $(( tests != 0 || bench != 0 ))
