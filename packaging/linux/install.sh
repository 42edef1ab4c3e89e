#!/bin/sh
# Install an unpacked DynaDraft one-folder bundle for the current user: a `dynadraft` command in ~/.local/bin and a
# menu entry with the icon. Run it from the bundle (dist/dynadraft/install.sh, copied there by build-linux.sh)
# or as packaging/linux/install.sh BUNDLE_DIR. `install.sh --uninstall` removes what it added.
set -eu
HERE=$(dirname "$(readlink -f "$0")")
DATA=${XDG_DATA_HOME:-$HOME/.local/share}
BIN=$HOME/.local/bin
if [ "${1:-}" = "--uninstall" ]; then
  rm -f "$BIN/dynadraft" "$DATA/applications/dynadraft.desktop"
  for d in "$DATA"/icons/hicolor/*/apps; do rm -f "$d/dynadraft.png" "$d/dynadraft.svg"; done
  echo "removed the dynadraft command and menu entry (the bundle folder and your data are left alone)"
  exit 0
fi
BUNDLE=$(readlink -f "${1:-$HERE}")
[ -x "$BUNDLE/dynadraft" ] || { echo "no dynadraft executable in $BUNDLE" >&2; exit 2; }
mkdir -p "$BIN" "$DATA/applications"
ln -sf "$BUNDLE/dynadraft" "$BIN/dynadraft"
ICONS="$BUNDLE/_internal/resources/icons"
for size in 16 24 32 48 64 128 256 512; do
  if [ -f "$ICONS/dynadraft-$size.png" ]; then
    mkdir -p "$DATA/icons/hicolor/${size}x${size}/apps"
    cp "$ICONS/dynadraft-$size.png" "$DATA/icons/hicolor/${size}x${size}/apps/dynadraft.png"
  fi
done
mkdir -p "$DATA/icons/hicolor/scalable/apps"
cp "$ICONS/dynadraft.svg" "$DATA/icons/hicolor/scalable/apps/dynadraft.svg"
# The menu entry points at the bundle itself, so it works even when ~/.local/bin is not on PATH.
sed "s|^Exec=dynadraft|Exec=\"$BUNDLE/dynadraft\"|" "$BUNDLE/dynadraft.desktop" \
  > "$DATA/applications/dynadraft.desktop"
command -v update-desktop-database >/dev/null && update-desktop-database -q "$DATA/applications" || true
command -v gtk-update-icon-cache >/dev/null && gtk-update-icon-cache -q -t "$DATA/icons/hicolor" || true
echo "installed: $BIN/dynadraft and the DynaDraft menu entry"
