"""Render the app's main views to PNG files (offscreen), e.g. for the README and release notes.

    python packaging/screenshots.py OUT_DIR [--model PATH] [--no-model]

Uses a throwaway DYNADRAFT_HOME so it never touches your chats. With a model (default: the bundled demo model)
it also sends one speculative chat message so the chat and the live graphs show real data.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROMPT = (
    "Here is a Python function. Repeat it with type hints added and a docstring, nothing else.\n\n"
    "```python\ndef moving_average(values, window):\n    out = []\n    for i in range(len(values) - window + 1):\n"
    "        out.append(sum(values[i:i + window]) / window)\n    return out\n```"
)


def _wait(signal: object, timeout_ms: int) -> list[object]:
    """Run the event loop until `signal` fires (or time runs out); returns its arguments."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    got: list[object] = []

    def done(*args: object) -> None:
        got.extend(args)
        loop.quit()

    signal.connect(done)  # type: ignore[attr-defined]
    QTimer.singleShot(timeout_ms, loop.quit)
    loop.exec()
    signal.disconnect(done)  # type: ignore[attr-defined]
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="folder for the PNG files")
    ap.add_argument("--model", help="GGUF to chat with (default: the bundled demo model)")
    ap.add_argument("--no-model", action="store_true", help="only the first-run (no model) views")
    ap.add_argument("--size", default="1400x860", help="window size WxH")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["DYNADRAFT_HOME"] = tempfile.mkdtemp(prefix="dynadraft-shots-")

    from app.gui.main import MainWindow, _app, dispose
    from app.gui.model import ModelChoice, demo_path

    app = _app()
    w, h = (int(v) for v in args.size.lower().split("x"))
    win = MainWindow(autoload=False)
    win.resize(w, h)
    win.show()
    app.processEvents()
    written: list[Path] = []

    def shot(name: str, widget: object | None = None) -> None:
        for _ in range(3):
            app.processEvents()
        path = args.out / name
        (widget or win).grab().save(str(path))  # type: ignore[attr-defined]
        written.append(path)

    shot("01-first-run.png")
    model = None if args.no_model else (args.model or (str(demo_path()) if demo_path() else None))
    if model:
        win.models.load(ModelChoice(model, None, 4096, -1, demo=args.model is None))
        got = _wait(win.models.loaded, 180_000)
        if not got:
            print("model did not load in time", file=sys.stderr)
            return 1
        chat = win.chat
        chat.new_conversation()
        chat.apply_settings(
            "You are a concise coding assistant.",
            {"temperature": 0.0, "max_tokens": 160, "spec_mode": "lookup", "spec_n_max": 6, "spec_p_min": 0.0},
        )
        chat.send(PROMPT)
        _wait(chat.reply_finished, 180_000)
        win.plots.refresh()
        chat.scroll_area.verticalScrollBar().setValue(chat.scroll_area.verticalScrollBar().maximum())
        shot("02-chat.png")
        shot("03-live-graphs.png", win.plots)
        chat.highlight.setChecked(True)
        shot("04-drafted-highlight.png")
        chat.highlight.setChecked(False)
    for i, name in ((1, "05-endpoint.png"), (2, "06-models.png"), (3, "07-calibrate.png")):
        win.tabs.setCurrentIndex(i)
        shot(name)
    win.tabs.setCurrentIndex(0)
    dispose(win)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
