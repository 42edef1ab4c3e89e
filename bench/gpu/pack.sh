#!/usr/bin/env bash
# Prepare build/ddvk/ (git-ignored) for bench/gpu/run_h200.sh: Vulkan loader and GL/EGL debs, the Vulkan llama_cpp package
# with the two pure-Python packages the engine needs that the GPU machine lacks, and the GGUF skeletons.
# Usage: bench/gpu/pack.sh [VULKAN_VENV (default /work/vk-venv)]
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${1:-/work/vk-venv}
M=${DYNADRAFT_MODEL_CACHE:-$HOME/.cache/dynadraft-models}
D=build/ddvk; mkdir -p $D/gl $D/skel /tmp/amd64/partial
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ls $D/gl/libvulkan1_*.deb >/dev/null 2>&1 || {
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  # All seven: with libvulkan1 + libglvnd0 alone ggml's Vulkan backend found no GPU there and ran on the host CPU.
  apt-get $o update -qq && (cd $D/gl && apt-get $o download libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0 libgles2); }
tar -C "$SITE" --exclude='__pycache__' -cJf $D/payload.tar.xz llama_cpp diskcache platformdirs
PY=${PYTHON:-.venv/bin/python}
[ -f $D/skel/q15b.skel ] || $PY bench/gpu/shapegguf.py skeleton $M/Qwen2.5-Coder-1.5B-Instruct.gguf $D/skel/q15b.skel
[ -f $D/skel/q05b.skel ] || $PY bench/gpu/shapegguf.py skeleton $M/Qwen2.5-Coder-0.5B-Instruct.gguf $D/skel/q05b.skel
for s in 7b 14b 32b; do
  [ -f $D/skel/q$s.skel ] || $PY bench/gpu/shapegguf.py derive $s $M/Qwen2.5-Coder-1.5B-Instruct.gguf $D/skel/q$s.skel
done
du -sh $D/*
