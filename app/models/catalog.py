"""The model catalog (resources/catalog.json plus the user's own entries) and `ID | REPO:FILE` pull specs."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.paths import get_paths

BUNDLED_CATALOG = Path(__file__).resolve().parents[2] / "resources" / "catalog.json"
USER_CATALOG_NAME = "catalog.json"
ROCMFPX_RUNTIME = "ROCmFPx"
FALLBACK_FORMAT = "IQ3_S"  # the mainline build offered when a fork-only build can't load
FORK_RUNTIME_HINT = (
    "runs on the ROCmFPx fork's llama-server: choose it as the model's Runtime in the app, or pass "
    "--server-binary to generate/serve/calibrate (scripts/build-fork-server.sh builds one)"
)

_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class CatalogError(ValueError):
    """A catalog file or a pull spec that can't be understood."""


@dataclass(frozen=True)
class Draft:
    """How to speculate for a target: a same-tokenizer model, a built-in MTP head, a DFlash draft, or prompt lookup."""

    kind: str  # "model" | "mtp" | "dflash" | "prompt-lookup"
    build: str | None = None  # catalog build id of a draft model
    repo: str | None = None
    tag: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Build:
    """One downloadable file set of a model family; `sha256`/`size` are None when not known to be true."""

    id: str
    family: str
    format: str
    source: str  # "hub" | "packaged"
    repo: str | None
    files: tuple[str, ...]
    size: int | None
    sha256: str | None
    verified: bool
    note: str = ""
    runtime: str = "bundled"  # or "ROCmFPx": only the fork runtime loads it
    packaged: str | None = None
    draft: Draft | None = None
    revision: str = "main"
    mtp: str = ""  # whether the file carries MTP layers, as far as the catalog knows (local.mtp_status reads it)

    @property
    def first_file(self) -> str | None:
        return self.files[0] if self.files else None

    @property
    def needs_fork(self) -> bool:
        return self.runtime != "bundled"

    @property
    def runtime_hint(self) -> str:
        """How this build runs: on the bundled runtime, or on a fork's llama-server (and how to get one)."""
        return FORK_RUNTIME_HINT if self.needs_fork else "runs on the bundled runtime"


@dataclass(frozen=True)
class Family:
    """A model and its builds, with the draft that pairs with it."""

    id: str
    name: str
    architecture: str | None
    licence: str | None
    context_length: int | None
    builds: tuple[Build, ...]
    draft: Draft | None
    licence_verified: bool = False


@dataclass
class Catalog:
    """All families, indexed by family id and build id."""

    families: dict[str, Family] = field(default_factory=dict)

    @property
    def builds(self) -> dict[str, Build]:
        return {b.id: b for f in self.families.values() for b in f.builds}

    def find(self, ident: str) -> Build | None:
        """A build by id, or a family's first build that the bundled runtime loads (else its first build)."""
        builds = self.builds
        if ident in builds:
            return builds[ident]
        fam = self.families.get(ident)
        if fam is None or not fam.builds:
            return None
        return next((b for b in fam.builds if not b.needs_fork), fam.builds[0])

    def fallback_for(self, family_id: str, fmt: str = FALLBACK_FORMAT) -> Build | None:
        """The mainline-loadable build of `fmt` in the same family (e.g. IQ3_S instead of ROCmFP4)."""
        fam = self.families.get(family_id)
        if fam is None:
            return None
        return next((b for b in fam.builds if b.format.upper() == fmt.upper() and not b.needs_fork), None)

    def build_for_file(self, filename: str) -> Build | None:
        """The build owning a local file name (case-insensitive match on any of its files' base names)."""
        name = filename.rsplit("/", 1)[-1].lower()
        for fam in self.families.values():
            for b in fam.builds:
                if any(f.rsplit("/", 1)[-1].lower() == name for f in b.files):
                    return b
        return None

    def family_for_file(self, filename: str) -> Family | None:
        """The family owning a local file name (case-insensitive match on any build's file)."""
        build = self.build_for_file(filename)
        return self.families.get(build.family) if build is not None else None

    def draft_for(self, build: Build) -> Draft | None:
        if build.draft is not None:
            return build.draft
        fam = self.families.get(build.family)
        return fam.draft if fam else None


def _draft(raw: Any) -> Draft | None:
    if not isinstance(raw, dict):
        return None
    kind = raw.get("kind")
    if kind not in ("model", "mtp", "dflash", "prompt-lookup"):
        raise CatalogError(f"unknown draft kind {kind!r}")
    return Draft(kind=kind, build=raw.get("build"), repo=raw.get("repo"), tag=raw.get("tag"), note=raw.get("note", ""))


def _build(raw: dict[str, Any], family: str) -> Build:
    try:
        sha = raw.get("sha256")
        if sha is not None and not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise CatalogError(f"{raw['id']}: sha256 must be 64 lowercase hex digits or null")
        files = tuple(raw.get("files") or ())
        if not files:  # a build nobody can pull: the user is told to give REPO:FILE instead
            raise CatalogError(f"{raw['id']}: lists no files (name its GGUF files, or pull it as REPO:FILE)")
        return Build(
            id=raw["id"],
            family=family,
            format=raw["format"],
            source=raw.get("source", "hub"),
            repo=raw.get("repo"),
            files=files,
            size=raw.get("size"),
            sha256=sha,
            # A build claiming verification without a hash would be a lie the download code can't check.
            verified=bool(raw.get("verified")) and sha is not None,
            note=raw.get("note", ""),
            runtime=raw.get("runtime", "bundled"),
            packaged=raw.get("packaged"),
            draft=_draft(raw.get("draft")),
            revision=raw.get("revision", "main"),
            mtp=raw.get("mtp", ""),
        )
    except KeyError as e:
        raise CatalogError(f"build in {family} lacks {e}") from None


def parse_catalog(data: dict[str, Any]) -> Catalog:
    """Build a Catalog from the JSON structure (schema 1)."""
    if data.get("schema") != 1:
        raise CatalogError(f"unsupported catalog schema {data.get('schema')!r}")
    cat = Catalog()
    for raw in data.get("families", []):
        fid = raw["id"]
        cat.families[fid] = Family(
            id=fid,
            name=raw.get("name", fid),
            architecture=raw.get("architecture"),
            licence=raw.get("licence"),
            context_length=raw.get("context_length"),
            builds=tuple(_build(b, fid) for b in raw.get("builds", [])),
            draft=_draft(raw.get("draft")),
            licence_verified=bool(raw.get("licence_verified")),
        )
    return cat


def load_catalog(path: Path | None = None, include_user: bool = True) -> Catalog:
    """The bundled catalog, with families from <config>/catalog.json added or replacing bundled ones by id."""
    cat = parse_catalog(json.loads((path or BUNDLED_CATALOG).read_text(encoding="utf-8")))
    if include_user:
        user = get_paths().config / USER_CATALOG_NAME
        if user.is_file():
            cat.families.update(parse_catalog(json.loads(user.read_text(encoding="utf-8"))).families)
    return cat


@dataclass(frozen=True)
class PullSpec:
    """What `dynadraft pull` was asked for: a catalog build, or a Hub repo with a file (or quant tag)."""

    repo: str | None
    filename: str | None  # a path inside the repo, or None with `tag` set
    revision: str = "main"
    build: Build | None = None
    tag: str | None = None  # e.g. "Q4_K_M": resolved against the repo's file list


def parse_pull_spec(text: str, catalog: Catalog) -> PullSpec:
    """`ID` (catalog build or family) or `owner/repo[@rev]:FILE` or `owner/repo[@rev]:QUANT_TAG`."""
    text = text.strip()
    build = catalog.find(text)
    if build is not None:
        return PullSpec(repo=build.repo, filename=build.first_file, revision=build.revision, build=build)
    if ":" not in text:
        raise CatalogError(f"{text!r} is neither a catalog id nor REPO:FILE (try `dynadraft models --catalog`)")
    repo_part, _, file_part = text.partition(":")
    repo, _, revision = repo_part.partition("@")
    if not _REPO_RE.match(repo):
        raise CatalogError(f"{repo!r} is not a Hugging Face repo id (owner/name)")
    if not file_part:
        raise CatalogError(f"{text!r}: missing file name after ':'")
    if file_part.lower().endswith(".gguf"):
        return PullSpec(repo=repo, filename=file_part, revision=revision or "main")
    return PullSpec(repo=repo, filename=None, revision=revision or "main", tag=file_part)


def resolve_tag(tag: str, filenames: list[str]) -> str:
    """Pick the GGUF in a repo listing matching a quant tag like 'Q4_K_M' (first shard for split models)."""
    pat = re.compile(rf"(^|[-_.]){re.escape(tag)}([-_.]|$)", re.IGNORECASE)
    matches = sorted(f for f in filenames if f.lower().endswith(".gguf") and pat.search(f.rsplit("/", 1)[-1][:-5]))
    # mmproj files share quant tags with the model but are vision projectors, never what `pull` means.
    matches = [m for m in matches if "mmproj" not in m.lower()]
    if not matches:
        raise CatalogError(f"no .gguf file matching {tag!r} in the repo (files: {', '.join(filenames[:20])})")
    firsts = [m for m in matches if re.search(r"-00001-of-\d{5}\.gguf$", m)]
    return (firsts or matches)[0]
