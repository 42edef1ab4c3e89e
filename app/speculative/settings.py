"""Per-request speculative settings: which draft source, how deep, and when to stop drafting."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any


@dataclass(frozen=True)
class SpecSettings:
    """Draft settings for one request; `n_max == 0` or `source == "none"` is plain decoding.

    source: a registered draft source ("draft": a second GGUF, "lookup": prompt n-gram lookup, ...), "none", or
    "pool" (chosen per step among the loaded sources).
    n_max: the deepest draft; n_min: a shorter draft is dropped; p_min: drafting stops when the draft's
    top-1 probability falls below it; adaptive: draft length follows measured acceptance within [n_min, n_max];
    cost_stop: a draft stops where one more token no longer pays for its verify row and draft cost, by this
    device's measured costs (app/speculative/adaptive.cost_stop_step); n_max stays the ceiling.
    """

    source: str = "draft"
    n_max: int = 0
    n_min: int = 0
    p_min: float = 0.0
    adaptive: bool = False
    cost_stop: bool = False

    def __post_init__(self) -> None:
        # Which names exist is the registry's (app.speculative.registry.from_intent and the HTTP schema check them
        # where a user's intent becomes settings); a settings object only needs a name.
        if not isinstance(self.source, str) or not self.source:
            raise ValueError(f"speculative.source must be a source name, got {self.source!r}")
        for name in ("n_max", "n_min"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool):
                raise ValueError(f"speculative.{name} must be an integer, got {v!r}")
        if not 0 <= self.n_max <= 64:
            raise ValueError(f"speculative.n_max must be in 0..64, got {self.n_max}")
        if not 0 <= self.n_min <= max(self.n_max, 0):
            raise ValueError(f"speculative.n_min must be in 0..n_max ({self.n_max}), got {self.n_min}")
        if not 0.0 <= self.p_min <= 1.0:
            raise ValueError(f"speculative.p_min must be in [0, 1], got {self.p_min}")
        if not isinstance(self.cost_stop, bool):
            raise ValueError(f"speculative.cost_stop must be true or false, got {self.cost_stop!r}")

    @property
    def is_plain(self) -> bool:
        return self.n_max == 0 or self.source == "none"

    def label(self) -> str:
        """Short human label in the seed's style: "off", "n4,p0.25", "lookup n8", "pool n6 adaptive", "n16,p0,cost"."""
        if self.is_plain:
            return "off"
        base = f"n{self.n_max},p{self.p_min:g}"
        if self.source != "draft":
            base = f"{self.source} {base}"
        if self.n_min:
            base += f",min{self.n_min}"
        if self.cost_stop:
            base += ",cost"
        return base + (" adaptive" if self.adaptive else "")

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict; `cost_stop` only when on, so tables and records of other settings read as before
        (an older build refuses unknown keys in a calibration table)."""
        out = asdict(self)
        if not self.cost_stop:
            del out["cost_stop"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpecSettings:
        allowed = {"source", "n_max", "n_min", "p_min", "adaptive", "cost_stop"}
        unknown = set(data) - allowed
        if unknown:
            raise ValueError(f"unknown speculative field(s): {', '.join(sorted(unknown))}")
        return cls(**data)

    def with_(self, **changes: Any) -> SpecSettings:
        return replace(self, **changes)


PLAIN = SpecSettings(source="none", n_max=0)

# What an explicit override drafts when the user names only some of its fields: one set of defaults for the GUI,
# the HTTP API and the CLI. DEFAULT_P_MIN is 0.0 (no confidence stop): an override is taken literally and drafts
# n_max tokens unless the user also asks for a stop. The GUI used 0.5 while HTTP and CLI used 0.0; 0.0 won because
# it is what the API and `dynadraft generate` document, and a confidence stop only means something for a draft model
# (prompt lookup proposes with confidence 1.0), so it belongs to the user's explicit choice, not to a default.
DEFAULT_N_MAX = 8  # deep enough for copy-heavy text; a rejected draft of 8 costs one verify of 9 tokens
DEFAULT_P_MIN = 0.0
