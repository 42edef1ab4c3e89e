#!/usr/bin/env bash
# Create .venv and install DynaDraft with its dependencies. Usage: scripts/setup.sh [--dev] [--explain]
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
#
# The backend: DYNADRAFT_LLAMA_BACKEND=auto (the default) builds llama.cpp with Vulkan where scripts/choose_backend.py
# finds a Vulkan GPU (an integrated, discrete or virtual one: a software device such as llvmpipe does not count), else
# for the CPU; cpu or vulkan forces one. --explain prints the choice and why (and, for vulkan, its prerequisites) and
# exits without installing or building anything. Vulkan's prerequisites (glslc, libvulkan-dev, newer Vulkan headers)
# come from scripts/build-vulkan.sh (docs/gpu-vulkan.md); DYNADRAFT_VULKAN_CMAKE_ARGS, where set, means your own
# instead. Where auto chose vulkan but they can't be had, or the Vulkan build fails, one line says why and the CPU
# wheel is built instead; a failed build is remembered (the log in its cache folder) so later runs don't retry it.
# An explicit DYNADRAFT_LLAMA_BACKEND=vulkan stops with that line instead.
# For tests: DYNADRAFT_VULKAN_LISTING=FILE fakes the Vulkan device listing (JSON, see scripts/choose_backend.py), and
# DYNADRAFT_VULKAN_LIBRARY names another Vulkan loader to probe.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
DEV=0
EXPLAIN=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    --explain) EXPLAIN=1 ;;
    *) die "unknown argument $arg (usage: scripts/setup.sh [--dev] [--explain])" 2 ;;
  esac
done
WANT=${DYNADRAFT_LLAMA_BACKEND:-auto}
# Probe afresh rather than read what .venv was built for: a GPU, a driver or the prerequisites may have come since.
DD_PROBE_BACKEND=1
# shellcheck source=scripts/llama-build-flags.sh
. scripts/llama-build-flags.sh
FAILED=build-failed.log # kept in a Vulkan wheel's cache folder when its build failed
# The test command's tools and dependencies are pinned; the app's launch keeps pyproject.toml's ranges.
PIN=()
[ "$DEV" = 1 ] && PIN=(-c scripts/constraints.txt)

# has_wheel: the wheel for $BACKEND is in its cache folder.
has_wheel() { ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; }

# explain: the backend and why; for vulkan one more line: its prerequisites, or why it will not be built.
explain() {
  echo "backend: $BACKEND ($BACKEND_REASON)"
  [ "$BACKEND" = vulkan ] || return 0
  local line otherwise="the CPU wheel is built instead"
  [ "$WANT" = vulkan ] && otherwise="set-up stops"
  if has_wheel; then
    echo "vulkan prerequisites: none needed, the Vulkan wheel is cached in $WHEELS"
  elif [ "$WANT" = auto ] && [ -f "$WHEELS/$FAILED" ]; then
    echo "vulkan: its build failed before ($WHEELS/$FAILED); the CPU wheel is built instead until that file is removed"
  elif [ -n "${DYNADRAFT_VULKAN_CMAKE_ARGS+set}" ]; then
    echo "vulkan prerequisites: your own (DYNADRAFT_VULKAN_CMAKE_ARGS=$DYNADRAFT_VULKAN_CMAKE_ARGS)"
  else
    line=$(scripts/build-vulkan.sh --check) || line="$line; until then $otherwise"
    echo "$line"
  fi
}

if [ "$EXPLAIN" = 1 ]; then
  explain
  exit 0
fi

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
# no_vulkan REASON: build for the CPU instead (auto), or stop (an explicit DYNADRAFT_LLAMA_BACKEND=vulkan).
no_vulkan() {
  [ "$WANT" = auto ] || die "$1 (DYNADRAFT_LLAMA_BACKEND=vulkan; set it to cpu or auto to build the CPU wheel)"
  echo "[dynadraft] $1; building the CPU wheel instead" >&2
  BACKEND=cpu
  BACKEND_REASON=$1
  llama_flags
}

# vulkan_prerequisites: glslc, libvulkan-dev and the newer headers, which scripts/build-vulkan.sh installs as root
# and fetches; not needed for a cached wheel, nor with DYNADRAFT_VULKAN_CMAKE_ARGS (the caller's own toolchain).
vulkan_prerequisites() {
  has_wheel && return 0
  if [ "$WANT" = auto ] && [ -f "$WHEELS/$FAILED" ]; then
    no_vulkan "the Vulkan build failed before (log: $WHEELS/$FAILED; remove it to try again)"
    return 0
  fi
  [ -z "${DYNADRAFT_VULKAN_CMAKE_ARGS+set}" ] || return 0
  step "getting the Vulkan build's prerequisites (scripts/build-vulkan.sh: glslc, libvulkan-dev, newer headers)"
  local log
  log=$(mktemp)
  if DYNADRAFT_VK_TOOLCHAIN_ONLY=1 scripts/build-vulkan.sh >"$log" 2>&1; then
    rm -f "$log"
    return 0
  fi
  # Its last line says what is missing and the command that installs it.
  no_vulkan "Vulkan prerequisites not available: $(tail -n 1 "$log" | sed 's/^\[build-vulkan\] //')"
  rm -f "$log"
}

# build_wheel: llama.cpp for $BACKEND into a llama-cpp-python wheel in $WHEELS. When pip's build fails it prints
# the log's last lines and sets BUILD_FAILED=1 (so a Vulkan build can fall back); other failures stop set-up.
build_wheel() {
  local took="3.5 to 7 minutes on 2 cores"
  [ "$BACKEND" = vulkan ] && took="about 15 minutes on 2 cores"
  BUILD_FAILED=0
  step "building llama.cpp ($BACKEND) into a llama-cpp-python $LLAMA_VERSION wheel, once: $took (cached in $WHEELS)" \
    "the build log's last lines are above; a missing compiler or a full disk are the usual causes"
  ensure_sdist
  rm -rf "$LLAMA_BUILD_DIR"
  mkdir -p "$LLAMA_BUILD_DIR/src" "$WHEELS"
  tar -xzf "$SDIST" -C "$LLAMA_BUILD_DIR/src"
  # In-tree build with the venv's scikit-build-core and a build folder we name, so the CMake objects outlive pip.
  if CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
    .venv/bin/python -m pip wheel --no-deps --no-build-isolation --config-settings=build-dir="$LLAMA_BUILD_DIR/build" \
    -w "$WHEELS" "$LLAMA_BUILD_DIR/src/llama_cpp_python-$LLAMA_VERSION" >"$LLAMA_BUILD_DIR/wheel.log" 2>&1; then
    [ "$DEV" = 1 ] || rm -rf "$LLAMA_BUILD_DIR"
    return 0
  fi
  tail -n 40 "$LLAMA_BUILD_DIR/wheel.log" >&2
  BUILD_FAILED=1
}

# record_backend: the backend .venv's wheel has and its Vulkan flags, for scripts/build-llama-server.sh and
# build-fork-server.sh (read by llama-build-flags.sh), so the servers are built like the wheel.
record_backend() {
  local args=""
  [ "$BACKEND" = cpu ] || args=${DYNADRAFT_VULKAN_CMAKE_ARGS-$VK_SIDE_ARGS}
  printf '%s\n%s\n' "$BACKEND" "$args" >"$LLAMA_RECORD"
}

if [ "$BACKEND" = vulkan ]; then vulkan_prerequisites; fi
# What .venv was last set up from: with the same inputs a second run installs nothing (seconds, not a minute).
setup_stamp() { echo "$(cat pyproject.toml scripts/constraints.txt | sha256sum | cut -c1-16)-$DEV-$BACKEND-$KEY"; }
STAMP=$(setup_stamp)
if [ "$(cat .venv/.dynadraft-setup 2>/dev/null)" = "$STAMP" ] && ls "$WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  # Older set-ups have no record of the backend; llama-build-flags.sh reads it for the servers.
  [ -f "$LLAMA_RECORD" ] || record_backend
  step "set-up done: .venv is up to date ($BACKEND backend)"
  exit 0
fi
rm -f .venv/.dynadraft-setup "$LLAMA_RECORD"
step "installing pip and the build tools into .venv" "check that PyPI is reachable (pip's message is above)"
.venv/bin/python -m pip install --quiet --upgrade "${PIN[@]}" pip
BUILD_TOOLS=("scikit-build-core>=0.9.2")
# llama.cpp needs CMake >= 3.21 (the pinned sdist says so) and builds with Ninja; take both from PyPI when missing.
if ! command -v cmake >/dev/null 2>&1 || ! cmake --version | awk 'NR==1 { split($3, v, "."); exit !(v[1] > 3 || (v[1] == 3 && v[2] >= 21)) }'; then
  BUILD_TOOLS+=(cmake)
fi
command -v ninja >/dev/null 2>&1 || BUILD_TOOLS+=(ninja)
.venv/bin/python -m pip install --quiet "${PIN[@]}" "${BUILD_TOOLS[@]}"

if ! has_wheel; then
  build_wheel
  if [ "$BUILD_FAILED" = 1 ] && [ "$BACKEND" = vulkan ] && [ "$WANT" = auto ]; then
    # Remember the failure by the flags' cache folder: the next run goes straight to the CPU wheel.
    cp "$LLAMA_BUILD_DIR/wheel.log" "$WHEELS/$FAILED"
    rm -rf "$LLAMA_BUILD_DIR"
    no_vulkan "the Vulkan wheel build failed (its log's last lines are above; all of it in $WHEELS/$FAILED)"
    STAMP=$(setup_stamp)
    if ! has_wheel; then build_wheel; fi
  fi
  [ "$BUILD_FAILED" = 0 ] # else the ERR trap names the failed step
fi
step "installing DynaDraft and its dependencies into .venv" "check that PyPI is reachable (pip's message is above)"
.venv/bin/python -m pip install --quiet --force-reinstall --no-deps "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl
if [ "$DEV" = 1 ]; then
  .venv/bin/python -m pip install --quiet "${PIN[@]}" --find-links "$WHEELS" -e '.[dev]'
else
  .venv/bin/python -m pip install --quiet --find-links "$WHEELS" -e .
fi
record_backend
echo "$STAMP" >.venv/.dynadraft-setup
step "set-up done ($BACKEND backend: $BACKEND_REASON)"
