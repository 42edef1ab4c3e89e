"""The draft-source registry: every source a request, the pool, the calibration grid, the API and the GUI can name.

Adding a source is one class and one registration line:

    class MySource:                      # implements app.speculative.sources.DraftSource
        name: ClassVar[str] = "mine"     # the value of speculative.source
        label: ClassVar[str] = "Mine"    # the GUI's name for it
        needs_draft_model: ClassVar[bool] = False  # True: runs on the draft GGUF, refused when none is loaded
        cheap_peek: ClassVar[bool] = False  # True: proposing costs microseconds; the pool asks it first
        @classmethod
        def create(cls, env): ...        # -> the source for a loaded Session, or None when it cannot run there
        @classmethod
        def calibration_grid(cls, mode): ...  # -> the SpecSettings a calibration measures for it
        def propose(self, history, n_max, n_min, p_min, sampling, rng, floors=None): ...  # -> Draft
        def rollback(self, n_committed): ...
        def reset(self): ...
        def close(self): ...

    register(MySource)                   # below, with the built-in sources (or from a test)

A heavy source may also declare `default_n_max` (its depth when a request names no n_max), `load_flags` (target load
options it needs), `unavailable_reason(model)` and `cache_attachment` (state that comes back with the target's cache
checkpoints); the MTP head declares all four.

(`floors`, the cost stop's, is optional: a source without it still runs under the cost stop, cut at its ceiling.)

Then the bundled Session creates it at load, requests may name it (HTTP schema, CLI and GUI included), the pool
chooses among it and the other loaded sources per step, and calibration measures its grid. Besides the registered
sources a request may name two choices that are not sources: "none" (plain decoding) and "pool" (per-step choice).
"""

from __future__ import annotations

from collections.abc import Collection

from app.speculative.mtp import MtpSource
from app.speculative.settings import DEFAULT_N_MAX, DEFAULT_P_MIN, SpecSettings
from app.speculative.sources import DraftModelSource, DraftSource, PromptLookupSource

NONE = "none"
POOL = "pool"

_SOURCES: dict[str, type[DraftSource]] = {}


def register(cls: type[DraftSource]) -> type[DraftSource]:
    """Add a source class (usable as a decorator); its `name` must be new."""
    if cls.name in _SOURCES or cls.name in (NONE, POOL):
        raise ValueError(f"draft source {cls.name!r} is already registered")
    _SOURCES[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    """Remove a source (tests that register a toy source clean up with this)."""
    del _SOURCES[name]


def sources() -> tuple[type[DraftSource], ...]:
    """The registered source classes, in registration order (the order the pool, GUI and calibration use)."""
    return tuple(_SOURCES.values())


def names() -> tuple[str, ...]:
    return tuple(_SOURCES)


def choices() -> tuple[str, ...]:
    """Every value `speculative.source` may take."""
    return (*_SOURCES, NONE, POOL)


def get(name: str) -> type[DraftSource]:
    return _SOURCES[name]


def needs_draft_model(source: str) -> bool:
    """Whether `source` runs only with a draft GGUF loaded. "pool" does when every source it could choose besides
    the cheap peeks needs one: a pool of prompt lookup and plain decoding alone is just lookup."""
    if source == POOL:
        return all(c.needs_draft_model for c in _SOURCES.values() if not c.cheap_peek)
    cls = _SOURCES.get(source)
    return cls is not None and cls.needs_draft_model


def default_n_max(source: str) -> int:
    """The depth an override that names `source` but no n_max drafts: the source's own `default_n_max` where it
    declares one (the MTP head: 3), else DEFAULT_N_MAX. The same for the app, HTTP and the command line."""
    return int(getattr(_SOURCES.get(source), "default_n_max", DEFAULT_N_MAX))


def load_flags(cls: type[DraftSource]) -> tuple[str, ...]:
    """The target's load options (ModelParams fields set True) a source needs: its own `load_flags` where it declares
    them (the MTP head: load_mtp), else none."""
    return tuple(getattr(cls, "load_flags", ()))


def unavailable_reason(cls: type[DraftSource], model: object) -> str | None:
    """Why a source that needs no draft model cannot run on `model`: its own `unavailable_reason(model)` where it
    declares one (the MTP head of a file without one), else None (the caller says it generally)."""
    why = getattr(cls, "unavailable_reason", None)
    return why(model) if why is not None else None


def default_source(loaded: Collection[str]) -> str:
    """The source an override that names none drafts with: the first loaded source that is not a cheap peek (what was
    loaded to draft with: the draft model, else the model's MTP head), else the first loaded one (prompt lookup),
    else the first registered one that needs no draft model."""
    heavy = [c.name for c in _SOURCES.values() if c.name in loaded and not c.cheap_peek]
    cheap = [c.name for c in _SOURCES.values() if c.name in loaded]
    fallback = [c.name for c in _SOURCES.values() if not c.needs_draft_model]
    return next(iter(heavy or cheap or fallback), NONE)


def unavailable(source: str, loaded: Collection[str]) -> str | None:
    """Why a request for `source` cannot run where the `loaded` sources are, as the end of a sentence starting with
    "speculative.source 'x' "; None when it can."""
    if source == NONE:
        return None
    if source == POOL:
        if any(not _SOURCES[n].cheap_peek for n in loaded if n in _SOURCES):
            return None
        return "needs a draft model; none is loaded"
    if source in loaded:
        return None
    if needs_draft_model(source):
        return "needs a draft model; none is loaded"
    return "is not available on this runtime"


def pool_arms(loaded: Collection[str]) -> list[str]:
    """The pool's arms besides plain decoding: the loaded sources, in registration order."""
    return [n for n in _SOURCES if n in loaded]


# The built-in sources. A new source adds its line here.
register(DraftModelSource)
register(PromptLookupSource)
register(MtpSource)


def check_source(source: str) -> str:
    """`source` when it names a registered source, "none" or "pool"; else ValueError listing the choices (the one
    check for a user's choice, the HTTP schema and a calibration table's rows)."""
    if source not in choices():
        raise ValueError(f"speculative.source must be one of {', '.join(choices())}, got {source!r}")
    return source


def from_intent(
    source: str | None,
    *,
    loaded: Collection[str] = (),
    n_max: int | None = None,
    n_min: int | None = None,
    p_min: float | None = None,
    adaptive: bool = False,
    cost_stop: bool = False,
) -> SpecSettings:
    """The override a user's choices describe (GUI, HTTP and CLI all map through here); raises ValueError.

    source None: what the `loaded` sources make the default (default_source: the draft model, else the MTP head,
    else prompt lookup);
    "none": plain decoding. Fields left out take the source's default depth (default_n_max) / DEFAULT_P_MIN / n_min 0.
    """
    if source is None:
        source = default_source(loaded)
    check_source(source)
    if source == NONE:
        return SpecSettings(
            source, n_max or 0, n_min or 0, DEFAULT_P_MIN if p_min is None else p_min, adaptive, cost_stop
        )
    return SpecSettings(
        source=source,
        n_max=default_n_max(source) if n_max is None else n_max,
        n_min=n_min or 0,
        p_min=DEFAULT_P_MIN if p_min is None else p_min,
        adaptive=adaptive,
        cost_stop=cost_stop,
    )
