#!/usr/bin/env bash
# Create .venv and install DynaDraft with its dependencies. Usage: scripts/setup.sh [--dev]
#
# llama-cpp-python builds llama.cpp from source (~15-18 minutes on 2 cores). We build its wheel ourselves with
# explicit CPU flags and keep it in a cache folder named after those flags, because:
#  - the default -march=native build can use instructions (AMX, AVX-512) that a VM or another CPU rejects with
#    "Illegal instruction";
#  - pip's own wheel cache ignores CMAKE_ARGS, so it would hand back a wheel built with other flags.
# DYNADRAFT_LLAMA_BACKEND=vulkan selects the Vulkan build (see README, "Vulkan build").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
LLAMA_VERSION=0.3.36
BACKEND=${DYNADRAFT_LLAMA_BACKEND:-cpu}
CPU_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF"
# AVX-512 roughly halves the time per token on CPUs that have it (Zen 4/5 incl. Strix Halo, recent Xeons), so use it
# when this CPU reports it. Never AMX: it needs kernel permission that VMs often refuse (seen here: SIGILL).
# DYNADRAFT_PORTABLE=1 (used for bundles) keeps the AVX2 baseline that runs on any x86-64-v3 CPU.
if [ "${DYNADRAFT_PORTABLE:-0}" != 1 ] && grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  CPU_FLAGS="$CPU_FLAGS -DGGML_AVX512=ON"
  for f in avx512_vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
    grep -qw "${f%%:*}" /proc/cpuinfo && CPU_FLAGS="$CPU_FLAGS -DGGML_${f##*:}=ON"
  done
else
  CPU_FLAGS="$CPU_FLAGS -DGGML_AVX512=OFF"
fi
case "$BACKEND" in
  cpu) LLAMA_CMAKE_ARGS="$CPU_FLAGS" ;;
  vulkan) LLAMA_CMAKE_ARGS="$CPU_FLAGS -DGGML_VULKAN=ON ${DYNADRAFT_VULKAN_CMAKE_ARGS:-}" ;;
  *) echo "unknown DYNADRAFT_LLAMA_BACKEND=$BACKEND (cpu or vulkan)" >&2; exit 2 ;;
esac
KEY=$(printf '%s %s' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-16)
WHEELS=${DYNADRAFT_WHEEL_CACHE:-$HOME/.cache/dynadraft-wheels}/$BACKEND-$KEY

# Qt (even offscreen) loads a few system libraries; install them when we can (root with apt), else just say so.
QT_LIBS="libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3"
if command -v dpkg-query >/dev/null 2>&1; then
  missing=$(for p in $QT_LIBS; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq >/dev/null 2>&1 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing desktop-file-utils >/dev/null
    else
      echo "note: Qt needs these system packages: $missing (install them with your package manager)" >&2
    fi
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
  echo "Building llama-cpp-python $LLAMA_VERSION ($BACKEND) once; this takes a while on a small machine..."
  mkdir -p "$WHEELS"
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
    .venv/bin/python -m pip wheel --quiet --no-deps --no-cache-dir --no-binary llama-cpp-python \
    -w "$WHEELS" "llama-cpp-python==$LLAMA_VERSION"
fi
.venv/bin/python -m pip install --quiet --force-reinstall --no-deps "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl
if [ "${1:-}" = "--dev" ]; then
  .venv/bin/python -m pip install --quiet --find-links "$WHEELS" -e '.[dev]'
else
  .venv/bin/python -m pip install --quiet --find-links "$WHEELS" -e .
fi
