"""`dynadraft cache`: the app's prompt caches on disk by model, their sizes and ages; clear them, or trim to a cap."""

from __future__ import annotations

import argparse
import json
import sys
import time

from app.engine.cache import MIB
from app.engine.cache_usage import DEFAULT_TOTAL_MIB, CacheFolder, clear, enforce_total, folders
from app.models.inspection import format_bytes
from app.paths import get_paths


def add_cache_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--clear",
        nargs="?",
        const="",
        metavar="MODEL",
        help="remove the caches of every model, or of those whose file name contains MODEL",
    )
    p.add_argument(
        "--cap-mib",
        type=int,
        metavar="MIB",
        help=f"remove the least recently used caches until all fit MIB (the app keeps {DEFAULT_TOTAL_MIB} by default)",
    )
    p.add_argument("--json", action="store_true")


def _age(used: float) -> str:
    s = max(0.0, time.time() - used)
    return f"{s / 86400:.0f} d" if s >= 86400 else f"{s / 3600:.0f} h" if s >= 3600 else f"{s / 60:.0f} min"


def _row(f: CacheFolder) -> dict[str, object]:
    return {"model": f.label, "folder": str(f.path), "bytes": f.size, "states": f.states, "last_used": f.used}


def run_cache(args: argparse.Namespace) -> int:
    root = get_paths().prompt_cache
    if args.cap_mib is not None and args.cap_mib < 0:
        print("dynadraft cache: --cap-mib must be 0 or more", file=sys.stderr)
        return 2
    removed = []
    if args.clear is not None:
        removed = clear(root, args.clear or None)
    if args.cap_mib is not None:
        removed += enforce_total(root, args.cap_mib * MIB)
    left = folders(root)
    if args.json:
        print(json.dumps({"root": str(root), "removed": [_row(f) for f in removed], "caches": [_row(f) for f in left]}))
        return 0
    for f in removed:
        print(f"removed {f.label or f.path.name} ({format_bytes(f.size)})")
    if args.clear and not removed:
        print(f"no prompt cache matches {args.clear!r}")
    total = sum(f.size for f in left)
    cap = f"the app keeps at most {DEFAULT_TOTAL_MIB} MiB"
    print(f"prompt caches in {root}: {len(left)} (one per model and settings), {format_bytes(total)} ({cap})")
    for f in left:
        label = f.label or "(unlabelled)"
        print(f"  {format_bytes(f.size):>10}  {f.states:>2} state(s)  used {_age(f.used)} ago  {label}")
    return 0
