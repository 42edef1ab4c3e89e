"""Before the desktop app starts: are the system libraries of Qt's xcb (X11) platform plugin installed?

PySide6 >= 6.5 bundles Qt's xcb plugin but not the X11 libraries it links; without them Qt aborts with a message
about "xcb-cursor0". This check runs before any Qt import, only when Qt will use xcb, and names the packages.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Mapping

# What libQt6XcbQpa.so.6 (PySide6 6.x) links beyond libQt6*, libGL and glib (read with `objdump -p`), and the
# Debian/Ubuntu package that ships each library.
XCB_LIBRARIES = {
    "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libX11.so.6": "libx11-6",
    "libX11-xcb.so.1": "libx11-xcb1",
}


def qt_platform(env: Mapping[str, str], platform: str = sys.platform) -> str:
    """The platform plugin Qt will pick: QT_QPA_PLATFORM if set, Wayland in a Wayland session, xcb with an X
    display, else offscreen (what `dynadraft` falls back to without any display)."""
    if not platform.startswith("linux"):
        return "native"
    asked = env.get("QT_QPA_PLATFORM", "").split(";")[0].split(":")[0].strip()
    if asked:
        return asked
    if env.get("WAYLAND_DISPLAY") and env.get("XDG_SESSION_TYPE") == "wayland":
        return "wayland"
    return "xcb" if env.get("DISPLAY") else "offscreen"


def loadable(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def missing_xcb_packages(available: Callable[[str], bool] = loadable) -> list[str]:
    """The packages whose libraries the xcb plugin needs and the dynamic loader cannot find (sorted)."""
    return sorted({pkg for soname, pkg in XCB_LIBRARIES.items() if not available(soname)})


def gui_launch_problem(env: Mapping[str, str] | None = None, available: Callable[[str], bool] = loadable) -> str | None:
    """One line naming the missing packages and the install command, or None when the app can start."""
    if qt_platform(os.environ if env is None else env) != "xcb":
        return None
    missing = missing_xcb_packages(available)
    if not missing:
        return None
    return (
        f"dynadraft: the desktop app needs X11 libraries that are not installed ({', '.join(missing)}); install them "
        f"with: sudo apt-get install {' '.join(missing)}"
    )
