"""Per-request speculative settings: which draft source, how deep, and when to stop drafting."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

Source = Literal["draft", "lookup", "none", "pool"]
SOURCES: tuple[str, ...] = ("draft", "lookup", "none", "pool")


@dataclass(frozen=True)
class SpecSettings:
    """Draft settings for one request; `n_max == 0` or `source == "none"` is plain decoding.

    source: "draft" (a second GGUF), "lookup" (prompt n-gram lookup), "none", or "pool" (chosen per step).
    n_max: the deepest draft; n_min: a shorter draft is dropped; p_min: drafting stops when the draft's
    top-1 probability falls below it; adaptive: draft length follows measured acceptance within [n_min, n_max].
    """

    source: Source = "draft"
    n_max: int = 0
    n_min: int = 0
    p_min: float = 0.0
    adaptive: bool = False

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"speculative.source must be one of {', '.join(SOURCES)}, got {self.source!r}")
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

    @property
    def is_plain(self) -> bool:
        return self.n_max == 0 or self.source == "none"

    def label(self) -> str:
        """Short human label in the seed's style: "off", "n4,p0.25", "lookup n8", "pool n6 adaptive"."""
        if self.is_plain:
            return "off"
        base = f"n{self.n_max},p{self.p_min:g}"
        if self.source != "draft":
            base = f"{self.source} {base}"
        if self.n_min:
            base += f",min{self.n_min}"
        return base + (" adaptive" if self.adaptive else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SpecSettings:
        allowed = {"source", "n_max", "n_min", "p_min", "adaptive"}
        unknown = set(data) - allowed
        if unknown:
            raise ValueError(f"unknown speculative field(s): {', '.join(sorted(unknown))}")
        return cls(**data)

    def with_(self, **changes: Any) -> SpecSettings:
        return replace(self, **changes)


PLAIN = SpecSettings(source="none", n_max=0)
