"""Speculation statistics as one object with `observe_*` methods; sinks (graphs, summaries, metrics) read it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SourceStats:
    """Counters for one draft source."""

    drafts: int = 0  # verify steps that carried a non-empty draft from this source
    drafted: int = 0
    accepted: int = 0
    steps: int = 0  # steps on which this source was chosen (including empty drafts)
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    by_position: list[list[int]] = field(default_factory=list)  # [reached, accepted] per draft position

    def observe(self, drafted: int, accepted: int, draft_ms: float, verify_ms: float) -> None:
        self.steps += 1
        self.draft_ms += draft_ms
        self.verify_ms += verify_ms
        if drafted == 0:
            return
        self.drafts += 1
        self.drafted += drafted
        self.accepted += accepted
        while len(self.by_position) < drafted:
            self.by_position.append([0, 0])
        # Position i was reached if every earlier drafted token was accepted.
        for i in range(min(drafted, accepted + 1)):
            self.by_position[i][0] += 1
            if i < accepted:
                self.by_position[i][1] += 1

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def mean_accepted(self) -> float:
        return self.accepted / self.drafts if self.drafts else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "drafts": self.drafts,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "steps": self.steps,
            "acceptance_rate": round(self.acceptance_rate, 4),
            "mean_accepted_length": round(self.mean_accepted, 3),
            "acceptance_by_position": [round(a / r, 3) if r else None for r, a in self.by_position],
            "draft_ms": round(self.draft_ms, 2),
            "verify_ms": round(self.verify_ms, 2),
        }


class SpecStats:
    """Per-request and since-start speculation statistics, per source and per content class (app.policy.content_class,
    decided once per request by the session)."""

    def __init__(self) -> None:
        self.request: dict[str, SourceStats] = {}
        self.total: dict[tuple[str, str], SourceStats] = {}
        self.content_class = "chat"

    def start_request(self, content_class: str = "chat") -> None:
        self.request = {}
        self.content_class = content_class

    def observe_step(self, source: str, drafted: int, accepted: int, draft_ms: float, verify_ms: float) -> None:
        self.request.setdefault(source, SourceStats()).observe(drafted, accepted, draft_ms, verify_ms)
        self.total.setdefault((source, self.content_class), SourceStats()).observe(
            drafted, accepted, draft_ms, verify_ms
        )

    def request_summary(self) -> dict[str, dict[str, Any]]:
        return {name: s.to_dict() for name, s in self.request.items()}

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """Totals since start, keyed "source/content_class", for the metrics endpoint."""
        return {f"{src}/{cls}": s.to_dict() for (src, cls), s in self.total.items()}
