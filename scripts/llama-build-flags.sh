# Sourced by setup.sh and build-vulkan.sh: the llama-cpp-python version, CMake flags and wheel-cache folder.
# Inputs: DYNADRAFT_LLAMA_BACKEND (cpu|vulkan), DYNADRAFT_VULKAN_CMAKE_ARGS, DYNADRAFT_PORTABLE, DYNADRAFT_WHEEL_CACHE.
# Outputs: LLAMA_VERSION, BACKEND, LLAMA_CMAKE_ARGS, WHEELS.
LLAMA_VERSION=0.3.36
BACKEND=${DYNADRAFT_LLAMA_BACKEND:-cpu}
CPU_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF"
# AVX-512 makes CPU decoding markedly faster where the CPU has it (Zen 4/5 incl. Strix Halo, recent Xeons), so use it
# when this CPU reports it. Never AMX: it needs kernel permission that VMs often refuse (seen here: SIGILL).
# DYNADRAFT_PORTABLE=1 (used for bundles) keeps the AVX2 baseline that runs on any x86-64-v3 CPU.
if [ "${DYNADRAFT_PORTABLE:-0}" != 1 ] && grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  CPU_FLAGS="$CPU_FLAGS -DGGML_AVX512=ON"
  # /proc/cpuinfo spells these avx512vbmi, avx512_vnni, avx512_bf16 (the kernel's names, not the compilers').
  for f in avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
    if grep -qw "${f%%:*}" /proc/cpuinfo; then CPU_FLAGS="$CPU_FLAGS -DGGML_${f##*:}=ON"; fi
  done
else
  CPU_FLAGS="$CPU_FLAGS -DGGML_AVX512=OFF"
fi
case "$BACKEND" in
  cpu) LLAMA_CMAKE_ARGS="$CPU_FLAGS" ;;
  vulkan) LLAMA_CMAKE_ARGS="$CPU_FLAGS -DGGML_VULKAN=ON ${DYNADRAFT_VULKAN_CMAKE_ARGS:-}" ;;
  *) echo "unknown DYNADRAFT_LLAMA_BACKEND=$BACKEND (cpu or vulkan)" >&2; exit 2 ;;
esac
KEY=$(printf '%s %s' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-16)
WHEELS=${DYNADRAFT_WHEEL_CACHE:-$HOME/.cache/dynadraft-wheels}/$BACKEND-$KEY
