#!/usr/bin/env bash
# Create .venv and install DynaDraft with its dependencies. Usage: scripts/setup.sh [--dev]
#
# Needs Python >= 3.11 with venv and a C/C++ compiler; CMake and Ninja come from PyPI where the system has none.
# As root with apt-get, missing system packages are installed; otherwise one line names the command to run.
# llama-cpp-python builds llama.cpp from source. We build its wheel ourselves with explicit CPU flags and keep it in
# a cache folder named after those flags, because:
#  - the default -march=native build can use instructions (AMX, AVX-512) that a VM or another CPU rejects with
#    "Illegal instruction";
#  - pip's own wheel cache ignores CMAKE_ARGS, so it would hand back a wheel built with other flags.
# --dev also installs the pinned test tools (scripts/constraints.txt) and keeps the wheel's CMake build so that
# scripts/build-llama-server.sh compiles only the server on top of it.
# DYNADRAFT_LLAMA_BACKEND=vulkan selects the Vulkan build (docs/gpu-vulkan.md).
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck source=scripts/llama-build-flags.sh
. scripts/llama-build-flags.sh
DEV=0
[ "${1:-}" = "--dev" ] && DEV=1
# The test command's tools and dependencies are pinned; the app's launch keeps pyproject.toml's ranges.
PIN=()
[ "$DEV" = 1 ] && PIN=(-c scripts/constraints.txt)

# find_python: the first Python >= 3.11 among $PYTHON, python3, python3.13, python3.12, python3.11.
find_python() {
  local c
  for c in ${PYTHON:-} python3 python3.13 python3.12 python3.11; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

# need_debs WHAT PKG...: install Debian packages as root, else stop naming the command.
need_debs() {
  local what=$1
  shift
  if can_apt; then
    step "installing $what: $*"
    apt_install "$@"
  else
    die "$what missing: install it with: sudo apt-get install $* (then run this again)"
  fi
}

step "checking prerequisites: Python >= 3.11 with venv, a C/C++ compiler"
if [ ! -x .venv/bin/python ]; then
  PY=$(find_python) || die "Python >= 3.11 not found: install it (sudo apt-get install python3) or set PYTHON=/path/to/python3.11"
  if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
    need_debs "Python's venv module" "python$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-venv"
  fi
fi
if ! command -v cc >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1; then
  need_debs "a C/C++ compiler" build-essential
fi

# Qt (even offscreen) loads a few system libraries, and its xcb (X11) platform plugin links the libxcb-* ones below
# (PySide6 bundles the plugin, not these; see app/launch.py). Without root they are only named: the app still
# installs and the tests say what is missing. --dev adds Xvfb, an X server without a screen, so the tests can open
# the real window (journey J1).
QT_LIBS="libegl1 libgl1 libxkbcommon0 libfontconfig1 libdbus-1-3"
QT_LIBS="$QT_LIBS libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-randr0"
QT_LIBS="$QT_LIBS libxcb-shape0 libxcb-shm0 libxcb-sync1 libxcb-util1 libxcb-xfixes0 libxcb-xkb1 libxkbcommon-x11-0"
QT_LIBS="$QT_LIBS libx11-xcb1"
[ "$DEV" = 1 ] && QT_LIBS="$QT_LIBS xvfb xauth"
if command -v dpkg-query >/dev/null 2>&1; then
  missing=$(for p in $QT_LIBS; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || echo "$p"; done)
  if [ -n "$missing" ]; then
    if can_apt; then
      step "installing the system libraries Qt needs"
      # shellcheck disable=SC2086  # a list of package names
      apt_install $missing desktop-file-utils
    else
      echo "[dynadraft] note: Qt needs these system packages: $(echo $missing) (sudo apt-get install $(echo $missing))" >&2
    fi
  fi
fi

if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $PY"
  "$PY" -m venv .venv
  PATH="$PWD/.venv/bin:$PATH"
fi
# What .venv was last set up from: with the same inputs a second run installs nothing (seconds, not a minute).
STAMP=$(cat pyproject.toml scripts/constraints.txt | sha256sum | cut -c1-16)-$DEV-$BACKEND-$KEY
if [ "$(cat .venv/.dynadraft-setup 2>/dev/null)" = "$STAMP" ] && ls "$WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  step "set-up done: .venv is up to date"
  exit 0
fi
rm -f .venv/.dynadraft-setup
step "installing pip and the build tools into .venv" "check that PyPI is reachable (pip's message is above)"
.venv/bin/python -m pip install --quiet --upgrade "${PIN[@]}" pip
BUILD_TOOLS=("scikit-build-core>=0.9.2")
# llama.cpp needs CMake >= 3.21 (the pinned sdist says so) and builds with Ninja; take both from PyPI when missing.
if ! command -v cmake >/dev/null 2>&1 || ! cmake --version | awk 'NR==1 { split($3, v, "."); exit !(v[1] > 3 || (v[1] == 3 && v[2] >= 21)) }'; then
  BUILD_TOOLS+=(cmake)
fi
command -v ninja >/dev/null 2>&1 || BUILD_TOOLS+=(ninja)
.venv/bin/python -m pip install --quiet "${PIN[@]}" "${BUILD_TOOLS[@]}"

if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
  step "building llama.cpp ($BACKEND) into a llama-cpp-python $LLAMA_VERSION wheel, once: 3.5 to 7 minutes on 2 \
cores (cached in $WHEELS)" \
    "the build log's last lines are above; a missing compiler or a full disk are the usual causes"
  ensure_sdist
  rm -rf "$LLAMA_BUILD_DIR"
  mkdir -p "$LLAMA_BUILD_DIR/src" "$WHEELS"
  tar -xzf "$SDIST" -C "$LLAMA_BUILD_DIR/src"
  # In-tree build with the venv's scikit-build-core and a build folder we name, so the CMake objects outlive pip.
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
    .venv/bin/python -m pip wheel --no-deps --no-build-isolation --config-settings=build-dir="$LLAMA_BUILD_DIR/build" \
    -w "$WHEELS" "$LLAMA_BUILD_DIR/src/llama_cpp_python-$LLAMA_VERSION" >"$LLAMA_BUILD_DIR/wheel.log" 2>&1 \
    || { tail -n 40 "$LLAMA_BUILD_DIR/wheel.log" >&2; false; }
  [ "$DEV" = 1 ] || rm -rf "$LLAMA_BUILD_DIR"
fi
step "installing DynaDraft and its dependencies into .venv" "check that PyPI is reachable (pip's message is above)"
.venv/bin/python -m pip install --quiet --force-reinstall --no-deps "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl
if [ "$DEV" = 1 ]; then
  .venv/bin/python -m pip install --quiet "${PIN[@]}" --find-links "$WHEELS" -e '.[dev]'
else
  .venv/bin/python -m pip install --quiet --find-links "$WHEELS" -e .
fi
echo "$STAMP" >.venv/.dynadraft-setup
step "set-up done"
