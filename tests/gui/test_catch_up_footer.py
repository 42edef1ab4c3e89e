"""The reply footer says when Dynamic Draft passed over a draft-model row because its draft would first have to
prefill the prompt (real engine: SmolLM2-135M with its Q2_K re-quantisation as the draft, a saved table)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.gui.main import MainWindow
from app.policy import new_table
from app.policy.store import calibration_store
from tests.engine.helpers import DRAFT, LOOKUP, draft_wins_narrowly, long_text


@pytest.fixture()
def draft_engine(smollm2_path: Path) -> Iterator[object]:
    from app.engine.config import EngineConfig
    from app.engine.worker import Engine
    from app.models.packaged import ensure_quantized

    draft = ensure_quantized("smollm2-135m", "Q2_K")
    eng = Engine(EngineConfig(model=str(smollm2_path), draft=str(draft), n_ctx=2048)).wait_ready(180)
    yield eng
    eng.close()


def test_the_footer_says_which_draft_row_its_catch_up_ruled_out(make_window, draft_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    fp = draft_engine.call(lambda s: s.fingerprint())
    store = calibration_store(draft_engine.config.model, draft_engine.config.draft)
    store.save(new_table(fp, draft_wins_narrowly()))
    try:
        assert "using table" in draft_engine.call(lambda s: s.reload_policy())
        w: MainWindow = make_window(engine=draft_engine, model_label="SmolLM2-135M + Q2_K draft (test)")
        w.resize(2000, 800)
        footers = []
        for text, max_tokens in (("Say hello to the river.", 8), (f"Summarise this:\n\n{long_text('forest')}", 3)):
            w.chat.new_conversation()
            w.chat.apply_settings("", {"temperature": 0.0, "max_tokens": max_tokens, "spec_mode": "auto"})
            with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000):
                assert w.chat.send(text)
            footers.append(w.chat.bubbles()[-1].stats_label.text())
        # the first reply runs the draft (its prefill speed unknown yet) and times it; the second, a new text of
        # ~250 tokens for 3 tokens of reply, cannot win that prefill back: lookup runs, and the footer says why
        assert f"DD on: {DRAFT.label()} (table_row" in footers[0], footers[0]
        assert f"DD on: {LOOKUP.label()} (not the draft model's {DRAFT.label()}: it would first prefill" in footers[1]
        shots = os.environ.get("DYNADRAFT_SHOTS")
        if shots:
            w.grab().save(str(Path(shots) / "catch-up-footer.png"))
            w.chat.bubbles()[-1].grab().save(str(Path(shots) / "catch-up-footer-bubble.png"))
    finally:
        shutil.rmtree(store.root, ignore_errors=True)
