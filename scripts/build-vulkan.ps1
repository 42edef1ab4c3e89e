# Build and install the Vulkan llama-cpp-python (pinned 0.3.36) into DynaDraft's venv on Windows.
# Windows counterpart of scripts/build-vulkan.sh. Not run in CI or on the Linux dev machines (no Windows there).
#
#   powershell -ExecutionPolicy Bypass -File scripts\build-vulkan.ps1 [-Venv .venv] [-Portable]
#
# Needs: Python 3.11+ (python.org), Visual Studio 2022 Build Tools ("Desktop development with C++"), CMake, and the
# LunarG Vulkan SDK (it sets VULKAN_SDK and brings the headers, the loader library and glslc that ggml-vulkan needs;
# the GPU driver - AMD Adrenalin for a Radeon 8060S - brings the Vulkan runtime itself).
# The wheel is cached in %LOCALAPPDATA%\dynadraft-wheels\vulkan-<hash of the flags>, because pip's own wheel cache
# ignores CMAKE_ARGS and could hand back a CPU-only build.
param([string]$Venv = ".venv", [switch]$Portable)
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..")
$version = "0.3.36"  # keep in step with scripts/llama-build-flags.sh and pyproject.toml

if (-not $env:VULKAN_SDK -or -not (Test-Path (Join-Path $env:VULKAN_SDK "Include\vulkan\vulkan.hpp"))) {
    throw "The Vulkan SDK was not found (VULKAN_SDK is unset or has no headers): install it from https://vulkan.lunarg.com and open a new terminal."
}
if (-not (Get-Command cmake -ErrorAction SilentlyContinue)) { throw "CMake is not on PATH: install it (cmake.org or 'winget install Kitware.CMake')." }

# Same explicit CPU flags as scripts/llama-build-flags.sh: never -march=native (a build for this exact CPU may not
# run on another) and never AMX. AVX-512 when the CPU has it (Zen 4/5, incl. Strix Halo) unless -Portable.
$cpu = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF"
Add-Type -MemberDefinition '[DllImport("kernel32.dll")] public static extern bool IsProcessorFeaturePresent(uint f);' -Name Kernel32 -Namespace Win32
$avx512 = [Win32.Kernel32]::IsProcessorFeaturePresent(41)  # PF_AVX512F_INSTRUCTIONS_AVAILABLE
if ($avx512 -and -not $Portable) { $cpu += " -DGGML_AVX512=ON" } else { $cpu += " -DGGML_AVX512=OFF" }
$env:CMAKE_ARGS = "$cpu -DGGML_VULKAN=ON"

$sha = [System.Security.Cryptography.SHA256]::Create()
$key = -join ($sha.ComputeHash([Text.Encoding]::UTF8.GetBytes("$version $env:CMAKE_ARGS")) | ForEach-Object { $_.ToString("x2") })
$wheels = Join-Path $env:LOCALAPPDATA ("dynadraft-wheels\vulkan-" + $key.Substring(0, 16))
$py = Join-Path $Venv "Scripts\python.exe"
if (-not (Test-Path $py)) { python -m venv $Venv }
& $py -m pip install --quiet --upgrade pip
if (-not (Get-ChildItem $wheels -Filter "llama_cpp_python-$version-*.whl" -ErrorAction SilentlyContinue)) {
    Write-Host "Building llama-cpp-python $version with Vulkan (15-30 minutes)..."
    New-Item -ItemType Directory -Force $wheels | Out-Null
    & $py -m pip wheel --no-deps --no-cache-dir --no-binary llama-cpp-python -w $wheels "llama-cpp-python==$version"
    if ($LASTEXITCODE -ne 0) { throw "the llama-cpp-python build failed (see above)" }
}
$wheel = (Get-ChildItem $wheels -Filter "llama_cpp_python-$version-*.whl" | Select-Object -First 1).FullName
& $py -m pip install --quiet --force-reinstall --no-deps $wheel
& $py -m pip install --quiet "llama-cpp-python==$version" -e .  # its pure-Python dependencies, and DynaDraft
# ggml lists the devices it found: a Radeon 8060S shows as "Vulkan0".
& $py -c "from app.models.runtime import list_devices; [print(d.backend, d.name, d.description) for d in list_devices()]"
