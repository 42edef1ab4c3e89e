#!/usr/bin/env bash
# Build the ROCmFPx fork's `llama-server` and `llama-quantize` from the vendored source; print their paths.
# Usage: scripts/build-fork-server.sh [--path]   (--path: print where the cached binaries go, build nothing)
#
# The fork (ciru-ai/ROCmFPX) is the runtime ROCmFPx GGUFs need: its server is what a user points --server-binary
# at, and its quantizer writes the real ROCmFPx test model (app/models/fork_model.py). Built with the same CPU
# flags as the wheel (scripts/llama-build-flags.sh; DYNADRAFT_LLAMA_BACKEND=vulkan adds Vulkan, as for the
# bundled build) and statically. The source is DYNADRAFT_FORK_TARBALL, default ../shared/vendor/ROCmFPX-*.tar.xz
# next to the repo. Cached in ~/.cache/dynadraft-tools/rocmfpx-<backend>-<hash of tarball sha256 and flags>/
# (DYNADRAFT_TOOLS_CACHE moves it); a second run prints the cached paths in milliseconds.
# Progress goes to stderr; stdout gets two lines: the llama-server path, then the llama-quantize path.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/llama-build-flags.sh
. scripts/llama-build-flags.sh

TARBALL=${DYNADRAFT_FORK_TARBALL:-}
if [ -z "$TARBALL" ]; then
  for t in ../shared/vendor/ROCmFPX-*.tar.xz; do TARBALL=$t; done  # the newest name sorts last
fi
if [ ! -f "$TARBALL" ]; then
  echo "fork source not found: set DYNADRAFT_FORK_TARBALL or put ROCmFPX-*.tar.xz in ../shared/vendor/" >&2
  exit 1
fi
# The web UI is never used (DynaDraft starts the server --no-webui); the fork spells its switches *_WEBUI.
FORK_ARGS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_WEBUI=OFF -DLLAMA_USE_PREBUILT_WEBUI=OFF"
TOOLS=${DYNADRAFT_TOOLS_CACHE:-$HOME/.cache/dynadraft-tools}
# Keyed by the tarball's content, not its name: a re-vendored snapshot under the same name rebuilds.
TSHA=$(sha256sum "$TARBALL" | cut -d' ' -f1)
FKEY=$(printf '%s %s %s' "$TSHA" "$LLAMA_CMAKE_ARGS" "$FORK_ARGS" | sha256sum | cut -c1-16)
DEST=$TOOLS/rocmfpx-$BACKEND-$FKEY
if [ "${1:-}" = "--path" ]; then  # where the binaries are (or will be), without building: for tests and tools
  printf '%s\n%s\n' "$DEST/llama-server" "$DEST/llama-quantize"
  exit 0
fi
if [ -x "$DEST/llama-server" ] && [ -x "$DEST/llama-quantize" ]; then
  printf '%s\n%s\n' "$DEST/llama-server" "$DEST/llama-quantize"
  exit 0
fi

mkdir -p "$TOOLS"
WORK=$(mktemp -d "$TOOLS/build-fork-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
tar -xJf "$TARBALL" -C "$WORK"
SRC=$(find "$WORK" -mindepth 1 -maxdepth 1 -type d | head -n 1)
echo "Building the fork's llama-server and llama-quantize ($BACKEND) from $(basename "$TARBALL");" \
  "10-15 minutes on a 2-core machine..." >&2
START=$(date +%s)
# shellcheck disable=SC2086  # the flag strings are lists of arguments
cmake -S "$SRC" -B "$WORK/build" $LLAMA_CMAKE_ARGS $FORK_ARGS >"$WORK/configure.log" 2>&1 \
  || { tail -n 40 "$WORK/configure.log" >&2; exit 1; }
cmake --build "$WORK/build" --target llama-server llama-quantize \
  -j"${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" >"$WORK/build.log" 2>&1 \
  || { tail -n 40 "$WORK/build.log" >&2; exit 1; }
mkdir -p "$DEST"
for bin in llama-quantize llama-server; do  # the server last: its presence marks a complete install
  cp "$WORK/build/bin/$bin" "$DEST/$bin.tmp"
  mv "$DEST/$bin.tmp" "$DEST/$bin"  # atomic: a cached path is always a complete binary
done
echo "built in $(($(date +%s) - START)) s" >&2
printf '%s\n%s\n' "$DEST/llama-server" "$DEST/llama-quantize"
