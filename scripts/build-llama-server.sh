#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from the source vendored in the pinned llama-cpp-python sdist; print its path.
# Usage: scripts/build-llama-server.sh [--path]   (--path: print where the cached binary goes, build nothing)
#
# It stands in for a fork's llama-server (see README, "Fork runtimes") in the tests. Built with the same CPU flags as
# the wheel (scripts/llama-build-flags.sh, never -march=native) so both runtimes compute with the same kernels, and
# statically, so the binary does not pick up the wheel's libllama/libggml. Cached in
# ~/.cache/dynadraft-tools/llama-server-<backend>-<hash of version and flags>/ (DYNADRAFT_TOOLS_CACHE moves it);
# a second run prints the cached path in milliseconds. Progress goes to stderr, the binary's path to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/llama-build-flags.sh
. scripts/llama-build-flags.sh

# The prebuilt web UI would be downloaded at build time; DynaDraft never uses it (it starts the server --no-webui).
SERVER_ARGS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF"
TOOLS=${DYNADRAFT_TOOLS_CACHE:-$HOME/.cache/dynadraft-tools}
SKEY=$(printf '%s %s %s' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" "$SERVER_ARGS" | sha256sum | cut -c1-16)
DEST=$TOOLS/llama-server-$BACKEND-$SKEY
if [ "${1:-}" = "--path" ]; then  # where the binary is (or will be), without building: for tests and tools
  echo "$DEST/llama-server"
  exit 0
fi
if [ -x "$DEST/llama-server" ]; then
  echo "$DEST/llama-server"
  exit 0
fi

SDIST_DIR=$TOOLS/sdist
SDIST=$SDIST_DIR/llama_cpp_python-$LLAMA_VERSION.tar.gz
if [ ! -f "$SDIST" ]; then
  PY=.venv/bin/python
  [ -x "$PY" ] || PY=${PYTHON:-python3}
  echo "Downloading the llama-cpp-python $LLAMA_VERSION sdist..." >&2
  mkdir -p "$SDIST_DIR"
  "$PY" -m pip download --quiet --no-deps --no-binary :all: -d "$SDIST_DIR" "llama-cpp-python==$LLAMA_VERSION" >&2
fi

WORK=$(mktemp -d "$TOOLS/build-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
tar -xzf "$SDIST" -C "$WORK"
SRC=$WORK/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp
echo "Building llama-server ($BACKEND) from $(basename "$SDIST"); several minutes on a small machine..." >&2
# shellcheck disable=SC2086  # the flag strings are lists of arguments
cmake -S "$SRC" -B "$WORK/build" $LLAMA_CMAKE_ARGS $SERVER_ARGS >"$WORK/configure.log" 2>&1 \
  || { tail -n 40 "$WORK/configure.log" >&2; exit 1; }
cmake --build "$WORK/build" --target llama-server -j"${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" \
  >"$WORK/build.log" 2>&1 || { tail -n 40 "$WORK/build.log" >&2; exit 1; }
mkdir -p "$DEST"
cp "$WORK/build/bin/llama-server" "$DEST/llama-server.tmp"
mv "$DEST/llama-server.tmp" "$DEST/llama-server"  # atomic: a cached path is always a complete binary
echo "$DEST/llama-server"
