"""The live graphs' per-source acceptance lines, in the real window with a real engine (SmolLM2 + a Q2_K draft)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.gui.main import MainWindow
from app.gui.plots import source_label

CODE = "\n".join(f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(5))
COPY = f"Repeat this code exactly:\n\n```python\n{CODE}```"


@pytest.fixture(scope="module")
def pair_engine(smollm2_path: Path) -> Iterator[object]:
    from app.engine.config import EngineConfig
    from app.engine.worker import Engine
    from app.models.packaged import ensure_quantized

    draft = ensure_quantized("smollm2-135m", "Q2_K")
    eng = Engine(EngineConfig(model=str(smollm2_path), draft=str(draft), n_ctx=2048, n_threads=1)).wait_ready(180)
    yield eng
    eng.close()


def _chat(w: MainWindow, qtbot, mode: str, prompt: str) -> None:  # type: ignore[no-untyped-def]
    w.chat.new_conversation()
    settings = {"temperature": 0.0, "max_tokens": 40, "spec_mode": mode, "spec_n_max": 4, "spec_p_min": 0.0}
    w.chat.apply_settings("You are a helpful assistant.", settings)
    with qtbot.waitSignal(w.chat.reply_finished, timeout=180_000):
        assert w.chat.send(prompt)


def test_each_source_gets_its_own_acceptance_line(make_window, pair_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window(engine=pair_engine, model_label="SmolLM2-135M + Q2_K draft (test)")
    _chat(w, qtbot, "lookup", COPY)
    _chat(w, qtbot, "draft", "Write a short poem about the sea.")
    qtbot.waitUntil(lambda: w.ring.pending == 0 and w.ring.requests >= 2, timeout=10_000)
    w.plots.redraw()
    snap = w.ring.snapshot()
    assert set(snap.by_source) == {"lookup", "draft"}
    bounds = snap.boundaries
    second = snap.x >= bounds[-1]
    lookup, draft = snap.by_source["lookup"], snap.by_source["draft"]
    # Each line holds its own source's acceptance, and only where that source drafted in the request.
    assert np.isfinite(lookup[~second]).any() and np.isnan(lookup[second]).all()
    assert np.isfinite(draft[second]).any() and np.isnan(draft[~second]).all()
    ok = np.isfinite(draft)
    assert ((draft[ok] >= 0) & (draft[ok] <= 1)).all()
    # The curves drawn are those series, and the legend names every line.
    for name, series in snap.by_source.items():
        xs, ys = w.plots.c_source[name].getData()
        assert np.array_equal(xs, snap.x) and np.array_equal(ys, series, equal_nan=True)
    labels = [label.text for _item, label in w.plots.acc_legend.items]
    assert labels == ["all sources", source_label("lookup"), source_label("draft")]
    shot = os.environ.get("DYNADRAFT_SHOT")
    if shot:  # the screenshot for the report: DYNADRAFT_SHOT=/path/to.png
        w.graphs_dock.show()
        w.graphs_dock.resize(900, 520)
        qtbot.wait(200)
        assert w.plots.grab().save(shot)
