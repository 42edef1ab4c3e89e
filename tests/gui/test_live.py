"""The live-graph ring buffers (no Qt): rolling acceptance/tok/s, wrap-around and request boundaries."""

from __future__ import annotations

import math

import numpy as np

from app.engine.types import StepEvent
from app.gui.live import StepRing


def _step(i: int, t: float, drafted: int = 4, accepted: int = 2) -> StepEvent:
    return StepEvent(i, "lookup", 4, drafted, accepted, accepted + 1, 0.1, 1.0, t, i * 3)


def test_rolling_values_and_boundaries() -> None:
    ring = StepRing(capacity=8)
    for i in range(1, 4):
        ring.tap(_step(i, 0.1 * i))
    assert ring.pending == 3 and ring.drain() == 3
    s = ring.snapshot()
    assert list(s.x) == [0, 1, 2]
    assert np.allclose(s.acceptance, 0.5)
    assert math.isclose(s.tps[-1], 9 / (0.0011 + 0.2), rel_tol=1e-6)
    assert s.boundaries == (0.0,)
    ring.tap(None)  # type: ignore[arg-type]  # ignored: not an event
    for i in range(1, 8):  # a second request wraps the 8-slot ring
        ring.tap(_step(i, 10 + 0.1 * i, drafted=0, accepted=0))
    ring.drain()
    s = ring.snapshot()
    assert len(s.x) == 8 and list(s.x) == list(range(2, 10))
    assert s.boundaries == (3.0,) and ring.requests == 2
    assert np.isnan(s.acceptance[-1])  # nothing drafted in the window
    ring.clear()
    assert ring.snapshot().x.size == 0
