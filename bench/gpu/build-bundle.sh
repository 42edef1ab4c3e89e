#!/usr/bin/env bash
# Build the pinned llama.cpp once with Vulkan for the lent GPU machine: its shared libraries (for the engine) and
# llama-server (the reference), from the same source and flags, into build/ddvk/vk/ (git-ignored).
#
# One build serves both sides of the engine-vs-llama-server ratio, so the two cannot differ in kernels or flags; it
# also halves the ~15 minutes that compiling ggml-vulkan's shaders takes on 2 cores. bench/gpu/pack.sh puts the
# libraries in place of the CPU wheel's inside the payload (llama_cpp/_ggml.py loads libggml from the package's own
# lib/ folder, so LLAMA_CPP_LIB_PATH alone would load two different libggml copies).
# Usage: bench/gpu/build-bundle.sh        (cached: a second run with the same flags returns at once)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
SIDE=${DYNADRAFT_VK_SIDE:-$HOME/.cache/dynadraft-vulkan-headers}
DYNADRAFT_VK_TOOLCHAIN_ONLY=1 DYNADRAFT_VK_SIDE=$SIDE scripts/build-vulkan.sh
export DYNADRAFT_VULKAN_CMAKE_ARGS="-DVulkan_INCLUDE_DIR=$SIDE/usr/include -DSPIRV-Headers_DIR=$SIDE/usr/share/cmake/SPIRV-Headers"
DYNADRAFT_LLAMA_BACKEND=vulkan
# shellcheck source=scripts/llama-build-flags.sh
. scripts/llama-build-flags.sh
ARGS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=ON \
-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF \
-DLLAMA_USE_PREBUILT_UI=OFF -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON -DCMAKE_INSTALL_RPATH=\$ORIGIN"
KEY=$(printf '%s %s %s' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" "$ARGS" | sha256sum | cut -c1-16)
DEST=$ROOT/build/ddvk/vk
if [ -f "$DEST/KEY" ] && [ "$(cat "$DEST/KEY")" = "$KEY" ]; then
  echo "[build-bundle] cached: $DEST"; exit 0
fi
SDIST=${DYNADRAFT_TOOLS_CACHE:-$HOME/.cache/dynadraft-tools}/sdist/llama_cpp_python-$LLAMA_VERSION.tar.gz
[ -f "$SDIST" ] || scripts/build-llama-server.sh >/dev/null  # it downloads the sdist (and builds the CPU server)
WORK=${DYNADRAFT_VK_WORK:-$HOME/.cache/dynadraft-tools/vk-bundle-build}
mkdir -p "$WORK"
[ -d "$WORK/src" ] || { tar -xzf "$SDIST" -C "$WORK" && mv "$WORK/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp" "$WORK/src"; }
echo "[build-bundle] configuring (log: $WORK/configure.log)"
# shellcheck disable=SC2086  # the flag strings are lists of arguments
cmake -S "$WORK/src" -B "$WORK/build" $LLAMA_CMAKE_ARGS $ARGS >"$WORK/configure.log" 2>&1 \
  || { tail -n 40 "$WORK/configure.log" >&2; exit 1; }
echo "[build-bundle] building llama, ggml and llama-server (log: $WORK/build.log); ~15-20 minutes on 2 cores"
cmake --build "$WORK/build" --target llama llama-server -j"${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
  >"$WORK/build.log" 2>&1 || { tail -n 40 "$WORK/build.log" >&2; exit 1; }
rm -rf "$DEST" && mkdir -p "$DEST"
cp -a "$WORK/build/bin/llama-server" "$DEST/"
find "$WORK/build/bin" "$WORK/build/src" "$WORK/build/ggml" -name '*.so*' -exec cp -a {} "$DEST/" \;
echo "$KEY" > "$DEST/KEY"
ls -la "$DEST"
