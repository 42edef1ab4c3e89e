"""Search the Hugging Face Hub for GGUF models (online only, with a clear message when offline)."""

from __future__ import annotations

from dataclasses import dataclass

from app.models.download_errors import DownloadError, HubOffline
from app.models.hub_files import hub_endpoint, hub_error, hub_token, is_offline


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
