#!/usr/bin/env bash
# Packs the Python module built here for the GPU machine's Python into python-carry.tar.xz, so a device
# call can skip its ~60-70 s pip install: carry the file and set IGNIS_PY_CARRIED=python-carry.tar.xz
# for scripts/gpu_python.sh, gpu.sh or gpu_knobs.sh. The module is built from this working tree in
# build-py<version>/ with the Python given by IGNIS_DEVICE_PYTHON (default: pyenv's 3.12, the GPU
# machine's version). REVISION in the archive names the tree it was built from; gpu_python.sh prints it,
# and falls back to pip install when the module does not import there. IGNIS_PY_PACK names another archive
# (a path under the repo root, default python-carry.tar.xz), e.g. one per branch for scripts/gpu_modules.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${IGNIS_DEVICE_PYTHON:-$(ls -d /root/.pyenv/versions/3.12.*/bin/python3 2>/dev/null | tail -1)}"
[ -x "$python" ] || { echo "pack_python: no Python for the device (set IGNIS_DEVICE_PYTHON)"; exit 1; }
version="$("$python" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"
build="$root/build-py$version"
export PATH="/usr/local/cuda/bin:$PATH"
if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$python" \
    > "$build/configure.log" 2>&1 || { tail -20 "$build/configure.log"; exit 1; }
fi
ninja -C "$build" ignis_python > "$build/build-python.log" 2>&1 || { tail -30 "$build/build-python.log"; exit 1; }
stage="$(mktemp -d)"
cp "$build"/python/ignis.cpython-*.so "$stage/"
strip "$stage"/ignis.cpython-*.so
printf '%s\n' "$(git -C "$root" describe --always --dirty)" > "$stage/REVISION"
pack="$root/${IGNIS_PY_PACK:-python-carry.tar.xz}"
tar -C "$stage" -cf - . | xz -T2 -6 > "$pack"
rm -rf "$stage"
ls -la "$pack"
