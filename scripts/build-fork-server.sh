#!/usr/bin/env bash
# Build the ROCmFPx fork's `llama-server` and `llama-quantize`; print their paths.
# Usage: scripts/build-fork-server.sh [--path | --source]
#   --path    print where the cached binaries go, build nothing
#   --source  print where the fork's source was found, build nothing
#
# The fork (ciru-ai/ROCmFPX, MIT) is the runtime ROCmFPx GGUFs need: its server is what a user points --server-binary
# at, and its quantizer writes the real ROCmFPx test model (app/models/fork_model.py). The app never needs it to
# launch. Its source is taken from, in order:
#   1. DYNADRAFT_FORK_SOURCE: a tarball (.tar.xz/.tar.gz) or a checkout of the fork (DYNADRAFT_FORK_TARBALL, the
#      older name, is read too); a path that does not exist is an error;
#   2. the team's offline mirror ../shared/vendor/ROCmFPX-*.tar.xz beside the repository, where it exists;
#   3. a clone of the public repository at the pinned commit (FORK_COMMIT), where the network allows; the clone is
#      cached in ~/.cache/dynadraft-tools/rocmfpx-src-<commit>/.
# With none of them it exits 3 with one line saying how to provide one (scripts/test.sh then skips the fork tests).
# Built with the same CPU flags as the wheel (scripts/llama-build-flags.sh; DYNADRAFT_LLAMA_BACKEND=vulkan adds
# Vulkan) and statically. Cached in ~/.cache/dynadraft-tools/rocmfpx-<backend>-<hash of the source and flags>/
# (DYNADRAFT_TOOLS_CACHE moves it); a second run prints the cached paths in milliseconds.
# Progress goes to stderr; stdout gets two lines: the llama-server path, then the llama-quantize path.
set -Eeuo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
# shellcheck source=scripts/llama-build-flags.sh
. scripts/llama-build-flags.sh

FORK_REPO=${DYNADRAFT_FORK_REPO:-https://github.com/ciru-ai/ROCmFPX.git}
FORK_COMMIT=c14872f8407f5b0642f3c395439b929021df753a  # the commit app/models/quant_types.py follows
NO_SOURCE_EXIT=3
NO_SOURCE="no ROCmFPx fork source: set DYNADRAFT_FORK_SOURCE to a checkout or tarball of ciru-ai/ROCmFPX (commit \
${FORK_COMMIT:0:7}) to build and test the fork runtime"

# find_source [clone]: print the fork source (a tarball or a folder), or fail; only with "clone" may it fetch one.
find_source() {
  local t found="" clone=$TOOLS/rocmfpx-src-${FORK_COMMIT:0:12}
  if [ -n "$GIVEN" ]; then echo "$GIVEN"; return 0; fi
  for t in ../shared/vendor/ROCmFPX-*.tar.xz; do [ -f "$t" ] && found=$t; done  # the newest name sorts last
  if [ -n "$found" ]; then echo "$found"; return 0; fi
  if [ -d "$clone/.git" ]; then echo "$clone"; return 0; fi
  [ "${1:-}" = clone ] && command -v git >/dev/null 2>&1 || return 1
  step "cloning the fork's source at ${FORK_COMMIT:0:7} from $FORK_REPO"
  rm -rf "$clone.tmp"
  mkdir -p "$TOOLS"
  # A blob-less clone, bounded in time: a machine without the network fails at once where the host does not
  # resolve, and within 10 minutes at worst where connections hang.
  if GIT_TERMINAL_PROMPT=0 timeout 600 git clone --quiet --filter=blob:none --no-checkout "$FORK_REPO" "$clone.tmp" 2>/dev/null \
    && timeout 600 git -C "$clone.tmp" checkout --quiet "$FORK_COMMIT" 2>/dev/null; then
    mv "$clone.tmp" "$clone"
    echo "$clone"
    return 0
  fi
  rm -rf "$clone.tmp"
  return 1
}

# source_key: what identifies the source's content (a tarball's sha256; a checkout's commit and local changes).
source_key() {
  if [ -f "$1" ]; then
    sha256sum "$1" | cut -d' ' -f1
  elif git -C "$1" rev-parse HEAD >/dev/null 2>&1; then
    { git -C "$1" rev-parse HEAD; git -C "$1" diff HEAD; } | sha256sum | cut -d' ' -f1
  else
    (cd "$1" && find . -type f ! -path './build*' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum) \
      | sha256sum | cut -d' ' -f1
  fi
}

MODE=${1:-build}
GIVEN=${DYNADRAFT_FORK_SOURCE:-${DYNADRAFT_FORK_TARBALL:-}}
[ -z "$GIVEN" ] || [ -e "$GIVEN" ] || die "DYNADRAFT_FORK_SOURCE=$GIVEN does not exist (give a ROCmFPX checkout or tarball)" 2
SRC_IN=$(find_source "$([ "$MODE" = build ] && echo clone)") || { echo "$NO_SOURCE" >&2; exit "$NO_SOURCE_EXIT"; }
if [ "$MODE" = "--source" ]; then echo "$SRC_IN"; exit 0; fi
# The web UI is never used (DynaDraft starts the server --no-webui); the fork spells its switches *_WEBUI.
FORK_ARGS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_WEBUI=OFF -DLLAMA_USE_PREBUILT_WEBUI=OFF"
# Keyed by the source's content, not its name: a re-vendored snapshot under the same name rebuilds.
FKEY=$(printf '%s %s %s' "$(source_key "$SRC_IN")" "$LLAMA_CMAKE_ARGS" "$FORK_ARGS" | sha256sum | cut -c1-16)
DEST=$TOOLS/rocmfpx-$BACKEND-$FKEY
if [ "$MODE" = "--path" ]; then  # where the binaries are (or will be), without building: for tests and tools
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
if [ -f "$SRC_IN" ]; then
  tar -xf "$SRC_IN" -C "$WORK"
  SRC=$(find "$WORK" -mindepth 1 -maxdepth 1 -type d | head -n 1)
else
  SRC=$SRC_IN
fi
step "building the fork's llama-server and llama-quantize ($BACKEND) from $SRC_IN: 5.5 to 11 minutes \
on 2 cores" "the build log's last lines are above"
START=$(date +%s)
# shellcheck disable=SC2086  # the flag strings are lists of arguments
cmake -S "$SRC" -B "$WORK/build" $LLAMA_CMAKE_ARGS $FORK_ARGS >"$WORK/configure.log" 2>&1 \
  || { tail -n 40 "$WORK/configure.log" >&2; false; }
cmake --build "$WORK/build" --target llama-server llama-quantize \
  -j"${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}" >"$WORK/build.log" 2>&1 \
  || { tail -n 40 "$WORK/build.log" >&2; false; }
mkdir -p "$DEST"
for bin in llama-quantize llama-server; do  # the server last: its presence marks a complete install
  cp "$WORK/build/bin/$bin" "$DEST/$bin.tmp"
  mv "$DEST/$bin.tmp" "$DEST/$bin"  # atomic: a cached path is always a complete binary
done
echo "[dynadraft] fork built in $(($(date +%s) - START)) s" >&2
printf '%s\n%s\n' "$DEST/llama-server" "$DEST/llama-quantize"
