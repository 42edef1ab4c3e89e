"""Search the Hugging Face Hub for GGUF models (online only, with a clear message when offline)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.models.download_errors import DownloadError, HubOffline
from app.models.hub_files import hub_endpoint, hub_error, hub_lfs_hashes, hub_token, is_offline, list_repo_files
from app.models.inspection import shard_names, split_info


@dataclass(frozen=True)
class HubModel:
    """One search hit."""

    id: str
    downloads: int | None
    likes: int | None
    gated: bool
    tags: tuple[str, ...]


def search_hub(query: str, *, limit: int = 20, endpoint: str | None = None, token: str | None = None) -> list[HubModel]:
    """GGUF repos matching `query`, most downloaded first; HubOffline when offline or unreachable."""
    if is_offline():
        raise HubOffline("Hub search is unavailable: offline mode (HF_HUB_OFFLINE) is on")
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub_endpoint(endpoint), token=hub_token(token))
    try:
        hits = list(api.list_models(search=query, filter="gguf", sort="downloads", limit=limit))
    except DownloadError:
        raise
    except Exception as e:  # noqa: BLE001
        err = hub_error(e, f"search {query!r}")
        if isinstance(err, HubOffline):
            raise HubOffline(f"Hub search is unavailable: {err}") from e
        raise err from e
    return [
        HubModel(
            id=m.id,
            downloads=m.downloads,
            likes=m.likes,
            gated=bool(m.gated),
            tags=tuple(m.tags or ()),
        )
        for m in hits
    ]


@dataclass(frozen=True)
class HubGGUF:
    """One model in a repo listing: a single GGUF, or the first shard of a split one (`pull` fetches every shard)."""

    repo: str
    filename: str
    size: int | None  # all shards together; None when the Hub gave no size for one of them
    shards: int

    @property
    def spec(self) -> str:
        """What `dynadraft pull` (and the app's REPO:FILE field) takes for this file."""
        return f"{self.repo}:{self.filename}"


def repo_ggufs(
    repo: str, revision: str = "main", *, endpoint: str | None = None, token: str | None = None
) -> list[HubGGUF]:
    """The GGUF models of a Hub repo, from the same listing `pull` resolves quant tags against (unsafe names are
    already left out there); sizes from the LFS metadata where the Hub gives them."""
    names = [n for n in list_repo_files(repo, revision, endpoint=endpoint, token=token) if n.lower().endswith(".gguf")]
    lfs = hub_lfs_hashes(repo, revision, endpoint=endpoint, token=token) if names else {}
    present = set(names)
    out = []
    for name in names:
        info = split_info(Path(name))
        if info is not None and info[0] != 1:
            continue  # a later shard: listed through its first
        shards = [s for s in shard_names(name) if s in present]
        sizes = [lfs[s][0] if s in lfs else None for s in shards]
        total = None if any(v is None for v in sizes) else sum(v for v in sizes if v is not None)
        out.append(HubGGUF(repo, name, total, len(shards)))
    return out
