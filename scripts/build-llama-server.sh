#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from the source vendored in the pinned llama-cpp-python sdist; print its path.
# Usage: scripts/build-llama-server.sh [--path]   (--path: print where the cached binary goes, build nothing)
#
# It stands in for a fork's llama-server (docs/fork-runtime.md) in the tests, computing with the bundled runtime's
# exact kernels: the same source and CPU flags as the wheel (scripts/llama-build-flags.sh, never -march=native).
# Where `setup.sh --dev` kept the wheel's CMake build, only the server and the libraries it adds are compiled on top of it and
# it is cached with the wheel's shared libraries beside it (found through $ORIGIN); else the whole of llama.cpp is
# built statically (several minutes). Cached in ~/.cache/dynadraft-tools/llama-server-<backend>-<hash of version and
# flags>/ (DYNADRAFT_TOOLS_CACHE moves it); a second run prints the cached path in milliseconds.
# Progress goes to stderr, the binary's path to stdout.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck source=scripts/llama-build-flags.sh
. scripts/llama-build-flags.sh

# The prebuilt web UI would be downloaded at build time; DynaDraft never uses it (it starts the server --no-webui).
SERVER_ARGS="-DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF"
SKEY=$(printf '%s %s %s' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" "$SERVER_ARGS" | sha256sum | cut -c1-16)
DEST=$TOOLS/llama-server-$BACKEND-$SKEY
if [ "${1:-}" = "--path" ]; then  # where the binary is (or will be), without building: for tests and tools
  echo "$DEST/llama-server"
  exit 0
fi
if [ -x "$DEST/llama-server" ]; then
  rm -rf "$LLAMA_BUILD_DIR"  # a wheel's kept build that this cached server no longer needs
  echo "$DEST/llama-server"
  exit 0
fi

JOBS=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
mkdir -p "$TOOLS"
if [ -f "$LLAMA_BUILD_DIR/build/CMakeCache.txt" ]; then
  step "building llama-server on the wheel's llama.cpp build (its own sources, llama.cpp's common and mtmd libraries: \
about 7 minutes on 2 cores)" "see $LLAMA_BUILD_DIR/server.log"
  B=$LLAMA_BUILD_DIR/build
  # $ORIGIN: the server finds the wheel's libllama/libggml copied beside it (those libraries already carry $ORIGIN).
  # shellcheck disable=SC2086  # the flag strings are lists of arguments
  cmake -S "$LLAMA_BUILD_DIR/src/llama_cpp_python-$LLAMA_VERSION" -B "$B" $SERVER_ARGS '-DCMAKE_BUILD_RPATH=$ORIGIN' \
    >"$LLAMA_BUILD_DIR/server.log" 2>&1 || { tail -n 40 "$LLAMA_BUILD_DIR/server.log" >&2; false; }
  cmake --build "$B" --target llama-server -j"$JOBS" >>"$LLAMA_BUILD_DIR/server.log" 2>&1 \
    || { tail -n 40 "$LLAMA_BUILD_DIR/server.log" >&2; false; }
  mkdir -p "$DEST"
  cp -P "$B"/bin/*.so* "$DEST"/
  cp "$B/bin/llama-server" "$DEST/llama-server.tmp"
  rm -rf "$LLAMA_BUILD_DIR"  # its work is done: the wheel and the server are both cached
else
  ensure_sdist
  WORK=$(mktemp -d "$TOOLS/build-XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
  tar -xzf "$SDIST" -C "$WORK"
  SRC=$WORK/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp
  step "building llama-server ($BACKEND) from $(basename "$SDIST"), statically: several minutes on a small machine" \
    "the build log's last lines are above"
  # shellcheck disable=SC2086  # the flag strings are lists of arguments
  cmake -S "$SRC" -B "$WORK/build" $LLAMA_CMAKE_ARGS $SERVER_ARGS -DBUILD_SHARED_LIBS=OFF >"$WORK/configure.log" 2>&1 \
    || { tail -n 40 "$WORK/configure.log" >&2; false; }
  cmake --build "$WORK/build" --target llama-server -j"$JOBS" >"$WORK/build.log" 2>&1 \
    || { tail -n 40 "$WORK/build.log" >&2; false; }
  mkdir -p "$DEST"
  cp "$WORK/build/bin/llama-server" "$DEST/llama-server.tmp"
fi
mv "$DEST/llama-server.tmp" "$DEST/llama-server"  # atomic: a cached path is always a complete binary
echo "$DEST/llama-server"
