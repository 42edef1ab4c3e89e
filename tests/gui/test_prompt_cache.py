"""The reply footer says how many prompt tokens the conversation cache saved, after switching chats (real window)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from app.gui.main import MainWindow

SHOTS = Path(os.environ.get("DYNADRAFT_SHOTS", "/work/brief/shots"))


def _reply(w: MainWindow, qtbot, text: str):  # type: ignore[no-untyped-def]
    with qtbot.waitSignal(w.chat.reply_finished, timeout=180_000) as blocker:
        assert w.chat.send(text)
    saved = blocker.args[0]
    assert saved is not None
    return saved


def test_footer_shows_cached_tokens_after_switching_back(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window(engine=gui_engine, model_label="SmolLM2-135M (test)")
    settings = {"temperature": 0.0, "max_tokens": 12, "spec_mode": "off"}
    w.chat.new_conversation()
    w.chat.apply_settings("You are a helpful assistant.", settings)
    first = _reply(w, qtbot, "Name three colours.")
    conv_a = w.chat.conv.id  # type: ignore[union-attr]
    w.chat.new_conversation()
    w.chat.apply_settings("You are a terse poet.", settings)
    _reply(w, qtbot, "A haiku about rain.")
    w.chat.open_conversation(conv_a)
    second = _reply(w, qtbot, "And three animals?")
    cached = second.stats["cached_tokens"]
    assert cached >= first.stats["prompt_tokens"]  # chat A came back from the cache, not a re-prefill
    footer = w.chat.bubbles()[-1].stats_label.text()
    match = re.search(r"cached (\d+) tokens", footer)
    assert match and int(match.group(1)) == cached, footer
    assert "cached" not in w.chat.bubbles()[1].stats_label.text()  # A's first reply had nothing cached
    if SHOTS.is_dir():
        w.grab().save(str(SHOTS / "cache-footer.png"))


def test_the_apps_engine_reopens_warm(smollm2_path: Path) -> None:
    """The app's engine config persists the cache: after a restart, a chat's next turn restores from disk."""
    from dataclasses import replace

    from app.engine.types import GenerationRequest
    from app.engine.worker import Engine
    from app.gui.model import ModelChoice
    from app.runtime.sampling import SamplingParams

    config = replace(ModelChoice(model=str(smollm2_path), n_ctx=512, n_gpu_layers=0).config(), n_threads=1)
    msgs = ({"role": "user", "content": "Name three colours."},)
    req = GenerationRequest(messages=msgs, max_tokens=4, sampling=SamplingParams(temperature=0.0))
    with Engine(config).wait_ready(120) as engine:
        first = engine.submit(req).result(120)
    assert config.cache_dir and list(Path(config.cache_dir).glob("*/index.json"))
    follow = replace(
        req, messages=(*msgs, {"role": "assistant", "content": first.text}, {"role": "user", "content": "More?"})
    )
    with Engine(config).wait_ready(120) as engine:
        again = engine.submit(follow).result(120)
    assert again.timings.cache_n >= first.prompt_tokens
