#!/usr/bin/env bash
# Device runs on the lent H200 machine (Vulkan), in steps, each one command that ends inside the 10-minute limit.
#
# Prepared here by bench/gpu/pack.sh into build/ddvk/ (ignored by git; sent with `carry: ["build/ddvk"]`):
#   gl/*.deb          Debian's libvulkan1, libglvnd0, libegl1, libgl1, libglx0, libopengl0, libgles2 (the machine
#                     has NVIDIA's ICD but no Vulkan loader; with the first two alone the GPU was not found)
#   payload.tar.xz    the llama_cpp package (pure Python, loaded by ctypes, so the wheel built for Python 3.11 here
#                     runs under the machine's 3.12) with the Vulkan build's shared libraries and llama-server in
#                     its lib/ (bench/gpu/build-bundle.sh: one build for both sides) + diskcache + platformdirs
#   whl/*.whl         pydantic, pydantic-core, annotated-types, typing-inspection, typing-extensions, gguf (cp312)
#   skel/*.skel       GGUF headers (metadata + tensor infos) of the real 0.5B/1.5B, derived 7B/14B/32B shapes and
#                     the Qwen3.6-35B-A3B shape with its MTP block (q36)
# Device command:  DD_STEPS="costs" DD_MODELS="q05b q15b q7b q32b" bash bench/gpu/run_h200.sh
#   DD_STEPS     any of: costs (verify-cost curves, flash attention off and on), engine (Session runs with step
#                traces, for checking the simulator), calib (the quick calibration, wall time); MTP on DD_TARGET:
#                mtpcosts (MTP draft and hybrid verify/rollback costs), mtpbench (engine vs llama-server
#                --spec-type draft-mtp), mtpplain (plain decoding: engine load variants vs llama-server), mtpcalib (the quick calibration with MTP rows and no draft model)
#   DD_MODELS    which shape-equivalent models to write and measure; DD_DRAFT the draft (default q05b; "" for none)
#   DD_TARGET    target for engine/calib (default q7b); DD_FLASH: 0, 1 or 0,1 (costs, engine: see measure.py);
#   DD_CALIB_FA  flash attention for calib: auto (default), on or off
#   DD_PACK      where pack.sh's output is (default build/ddvk, relative to the folder the command runs in)
# Synthetic models stay in /tmp while the machine is kept warm, so a follow-up call skips writing them.
set -uo pipefail
export PYTHONUNBUFFERED=1
P=${DD_PACK:-build/ddvk}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
for f in $P/gl/*.deb; do dpkg -x "$f" /; done; ldconfig
[ -d /tmp/site/llama_cpp ] || { mkdir -p /tmp/site && tar -xJf $P/payload.tar.xz -C /tmp/site; }
# pydantic (app.policy validates tables with it) and gguf-py (app.models reads quant types): not in the image
if ls $P/whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $P/whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD
# NVIDIA's Vulkan ICD manifest: the usual place on these machines, else whatever the image has
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$ICD" ] || ICD=$(find /usr/local/nvidia /usr/share/vulkan /etc/vulkan /usr/lib -name 'nvidia_icd*.json' 2>/dev/null | head -1)
export VK_DRIVER_FILES=$ICD VK_ICD_FILENAMES=$ICD VK_LOADER_DEBUG=error,warn
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export DYNADRAFT_HOME=/tmp/ddhome
export DYNADRAFT_LLAMA_SERVER=/tmp/site/llama_cpp/lib/llama-server  # the Vulkan build's, beside its libraries
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee "$OUT/nvidia-smi.csv"
# CPU facts for thread-count questions: logical CPUs, cores per socket, a cgroup quota, the engine's default -t
{ nproc; lscpu | grep -E '^(CPU\(s\)|Thread|Core|Socket|Model name|NUMA node)'; cat /sys/fs/cgroup/cpu.max 2>/dev/null
  python3 -c "from app.runtime.threads import default_threads; print('default_threads', default_threads())"; } \
  | tee "$OUT/cpu.txt"
# DD_SMI_MS: log the GPU's clocks, power state and load every that many ms (epoch seconds first, to line up with runs)
if [ -n "${DD_SMI_MS:-}" ]; then
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,pstate,power.draw,utilization.gpu --format=csv,noheader,nounits \
    -lms "$DD_SMI_MS" | while IFS= read -r l; do echo "$(date +%s.%N | cut -c1-14), $l"; done > "$OUT/smi.csv" &
fi
# ggml's own log says whether the Vulkan backend found the GPU: with only some of the loader's libraries unpacked the
# backend still registers (devices.json lists "Vulkan") while every run silently falls back to the host CPU.
DYNADRAFT_LLAMA_LOG=1 python3 bench/gpu/measure.py devices "$OUT/devices.json" > /dev/null 2> "$OUT/devices.log"
grep -i vulkan "$OUT/devices.log" | head -5
if ! grep -q "ggml_vulkan: Found [1-9]" "$OUT/devices.log"; then
  echo "NO VULKAN DEVICE (ggml's log lacks 'ggml_vulkan: Found'): stopping"; exit 3
fi
if ! grep -q Vulkan "$OUT/devices.json"; then echo "NO VULKAN DEVICE: stopping"; exit 3; fi
STEPS=${DD_STEPS:-costs}
MODELS=${DD_MODELS-q05b q15b q7b}
TARGET=${DD_TARGET:-q7b}
DRAFT=${DD_DRAFT-q05b}
pids=""
for m in $DRAFT $MODELS $TARGET; do
  [ -f /tmp/$m.gguf ] || { python3 bench/gpu/shapegguf.py synth $P/skel/$m.skel /tmp/$m.gguf & pids="$pids $!"; }
done
# shellcheck disable=SC2086
[ -z "$pids" ] || wait $pids  # (a bare `wait` would also wait for the tee above, forever)
echo "models ready at $(elapsed)s"; df -h /tmp | tail -1
budget=${DD_BUDGET_S:-560}
for step in $STEPS; do
  left=$(( budget - $(elapsed) ))
  [ "$left" -gt 30 ] || { echo "no time left for $step"; break; }
  case $step in
    costs)
      specs=""; for m in $MODELS; do specs="$specs $m=/tmp/$m.gguf"; done
      # shellcheck disable=SC2086
      DD_FLASH=${DD_FLASH:-0,1} timeout "$left" python3 bench/gpu/measure.py costs "$OUT/costs.json" $specs ;;
    engine)
      timeout "$left" python3 bench/gpu/measure.py engine "$OUT/engine-$TARGET.json" /tmp/$TARGET.gguf /tmp/q05b.gguf ;;
    calib)
      fa=${DD_CALIB_FA:-auto}  # the engine's default, as llama.cpp's
      tc=$(date +%s)
      timeout "$left" python3 -m app calibrate --model /tmp/$TARGET.gguf --draft /tmp/q05b.gguf --quick \
        --gpu-layers -1 --ctx-size 8192 --flash-attn $fa --json > "$OUT/calib-$TARGET.json"
      echo "quick calibration rc=$? wall=$(( $(date +%s) - tc ))s" ;;
    mtpcosts)
      timeout "$left" python3 bench/gpu/measure.py mtpcosts "$OUT/mtp-costs-$TARGET.json" /tmp/$TARGET.gguf ;;
    mtpbench)
      timeout "$left" python3 bench/gpu/measure.py mtpbench "$OUT/mtp-bench-$TARGET.json" /tmp/$TARGET.gguf \
        "$DYNADRAFT_LLAMA_SERVER"
      # llama-server loads the same libraries; say whether it found the GPU too (its logs are under DYNADRAFT_HOME)
      grep -h -m1 "ggml_vulkan: Found" "$DYNADRAFT_HOME"/logs/llama-server/*.log 2>/dev/null \
        || echo "llama-server logs lack 'ggml_vulkan: Found'"
      # the servers' own logs (the probes' are verbose: where a server that gave no answer was), as one file
      tar -czf "$OUT/server-logs.tgz" -C "$DYNADRAFT_HOME/logs" llama-server 2>/dev/null ;;
    mtpplain)
      timeout "$left" python3 bench/gpu/measure.py mtpplain "$OUT/mtp-plain-$TARGET.json" /tmp/$TARGET.gguf \
        "$DYNADRAFT_LLAMA_SERVER" ;;
    mtpcalib)
      tc=$(date +%s)
      timeout "$left" python3 -m app calibrate --model /tmp/$TARGET.gguf --quick --gpu-layers -1 --ctx-size 8192 \
        --flash-attn on ${DD_CALIB_BUDGET_MIN:+--budget-min $DD_CALIB_BUDGET_MIN} --json > "$OUT/mtp-calib-$TARGET.json"
      echo "quick MTP calibration rc=$? wall=$(( $(date +%s) - tc ))s" ;;
  esac
  echo "$step done at $(elapsed)s"
done
echo "all done at $(elapsed)s"
[ -z "${DD_SMI_MS:-}" ] || pkill -f "nvidia-smi --query-gpu=clocks" || true
