"""The chat window shows copy_edit's sub-class and which rows decided (real engine, SmolLM2-135M, a saved table)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from app.gui.main import MainWindow
from app.policy import FrontierRow, new_table
from app.policy.store import calibration_store
from app.speculative.settings import PLAIN, SpecSettings

BLOCK = "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n\n" * 6
LOOKUP3 = SpecSettings(source="lookup", n_max=3)
LOOKUP6 = SpecSettings(source="lookup", n_max=6)


def test_reply_footer_names_the_subclass_and_its_rows(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    fp = gui_engine.call(lambda s: s.fingerprint())
    whole = (0, 1 << 20)
    rows = [
        FrontierRow(*whole, PLAIN, 50.0, 1.0, 3, True),
        FrontierRow(*whole, LOOKUP6, 35.0, 1.0, 3, True),
        FrontierRow(*whole, PLAIN, 50.0, 1.0, 3, True, content_class="copy_edit"),
        FrontierRow(*whole, LOOKUP6, 90.0, 1.0, 3, True, content_class="copy_edit"),
        FrontierRow(*whole, PLAIN, 50.0, 1.0, 3, True, content_class="near_copy"),
        FrontierRow(*whole, LOOKUP3, 95.0, 1.0, 3, True, content_class="near_copy"),
    ]
    store = calibration_store(gui_engine.config.model, gui_engine.config.draft)
    store.save(new_table(fp, rows))
    try:
        assert "using table" in gui_engine.call(lambda s: s.reload_policy())
        w: MainWindow = make_window(engine=gui_engine, model_label="SmolLM2-135M (test)")
        w.resize(2000, 800)  # room for the whole footer in the screenshot
        w.chat.new_conversation()
        w.chat.apply_settings("", {"temperature": 0.0, "max_tokens": 6, "spec_mode": "auto"})
        footers = []
        for ask, want in (
            ("Rename the function `area` to `surface` and return the full file.", "copy_edit/near_copy, its own row"),
            ("Add a docstring to every function and return the full file.", "copy_edit/additive, copy_edit's row"),
        ):
            with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as blocker:
                assert w.chat.send(BLOCK + "\n" + ask)
            saved = blocker.args[0]
            assert saved is not None and saved.stats["dd"]["content_subclass"] in want
            footer = w.chat.bubbles()[-1].stats_label.text()
            assert want in footer, footer
            footers.append(footer)
        assert LOOKUP3.label() in footers[0] and LOOKUP6.label() in footers[1]
        shots = os.environ.get("DYNADRAFT_SHOTS")
        if shots:  # a screenshot for the report: DYNADRAFT_SHOTS=/work/brief/shots pytest ...
            w.grab().save(str(Path(shots) / "classes3-subclass-footer.png"))
            w.chat.bubbles()[-1].grab().save(str(Path(shots) / "classes3-subclass-footer-bubble.png"))
    finally:
        shutil.rmtree(store.root, ignore_errors=True)
        gui_engine.call(lambda s: s.reload_policy())
