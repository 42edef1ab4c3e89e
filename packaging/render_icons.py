"""Render resources/icons/dynadraft.svg to PNGs (16…512 px) and a Windows .ico, with Qt (no other tool needed).

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/render_icons.py

The PNGs and the .ico are committed, so a build does not need to run this; rerun it after editing the SVG.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import meta  # noqa: E402

ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)


def write_ico(path: Path, pngs: list[bytes], sizes: tuple[int, ...]) -> None:
    """ICONDIR + one ICONDIRENTRY per image + the PNG files themselves (a width/height byte of 0 means 256)."""
    header = struct.pack("<HHH", 0, 1, len(pngs))
    offset = 6 + 16 * len(pngs)
    entries = b""
    for size, data in zip(sizes, pngs, strict=True):
        dim = 0 if size >= 256 else size
        entries += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(data), offset)
        offset += len(data)
    path.write_bytes(header + entries + b"".join(pngs))


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication(sys.argv[:1])  # noqa: F841 - image plugins need an app
    renderer = QSvgRenderer(str(meta.ICON_SVG))
    if not renderer.isValid():
        print(f"cannot read {meta.ICON_SVG}", file=sys.stderr)
        return 1
    images = {}
    for size in meta.ICON_SIZES:
        img = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(Qt.GlobalColor.transparent)
        p = QPainter(img)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(p)
        p.end()
        out = meta.icon_png(size)
        if not img.save(str(out), "PNG"):  # type: ignore[call-overload]
            print(f"could not write {out}", file=sys.stderr)
            return 1
        images[size] = img
        print(f"wrote {out.relative_to(meta.ROOT)}")
    # A multi-size .ico with PNG-compressed entries (read by Windows Vista and later, PyInstaller and Inno Setup).
    write_ico(meta.ICON_ICO, [meta.icon_png(n).read_bytes() for n in ICO_SIZES], ICO_SIZES)
    print(f"wrote {meta.ICON_ICO.relative_to(meta.ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
