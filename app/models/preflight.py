"""Before loading: can the bundled runtime load this GGUF? One answer for `models --inspect`, generate, serve, app."""

from __future__ import annotations

from pathlib import Path

from app.models.compat import Compatibility, check_loadable
from app.models.gguf_reader import GGUFError
from app.models.inspection import inspect_gguf

RUNTIME_HINT = (
    "or run it on a fork's llama-server: the app's Runtime field in the model dialog, or --server-binary PATH on the "
    "command line (e.g. a ROCmFPX build's build/bin/llama-server)"
)


def advice(compat: Compatibility) -> list[str]:
    """What to do about a file the bundled runtime cannot load: the IQ3_S build to get, or the Runtime field."""
    if compat.loads:
        return []
    out = []
    if compat.alternative is not None:
        alt = compat.alternative
        out.append(f"download the {alt.format} build instead, which the bundled runtime loads: dynadraft pull {alt.id}")
    out.append(RUNTIME_HINT)
    return out


def answer(compat: Compatibility) -> str:
    """The one-paragraph answer: which runtime loads the file, the alternative, and the Runtime field."""
    return f"{compat.message}. To use it: " + "; ".join(advice(compat)) + "."


def check_before_load(path: str | Path) -> str | None:
    """None when the bundled llama.cpp can load `path` (or the file cannot be classified: llama.cpp then reports),
    else the answer `models --inspect` gives, prefixed with the file name."""
    from app.models.catalog import CatalogError, load_catalog

    try:
        report = inspect_gguf(path)
    except (GGUFError, OSError):
        return None
    try:
        catalog = load_catalog()
    except (CatalogError, OSError):
        catalog = None
    compat = check_loadable(report, catalog)
    if compat.loads:
        return None
    return f"{Path(path).name} {answer(compat)}"
