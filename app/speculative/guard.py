"""The in-request guard: speculation that realizes fewer tokens per ms than plain decoding turns itself off for a while.

A fixed setting (DD's table row, or the engine default) was chosen on other prompts; on this one it may lose: a chat
where prompt lookup finds nothing, a draft model that disagrees with this text, a device where a verify row costs
nearly a decode. The guard compares the tokens speculative steps committed per ms with what plain decoding costs here:
the session's measured one-row decode (calibration and earlier requests), refreshed by this request's own plain
steps, or measured by the request's first plain steps where nothing is known yet (a fresh process). Speculation is
turned off when it falls behind by more than MARGIN over a window of WINDOW steps, or sooner (from MIN_STEPS on) once
the time it lost against plain decoding passes LOSS_BUDGET plain decodes: a probe costs at most about that. Then the
next BACKOFF steps decode plain and a new window probes again, the pause doubling each time speculation loses again
(up to MAX_BACKOFF), and back to BACKOFF once it wins.

The adaptive length and the source pool need no guard: their own "0" / "none" arm is a plain step, chosen by the
same measured costs. An explicit request setting is not guarded either: it runs as asked (calibration measures so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WINDOW = 8  # speculative steps per verdict: fewer and one unlucky step decides (a 2-core CPU's steps vary by ~10%)
MARGIN = 0.10  # speculation must lose by more than this (relative) before it is turned off: the steps' noise
MIN_STEPS = 3  # the earliest an early verdict comes
LOSS_BUDGET = 4.0  # plain decodes' worth of time a probe may lose before it is stopped early
BACKOFF = 16  # plain steps after a lost window, before the next probe
MAX_BACKOFF = 256
PLAIN_SAMPLES = 3  # plain steps that measure plain decoding where nothing is known of it yet (the first is warm-up)
PLAIN_EMA = 0.3  # how fast the plain estimate follows this request's own plain steps (the context grows)


@dataclass(frozen=True)
class GuardEvent:
    """One change: at `token` (reply tokens committed so far) the guard went `action` ("plain": speculation off
    for `steps` steps; "probe": speculating again), with the rates that decided it (tokens per second)."""

    token: int
    action: str
    steps: int = 0
    spec_tok_s: float | None = None
    plain_tok_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"token": self.token, "action": self.action}
        if self.action == "plain":
            out |= {"steps": self.steps, "spec_tok_s": self.spec_tok_s, "plain_tok_s": self.plain_tok_s}
        return out


@dataclass
class SpeculationGuard:
    """One request's guard. `plain_ms`: what one plain decode costs here, if known (the session's measured one-row
    verify); the request's own plain steps refresh it."""

    plain_ms: float | None = None
    events: list[GuardEvent] = field(default_factory=list)
    _plain_left: int = 0  # plain steps still to run (a backoff, or measuring plain)
    _backoff: int = BACKOFF
    _tokens: int = 0  # the current window: tokens committed by its speculative steps, and their ms
    _ms: float = 0.0
    _steps: int = 0
    _probing: bool = False  # the window is a probe after a backoff (a win resets the backoff)
    _measuring: bool = False  # the plain steps left only measure plain decoding (no backoff, no event)

    def __post_init__(self) -> None:
        if self.plain_ms is None:  # nothing known of plain decoding here: the request's first steps measure it
            self._plain_left, self._measuring = PLAIN_SAMPLES, True

    def speculate(self) -> bool:
        """Whether this step may draft (False: the guard makes it a plain decode)."""
        return self._plain_left == 0

    def observe(self, drafted: int, committed: int, draft_ms: float, verify_ms: float, sample: bool, at: int) -> None:
        """Learn one step: `drafted` tokens proposed, `committed` tokens it added (reply total now `at`), its ms;
        `sample` False: its ms include one-off work (a first verify of its batch size), so it decides nothing."""
        if drafted == 0 and sample:  # a plain decode (the guard's, or a source that had nothing): plain's price
            old = self.plain_ms
            self.plain_ms = verify_ms if old is None else old + PLAIN_EMA * (verify_ms - old)
        if self._plain_left > 0:
            self._plain_left -= 1
            if self._plain_left == 0 and not self._measuring:
                self._probing = True
                self.events.append(GuardEvent(at, "probe"))
            self._measuring = self._measuring and self._plain_left > 0
            return
        if not sample:
            return
        self._tokens += committed
        self._ms += draft_ms + verify_ms
        self._steps += 1
        if self.plain_ms is None:  # no plain sample came (every one had one-off work): keep speculating
            return
        lost = self._ms - self._tokens * self.plain_ms  # ms spent beyond what plain decoding would have
        if self._steps >= WINDOW or (self._steps >= MIN_STEPS and lost > LOSS_BUDGET * self.plain_ms):
            self._verdict(at, self.plain_ms)

    def _verdict(self, at: int, plain_ms: float) -> None:
        spec_rate = self._tokens / max(self._ms, 1e-9)
        plain_rate = 1.0 / max(plain_ms, 1e-9)
        self._tokens, self._ms, self._steps = 0, 0.0, 0
        if spec_rate >= plain_rate * (1.0 - MARGIN):
            if self._probing:
                self._backoff = BACKOFF
            self._probing = False
            return
        self._plain_left = self._backoff
        self.events.append(GuardEvent(at, "plain", self._backoff, spec_rate * 1000.0, plain_rate * 1000.0))
        self._backoff = min(self._backoff * 2, MAX_BACKOFF)
        self._probing = False

    def record(self) -> list[dict[str, Any]]:
        """The events as the decision record carries them (`guard`)."""
        return [e.to_dict() for e in self.events]
