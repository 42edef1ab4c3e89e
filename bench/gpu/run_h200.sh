#!/usr/bin/env bash
# One device run on the lent H200 machine (Vulkan): everything the 2026-11-29 report measured, in one command.
#
# Prepared here by bench/gpu/pack.sh into build/ddvk/ (ignored by git; sent with `carry: ["build/ddvk"]`):
#   gl/*.deb          Debian's libvulkan1 + libglvnd0 (the machine has NVIDIA's ICD but no Vulkan loader)
#   payload.tar.xz    the Vulkan llama_cpp package (pure Python + shared libraries, loaded by ctypes, so the
#                     wheel built for Python 3.11 here runs under the machine's 3.12) + diskcache + platformdirs
#   skel/*.skel       GGUF headers (metadata + tensor infos) of the real 0.5B/1.5B and a derived 7B shape
# Device command:  bash bench/gpu/run_h200.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
P=build/ddvk
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
t0=$(date +%s)
for f in $P/gl/*.deb; do dpkg -x "$f" /; done; ldconfig
mkdir -p /tmp/site && tar -xJf $P/payload.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD
# NVIDIA's Vulkan ICD manifest: the usual place on these machines, else whatever the image has
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$ICD" ] || ICD=$(find /usr/local/nvidia /usr/share/vulkan /etc/vulkan /usr/lib -name 'nvidia_icd*.json' 2>/dev/null | head -1)
echo "ICD manifest: $ICD"; cat "$ICD" 2>/dev/null; ldconfig -p | grep -i 'libvulkan\|GLX_nvidia\|GLdispatch' | head
export VK_DRIVER_FILES=$ICD VK_ICD_FILENAMES=$ICD VK_LOADER_DEBUG=error,warn
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export DYNADRAFT_HOME=/tmp/ddhome
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/nvidia-smi.csv"
python3 bench/gpu/measure.py devices "$OUT/devices.json"
if ! grep -q Vulkan "$OUT/devices.json"; then echo "NO VULKAN DEVICE: stopping"; exit 3; fi
pids=""
for m in q05b q15b q7b; do python3 bench/gpu/shapegguf.py synth $P/skel/$m.skel /tmp/$m.gguf & pids="$pids $!"; done
wait $pids  # (a bare `wait` would also wait for the tee above, forever)
echo "synth done at $(( $(date +%s) - t0 ))s"
python3 bench/gpu/measure.py costs "$OUT/costs-h200.json" q15b=/tmp/q15b.gguf q05b=/tmp/q05b.gguf q7b=/tmp/q7b.gguf
echo "costs done at $(( $(date +%s) - t0 ))s"
python3 bench/gpu/measure.py engine "$OUT/engine-h200-7b.json" /tmp/q7b.gguf /tmp/q05b.gguf
echo "engine done at $(( $(date +%s) - t0 ))s"
left=$(( ${DD_BUDGET_S:-520} - ($(date +%s) - t0) ))
if [ "$left" -gt 60 ]; then
  tc=$(date +%s)
  timeout "$left" python3 -m app calibrate --model /tmp/q7b.gguf --draft /tmp/q05b.gguf --quick --gpu-layers -1 \
    --ctx-size 8192 --json > "$OUT/calib-h200-7b.json"
  echo "quick calibration rc=$? wall=$(( $(date +%s) - tc ))s"
fi
echo "all done at $(( $(date +%s) - t0 ))s"
