#!/usr/bin/env bash
# Build the llama-cpp-python wheel with the Vulkan backend (ggml-vulkan), on Debian bookworm or newer.
#
# Usage: scripts/build-vulkan.sh [VENV]
#        scripts/build-vulkan.sh --check   (one line: whether steps 1-2 below have, or could get, what they need; exit
#                                          1 when they could not; installs nothing; used by `scripts/setup.sh --explain`)
#   VENV (default: $DYNADRAFT_VK_VENV or .venv) gets the wheel installed; pass a separate folder (e.g. /work/vk-venv)
#   to keep a CPU environment untouched. Set DYNADRAFT_VK_NO_INSTALL=1 to only build the wheel.
#
# What it does (each step is skipped when its result already exists, so running it again is cheap):
#  1. apt-get installs bookworm's glslc (shader compiler) and libvulkan-dev (loader), which the build needs, and
#     mesa-vulkan-drivers (lavapipe, a CPU Vulkan device used by the tests), when they are missing and we are root.
#     Without root (or apt-get) a missing glslc or libvulkan-dev stops it with one line naming the command to run.
#  2. Bookworm's Vulkan headers (1.3.239) are too old for the pinned llama.cpp's ggml-vulkan (vk::LayerSettingEXT is
#     missing), so it fetches Debian trixie's libvulkan-dev and spirv-headers .debs with `apt-get download` (a trixie
#     source list given to that command only; the system's sources are not changed; root is not needed) and unpacks
#     them with `dpkg -x` into a side folder ($DYNADRAFT_VK_SIDE, default ~/.cache/dynadraft-vulkan-headers). Only
#     headers and CMake files are used from it; the loader library linked and loaded at run time stays the system's
#     libvulkan1. DYNADRAFT_VK_TOOLCHAIN_ONLY=1 stops here (scripts/setup.sh then builds the wheel itself, and
#     bench/gpu/build-bundle.sh its own libraries).
#  3. Builds the wheel with the same CPU flags as scripts/setup.sh (GGML_NATIVE=OFF: -march=native died with SIGILL
#     on AMX here) plus -DGGML_VULKAN=ON and the side folder's include/CMake paths (scripts/llama-build-flags.sh), into
#     the same cache folder that scripts/setup.sh uses where it chooses vulkan
#     (~/.cache/dynadraft-wheels/vulkan-<hash of the flags>/), so setup.sh reuses it. ~14 minutes on 2 cores.
#  4. Installs the wheel into VENV (--force-reinstall --no-deps) and prints the Vulkan devices ggml sees.
#
# Lavapipe is a CPU-type Vulkan device that ggml ignores unless GGML_VK_VISIBLE_DEVICES=0 (its index) is set.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
VENV=${1:-${DYNADRAFT_VK_VENV:-$ROOT/.venv}}
TRIXIE_MIRROR=${DYNADRAFT_TRIXIE_MIRROR:-http://deb.debian.org/debian}
# Always the side folder's headers (steps 2-3), whatever DYNADRAFT_VULKAN_CMAKE_ARGS the caller has.
unset DYNADRAFT_VULKAN_CMAKE_ARGS
DYNADRAFT_LLAMA_BACKEND=vulkan
# shellcheck source=scripts/llama-build-flags.sh
. scripts/llama-build-flags.sh
SIDE=$VK_SIDE

# missing_debs: NEED (the build's packages) and WANT (lavapipe's, for the tests) that are not installed.
missing_debs() {
  NEED=() WANT=()
  command -v glslc >/dev/null 2>&1 || NEED+=(glslc)
  dpkg -s libvulkan-dev >/dev/null 2>&1 || NEED+=(libvulkan-dev)
  dpkg -s mesa-vulkan-drivers >/dev/null 2>&1 || WANT+=(mesa-vulkan-drivers)
}
can_install() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }
side_ready() { [ -f "$SIDE/usr/include/vulkan/vulkan.hpp" ] && [ -d "$SIDE/usr/share/cmake/SPIRV-Headers" ]; }

missing_debs
if [ "${1:-}" = "--check" ]; then
  todo=""
  if [ ${#NEED[@]} -gt 0 ] && ! can_install; then
    echo "vulkan prerequisites: missing ${NEED[*]}; install them with: sudo apt-get install ${NEED[*]}"
    exit 1
  fi
  if ! side_ready && ! command -v apt-get >/dev/null 2>&1; then
    echo "vulkan prerequisites: the newer Vulkan headers in $SIDE are missing and need apt-get to fetch (or give DYNADRAFT_VULKAN_CMAKE_ARGS your own)"
    exit 1
  fi
  [ ${#NEED[@]} -eq 0 ] || todo="install ${NEED[*]} with apt-get"
  side_ready || todo="${todo:+$todo and }fetch Debian trixie's Vulkan headers and SPIRV-Headers into $SIDE"
  if [ -n "$todo" ]; then
    echo "vulkan prerequisites: would $todo"
  else
    echo "vulkan prerequisites: present (glslc, libvulkan-dev, the newer headers in $SIDE)"
  fi
  exit 0
fi

# 1. system packages
if [ $((${#NEED[@]} + ${#WANT[@]})) -gt 0 ] && can_install; then
  echo "[build-vulkan] apt-get install ${NEED[*]} ${WANT[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${NEED[@]}" "${WANT[@]}" >/dev/null
elif [ ${#NEED[@]} -gt 0 ]; then
  echo "[build-vulkan] missing ${NEED[*]}; install them with: sudo apt-get install ${NEED[*]}" >&2
  exit 1
fi

# 2. newer Vulkan headers + SPIRV-Headers in a side folder
if ! side_ready; then
  command -v apt-get >/dev/null 2>&1 \
    || { echo "[build-vulkan] fetching the newer Vulkan headers into $SIDE needs apt-get" >&2; exit 1; }
  echo "[build-vulkan] fetching trixie libvulkan-dev + spirv-headers into $SIDE" >&2
  tmp=$(mktemp -d)
  echo "deb $TRIXIE_MIRROR trixie main" > "$tmp/trixie.list"
  mkdir -p "$tmp/lists/partial" "$tmp/debs"
  APT=(-o Dir::Etc::sourcelist="$tmp/trixie.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$tmp/lists")
  apt-get "${APT[@]}" update -qq
  (cd "$tmp/debs" && apt-get "${APT[@]}" download libvulkan-dev spirv-headers >/dev/null)
  rm -rf "$SIDE" && mkdir -p "$SIDE"
  for d in "$tmp"/debs/*.deb; do dpkg -x "$d" "$SIDE"; done
  rm -rf "$tmp"
fi
grep -q LayerSettingEXT "$SIDE/usr/include/vulkan/vulkan.hpp" "$SIDE"/usr/include/vulkan/vulkan_structs.hpp 2>/dev/null \
  || { echo "[build-vulkan] $SIDE has no vk::LayerSettingEXT; headers too old?" >&2; exit 1; }
[ "${DYNADRAFT_VK_TOOLCHAIN_ONLY:-0}" != 1 ] || exit 0

# 3. the wheel (flags and cache key from scripts/llama-build-flags.sh, sourced above for BACKEND=vulkan)
if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
  echo "[build-vulkan] building llama-cpp-python $LLAMA_VERSION (Vulkan) into $WHEELS; ~15 minutes on 2 cores"
  mkdir -p "$WHEELS"
  builder="$WHEELS/.build-venv"
  [ -x "$builder/bin/python" ] || "$PY" -m venv "$builder"
  "$builder/bin/python" -m pip install --quiet --upgrade pip
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
    "$builder/bin/python" -m pip wheel --no-deps --no-cache-dir --no-binary llama-cpp-python \
    -w "$WHEELS" "llama-cpp-python==$LLAMA_VERSION"
  rm -rf "$builder"
fi
WHEEL=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -1)
echo "[build-vulkan] wheel: $WHEEL"
echo "[build-vulkan] scripts/setup.sh installs this wheel where it chooses vulkan (scripts/setup.sh --explain says)"

# 4. install and show devices
if [ "${DYNADRAFT_VK_NO_INSTALL:-0}" != 1 ]; then
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  # the wheel's runtime deps (numpy, typing-extensions, diskcache, jinja2) come from PyPI; llama-cpp-python itself
  # must be the cached wheel, never a source build or another wheel.
  "$VENV/bin/python" -m pip install --quiet --find-links "$WHEELS" --no-index --force-reinstall --no-deps "$WHEEL"
  "$VENV/bin/python" -m pip install --quiet numpy typing-extensions diskcache jinja2
  GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0} "$VENV/bin/python" - <<'EOF' || true
import ctypes
import llama_cpp  # noqa: F401 - loads libggml and registers its backends
from llama_cpp._ggml import libggml as g
g.ggml_backend_dev_count.restype = ctypes.c_size_t
g.ggml_backend_dev_get.restype = ctypes.c_void_p
g.ggml_backend_dev_get.argtypes = [ctypes.c_size_t]
for f in (g.ggml_backend_dev_name, g.ggml_backend_dev_description):
    f.restype, f.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
for i in range(g.ggml_backend_dev_count()):
    d = g.ggml_backend_dev_get(i)
    print("[build-vulkan] device", i, g.ggml_backend_dev_name(d).decode(), "|", g.ggml_backend_dev_description(d).decode())
EOF
fi
