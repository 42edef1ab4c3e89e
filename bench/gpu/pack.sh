#!/usr/bin/env bash
# Prepare build/ddvk/ (git-ignored) for bench/gpu/run_h200.sh: Vulkan loader and GL/EGL debs, the payload, and the
# GGUF skeletons. The payload is the CPU wheel's llama_cpp package with its lib/ replaced by the shared libraries and
# llama-server of bench/gpu/build-bundle.sh (one Vulkan build of the pinned llama.cpp for both sides of the
# engine-vs-llama-server ratio; llama_cpp/_ggml.py loads libggml from the package's own lib/, and llama-server finds
# its libraries there through its $ORIGIN rpath), plus the two pure-Python packages the engine needs that the GPU
# machine lacks, and pydantic's wheels.
# Usage: bench/gpu/pack.sh
#   DD_VK        the build-bundle output (default build/ddvk/vk)
#   DD_PACK_OUT  where to write (default build/ddvk)
#   DD_SKELS     which skeletons (default: q05b q15b q7b q14b q32b q36); q36 = Qwen3.6-35B-A3B shape with MTP
set -euo pipefail
cd "$(dirname "$0")/../.."
VK=${DD_VK:-build/ddvk/vk}
D=${DD_PACK_OUT:-build/ddvk}
M=${DYNADRAFT_MODEL_CACHE:-$HOME/.cache/dynadraft-models}
PY=${PYTHON:-.venv/bin/python}
SKELS=${DD_SKELS:-q05b q15b q7b q14b q32b q36}
[ -x "$VK/llama-server" ] && ls "$VK"/libggml-vulkan.so* >/dev/null 2>&1 \
  || { echo "no Vulkan build in $VK: run bench/gpu/build-bundle.sh first" >&2; exit 1; }
mkdir -p "$D/gl" "$D/skel" /tmp/amd64/partial
ls "$D"/gl/libvulkan1_*.deb >/dev/null 2>&1 || {
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  # All seven: with libvulkan1 + libglvnd0 alone ggml's Vulkan backend found no GPU there and ran on the host CPU.
  apt-get $o update -qq && (cd "$D/gl" && apt-get $o download libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0 libgles2); }
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
cp -a "$SITE/llama_cpp" "$SITE/diskcache" "$SITE/platformdirs" "$STAGE/"
rm -rf "$STAGE"/llama_cpp/lib/* && find "$STAGE" -name __pycache__ -prune -exec rm -rf {} +
cp -a "$VK"/*.so* "$VK/llama-server" "$STAGE/llama_cpp/lib/"
tar -C "$STAGE" -cJf "$D/payload.tar.xz" llama_cpp diskcache platformdirs
# pydantic (and its dependencies) and gguf-py as wheels for the machine's Python 3.12 (the versions this venv runs)
mkdir -p "$D/whl"
pins=$($PY -c 'from importlib.metadata import version as v
print(" ".join(f"{n}=={v(n)}" for n in ("pydantic", "pydantic_core", "annotated_types", "typing_inspection", "typing_extensions", "gguf")))')
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$D/whl" $pins
REF=${DD_QWEN35MOE_REF:-$HOME/.cache/dynadraft-tools/q36-tiny-ref-Q4_K_M.gguf}
for s in $SKELS; do
  [ -f "$D/skel/$s.skel" ] && continue
  case $s in
    q05b) $PY bench/gpu/shapegguf.py skeleton "$M/Qwen2.5-Coder-0.5B-Instruct.gguf" "$D/skel/q05b.skel" ;;
    q15b) $PY bench/gpu/shapegguf.py skeleton "$M/Qwen2.5-Coder-1.5B-Instruct.gguf" "$D/skel/q15b.skel" ;;
    q7b | q14b | q32b) $PY bench/gpu/shapegguf.py derive "${s#q}" "$M/Qwen2.5-Coder-1.5B-Instruct.gguf" "$D/skel/$s.skel" ;;
    q36)
      # the per-tensor Q4_K_M types: llama.cpp's quantizer on a same-layout reference (~1 minute, cached)
      [ -f "$REF" ] || $PY bench/gpu/shapegguf.py reference "$REF" "$M/Qwen2.5-Coder-1.5B-Instruct.gguf" >/dev/null 2>&1
      $PY bench/gpu/shapegguf.py derive q36-35b-a3b "$REF" "$D/skel/q36.skel" ;;
    *) echo "unknown skeleton $s" >&2; exit 1 ;;
  esac
done
du -sh "$D"/gl "$D"/whl "$D"/payload.tar.xz "$D"/skel/*
