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
# shellcheck source=scripts/llama-build-flags.sh
. scripts/llama-build-flags.sh

# Qt (even offscreen) loads a few system libraries, and its xcb (X11) platform plugin links the libxcb-* ones below
# (PySide6 bundles the plugin, not these; see app/launch.py); install them when we can (root with apt), else say so.
# --dev adds Xvfb, an X server without a screen, so the tests can open the real window (journey J1).
QT_LIBS="libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3"
QT_LIBS="$QT_LIBS libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-randr0"
QT_LIBS="$QT_LIBS libxcb-shape0 libxcb-shm0 libxcb-sync1 libxcb-util1 libxcb-xfixes0 libxcb-xkb1 libxkbcommon-x11-0"
QT_LIBS="$QT_LIBS libx11-xcb1"
if [ "${1:-}" = "--dev" ]; then
  QT_LIBS="$QT_LIBS xvfb xauth"
fi
if command -v dpkg-query >/dev/null 2>&1; then
  missing=$(for p in $QT_LIBS; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
  if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      apt-get update -qq >/dev/null 2>&1 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing desktop-file-utils >/dev/null
    else
      echo "note: Qt needs these system packages: $(echo $missing) (install them: sudo apt-get install $(echo $missing))" >&2
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
