# Sourced by the build scripts: the llama-cpp-python version, CMake flags, cache folders and the sdist.
# Inputs: DYNADRAFT_LLAMA_BACKEND (cpu|vulkan), DYNADRAFT_VULKAN_CMAKE_ARGS, DYNADRAFT_PORTABLE, DYNADRAFT_WHEEL_CACHE,
# DYNADRAFT_TOOLS_CACHE. Outputs: LLAMA_VERSION, BACKEND, LLAMA_CMAKE_ARGS, WHEELS, TOOLS, SDIST, LLAMA_BUILD_DIR.
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
TOOLS=${DYNADRAFT_TOOLS_CACHE:-$HOME/.cache/dynadraft-tools}
SDIST=$TOOLS/sdist/llama_cpp_python-$LLAMA_VERSION.tar.gz
# The wheel's CMake build folder, kept by `setup.sh --dev` so llama-server is built from the same objects (one
# compile of llama.cpp instead of two); scripts/build-llama-server.sh removes it once the server is cached.
LLAMA_BUILD_DIR=$TOOLS/llama-build-$BACKEND-$KEY

# ensure_sdist: the pinned llama-cpp-python source (which vendors llama.cpp), downloaded once into $TOOLS/sdist.
ensure_sdist() {
  [ -f "$SDIST" ] && return 0
  local py=.venv/bin/python
  [ -x "$py" ] || py=${PYTHON:-python3}
  echo "[dynadraft] downloading the llama-cpp-python $LLAMA_VERSION source (76 MB)" >&2
  mkdir -p "$(dirname "$SDIST")"
  "$py" -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation -d "$(dirname "$SDIST")" \
    "llama-cpp-python==$LLAMA_VERSION" >&2
}
