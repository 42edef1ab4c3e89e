# Build the DynaDraft Windows bundle and installer. Not run in CI or on the Linux dev machines (no Windows there):
# written to match packaging/build-linux.sh step by step; see packaging/README.md, "Windows".
#
#   powershell -ExecutionPolicy Bypass -File packaging\windows\build-windows.ps1 [-ReuseVenv] [-NoDemo] [-SkipInstaller]
#
# Needs: Python 3.11+ (python.org), Visual Studio Build Tools (C++), CMake, Inno Setup 6 (ISCC.exe).
param([switch]$ReuseVenv, [switch]$NoDemo, [switch]$SkipInstaller)
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..\..")
$py = ".venv\Scripts\python.exe"

if (-not ($ReuseVenv -and (Test-Path $py))) {
    if (-not (Test-Path $py)) { python -m venv .venv }
    & $py -m pip install --quiet --upgrade pip
    # Same explicit CPU flags as scripts/setup.sh (no -march=native: the bundle must run on other CPUs).
    $env:CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DLLAVA_BUILD=OFF"
    & $py -m pip install --quiet --no-cache-dir --no-binary llama-cpp-python "llama-cpp-python==0.3.36"
    & $py -m pip install --quiet -e .
}
& $py -m pip install --quiet -r packaging\requirements.txt
$version = (& $py packaging\meta.py version).Trim()
& $py packaging\meta.py check
if ($LASTEXITCODE -ne 0) { throw "packaging files disagree with pyproject.toml's version" }

$env:DYNADRAFT_BUNDLE_DEMO = $(if ($NoDemo) { "0" } else { "1" })
& $py -m PyInstaller --noconfirm --clean --distpath dist --workpath build\pyinstaller packaging\dynadraft.spec
if ($LASTEXITCODE -ne 0) { throw "PyInstaller failed" }

# Smoke test of the bundle itself (Windows has a real desktop session, no offscreen platform needed).
& dist\dynadraft\dynadraft.exe --self-test
if ($LASTEXITCODE -ne 0) { throw "bundled self-test failed" }

if (-not $SkipInstaller) {
    $iscc = Join-Path ${env:ProgramFiles(x86)} "Inno Setup 6\ISCC.exe"
    if (-not (Test-Path $iscc)) { $iscc = "ISCC.exe" }
    & $iscc "/DAppVersion=$version" packaging\windows\dynadraft.iss
    if ($LASTEXITCODE -ne 0) { throw "Inno Setup failed" }
    Write-Host "installer: dist\DynaDraft-$version-win-x64-setup.exe"
}
