# shellcheck shell=bash
# Sourced by the build scripts: the llama-cpp-python version, the backend, CMake flags, cache folders and the sdist.
# Inputs: DYNADRAFT_LLAMA_BACKEND (auto|cpu|vulkan, default auto), DYNADRAFT_VULKAN_CMAKE_ARGS, DYNADRAFT_VK_SIDE,
# DYNADRAFT_PORTABLE, DYNADRAFT_WHEEL_CACHE, DYNADRAFT_TOOLS_CACHE, DD_PROBE_BACKEND (set by setup.sh).
# Outputs: LLAMA_VERSION, BACKEND, BACKEND_REASON, LLAMA_CMAKE_ARGS, KEY, WHEELS, TOOLS, SDIST, LLAMA_BUILD_DIR,
# VK_SIDE; llama_flags recomputes the flags and folders after a change of BACKEND.
# auto resolves to what scripts/setup.sh installed into .venv (recorded in $LLAMA_RECORD), so llama-server and the
# fork are built for the wheel's backend; without that record, or for setup.sh itself (DD_PROBE_BACKEND=1),
# scripts/choose_backend.py probes the Vulkan devices: vulkan where a Vulkan GPU is listed, else cpu.
LLAMA_VERSION=0.3.36
LLAMA_RECORD=.venv/.dynadraft-llama
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
# The newer Vulkan headers and SPIRV-Headers that scripts/build-vulkan.sh unpacks (bookworm's are too old). Without
# DYNADRAFT_VULKAN_CMAKE_ARGS a Vulkan build uses them; set it (even empty) to build with headers of your own.
VK_SIDE=${DYNADRAFT_VK_SIDE:-$HOME/.cache/dynadraft-vulkan-headers}
VK_SIDE_ARGS="-DVulkan_INCLUDE_DIR=$VK_SIDE/usr/include -DSPIRV-Headers_DIR=$VK_SIDE/usr/share/cmake/SPIRV-Headers"
TOOLS=${DYNADRAFT_TOOLS_CACHE:-$HOME/.cache/dynadraft-tools}
SDIST=$TOOLS/sdist/llama_cpp_python-$LLAMA_VERSION.tar.gz

# resolve_backend: BACKEND and BACKEND_REASON from DYNADRAFT_LLAMA_BACKEND; an unknown value stops with exit 2.
resolve_backend() {
  local want=${DYNADRAFT_LLAMA_BACKEND:-auto} py line rc args=""
  case "$want" in
    cpu | vulkan)
      BACKEND=$want BACKEND_REASON="DYNADRAFT_LLAMA_BACKEND=$want"
      return 0
      ;;
  esac
  # Both lines, or it is no record (setup.sh writes it whole at its end).
  if [ "$want" = auto ] && [ "${DD_PROBE_BACKEND:-0}" != 1 ] && [ -f "$LLAMA_RECORD" ] \
    && { read -r BACKEND && read -r args; } <"$LLAMA_RECORD" && { [ "$BACKEND" = cpu ] || [ "$BACKEND" = vulkan ]; }; then
    BACKEND_REASON="the backend scripts/setup.sh installed into .venv"
    [ "$BACKEND" = cpu ] || DYNADRAFT_VULKAN_CMAKE_ARGS=$args
    return 0
  fi
  # Whichever Python the caller has: setup.sh's $PY, the venv's, $PYTHON, the system's (the script needs no packages).
  for py in ${PY:-} .venv/bin/python ${PYTHON:-} python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    rc=0
    line=$(DYNADRAFT_LLAMA_BACKEND=$want "$py" scripts/choose_backend.py) || rc=$?
    [ "$rc" = 2 ] && exit 2 # an unknown DYNADRAFT_LLAMA_BACKEND or a bad listing: the script said so on stderr
    if [ "$rc" = 0 ] && [ "${line#backend: }" != "$line" ]; then
      line=${line#backend: }
      BACKEND=${line%% *}
      BACKEND_REASON=${line#* (}
      BACKEND_REASON=${BACKEND_REASON%)}
      return 0
    fi
  done
  BACKEND=cpu BACKEND_REASON="scripts/choose_backend.py did not run (no python3?)"
}

# llama_flags: LLAMA_CMAKE_ARGS, KEY, WHEELS and LLAMA_BUILD_DIR for $BACKEND.
# shellcheck disable=SC2034  # outputs, read by the scripts that source this file
llama_flags() {
  case "$BACKEND" in
    cpu) LLAMA_CMAKE_ARGS="$CPU_FLAGS" ;;
    vulkan) LLAMA_CMAKE_ARGS="$CPU_FLAGS -DGGML_VULKAN=ON ${DYNADRAFT_VULKAN_CMAKE_ARGS-$VK_SIDE_ARGS}" ;;
  esac
  KEY=$(printf '%s %s' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-16)
  WHEELS=${DYNADRAFT_WHEEL_CACHE:-$HOME/.cache/dynadraft-wheels}/$BACKEND-$KEY
  # The wheel's CMake build folder, kept by `setup.sh --dev` so llama-server is built from the same objects (one
  # compile of llama.cpp instead of two); scripts/build-llama-server.sh removes it once the server is cached.
  LLAMA_BUILD_DIR=$TOOLS/llama-build-$BACKEND-$KEY
}

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

resolve_backend
llama_flags
