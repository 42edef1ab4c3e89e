"""GPU measurements through the engine's own code (app.runtime.llama / app.engine.session), for bench/lib/simulate.py.

  python bench/gpu/measure.py devices OUT.json
  python bench/gpu/measure.py costs OUT.json NAME=MODEL.gguf ...      # verify-batch cost curves, batch 1..16
  python bench/gpu/measure.py engine OUT.json TARGET.gguf DRAFT.gguf   # end-to-end Session runs + step traces
  python bench/gpu/measure.py mtpcosts OUT.json MODEL.gguf              # MTP draft + hybrid verify/rollback costs
  python bench/gpu/measure.py mtpbench OUT.json MODEL.gguf LLAMA_SERVER  # engine vs llama-server, MTP n2/n4
  python bench/gpu/measure.py mtpplain OUT.json MODEL.gguf LLAMA_SERVER  # plain: engine load variants vs llama-server

`costs`: for each model and KV depth (context), decode a batch of b tokens at that depth with logits on every row
and read every row (what one speculative verify does), b = 1..16; every shape is run twice before timing (Vulkan
compiles pipelines lazily per shape), then timed `--reps` times; the median is kept. `engine`: Session generations
(greedy, 128 tokens) with plain decoding, the draft model and prompt lookup at a few contexts, with every StepEvent
recorded, so the simulator can be checked against the engine on the same device. Works on any llama.cpp backend
(set n_gpu_layers with DD_NGL, default -1).

Environment: DD_CONTEXTS, DD_BATCHES, DD_REPS (costs); DD_FLASH = "0", "1" or "0,1" (flash attention off/on; for
`costs` each setting gets its own entry, NAME and NAME+fa, so one file holds both curves); DD_ENGINE_CONTEXTS,
DD_MAX_TOKENS (engine). `mtpcosts` and `mtpbench` are in bench/gpu/mtp_measure.py (DD_MTP_* variables there).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

NGL = int(os.environ.get("DD_NGL", "-1"))
THREADS = int(os.environ.get("DD_THREADS", "0"))
FLASH = [v.strip() == "1" for v in os.environ.get("DD_FLASH", "0").split(",")]


def devices(out: str) -> None:
    import llama_cpp

    from app.runtime.device import backend_names, describe_active, list_devices

    info = {
        "backends": backend_names(),
        "devices": [d.__dict__ for d in list_devices()],
        "describe_active": describe_active(-1),
        "llama_cpp_python": llama_cpp.__version__,
        "system_info": llama_cpp.llama_print_system_info().decode(errors="replace"),
    }
    Path(out).write_text(json.dumps(info, indent=1))
    print(json.dumps(info, indent=1))


def costs(out: str, specs: list[str], contexts=(128, 1024, 4096, 8192), batches=range(1, 17), reps=15) -> None:
    from app.runtime.llama import Context, ContextParams, Model, ModelParams

    contexts = tuple(int(c) for c in os.environ.get("DD_CONTEXTS", ",".join(map(str, contexts))).split(","))
    batches = tuple(int(b) for b in os.environ.get("DD_BATCHES", ",".join(map(str, batches))).split(","))
    reps = int(os.environ.get("DD_REPS", reps))
    result = {"n_gpu_layers": NGL, "threads": THREADS, "reps": reps, "models": {}}
    if Path(out).exists():  # add to an earlier run's file (one file per device)
        result["models"] = json.loads(Path(out).read_text()).get("models", {})
    for spec in specs:
        name, path = spec.split("=", 1)
        t_load = time.perf_counter()
        m = Model(path, ModelParams(NGL))
        load_s = time.perf_counter() - t_load
        for fa in FLASH:
            key = name + ("+fa" if fa else "")
            mode = "on" if fa else "off"
            cp = ContextParams(n_ctx=max(contexts) + 64, n_batch=512, n_threads=THREADS, flash_attn=mode)
            ctx = Context(m, cp)
            rows = _cost_rows(ctx, m.vocab.n_vocab, contexts, batches, reps, key)
            result["models"][key] = {
                "path": os.path.basename(path),
                "flash_attn": fa,
                "load_s": round(load_s, 2),
                "ms": rows,
                "size": os.path.getsize(path),
            }
            ctx.close()
            Path(out).write_text(json.dumps(result, indent=1))  # after each curve: a timeout keeps what was done
        m.close()


def _cost_rows(ctx, n_vocab: int, contexts, batches, reps: int, label: str) -> dict[str, dict[str, float]]:  # type: ignore[no-untyped-def]
    """Median ms of one b-token decode (logits on every row, every row read) at each KV depth."""
    rng = np.random.default_rng(0)
    rows: dict[str, dict[str, float]] = {}
    for c in contexts:
        ctx.clear()
        toks = [int(t) for t in rng.integers(1000, 100000 if n_vocab > 100000 else n_vocab - 1, size=c)]
        t0 = time.perf_counter()
        ctx.prefill(toks)
        prefill_ms = (time.perf_counter() - t0) * 1000
        rows[str(c)] = {"prefill_ms": round(prefill_ms, 2)}
        for b in batches:
            batch = [int(t) for t in rng.integers(1000, 30000, size=b)]

            def once(batch=batch, b=b, c=c) -> float:  # noqa: B008
                t = time.perf_counter()
                ctx.decode(batch, logits_from=0)
                for i in range(b):
                    ctx.logits(i)
                dt = (time.perf_counter() - t) * 1000
                ctx.truncate(c)
                return dt

            once(), once()  # warm: pipeline compilation for this shape
            times = [once() for _ in range(reps)]
            rows[str(c)][str(b)] = round(statistics.median(times), 4)
        print(label, c, f"prefill {prefill_ms:.0f} ms", {b: rows[str(c)][str(b)] for b in batches}, flush=True)
    return rows


def engine(out: str, target: str, draft: str, contexts=(512, 4096), max_tokens=128) -> None:
    max_tokens = int(os.environ.get("DD_MAX_TOKENS", max_tokens))
    from app.calibration.runner import build_messages, corpus_text
    from app.engine.config import EngineConfig
    from app.engine.session import Session
    from app.engine.types import DoneEvent, GenerationRequest, StepEvent
    from app.runtime.sampling import SamplingParams
    from app.speculative.settings import PLAIN, SpecSettings

    contexts = tuple(int(c) for c in os.environ.get("DD_ENGINE_CONTEXTS", ",".join(map(str, contexts))).split(","))
    s = Session(
        EngineConfig(
            model=target,
            draft=draft,
            n_ctx=max(contexts) + max_tokens + 256,
            n_batch=512,
            n_threads=THREADS,
            n_gpu_layers=NGL,
            flash_attn="on" if FLASH[-1] else "off",
            dynamic_draft=False,
        )
    )
    settings = [
        PLAIN,
        SpecSettings("draft", 2),
        SpecSettings("draft", 4),
        SpecSettings("draft", 4, 0, 0.5),
        SpecSettings("lookup", 4),
        SpecSettings("lookup", 8),
    ]
    corpus = corpus_text()
    runs = []
    for c in contexts:
        msgs, n_prompt = build_messages(s, c, corpus)
        for st in settings:
            for rep in range(2):  # the first run warms every shape this setting uses
                req = GenerationRequest(
                    messages=msgs, max_tokens=max_tokens, sampling=SamplingParams(temperature=0.0), speculative=st
                )
                steps, done = [], None
                for ev in s.generate(req):
                    if isinstance(ev, StepEvent):
                        steps.append([ev.source, ev.drafted, ev.accepted, ev.draft_ms, ev.verify_ms])
                    elif isinstance(ev, DoneEvent):
                        done = ev.summary
                if rep == 0:
                    continue
                t = done.timings
                runs.append(
                    {
                        "context": n_prompt,
                        "setting": st.label(),
                        "spec": st.to_dict(),
                        "predicted_n": t.predicted_n,
                        "predicted_ms": t.predicted_ms,
                        "tok_s": t.predicted_per_second,
                        "steps": steps,
                    }
                )
                print(c, st.label(), t.predicted_per_second, "tok/s", len(steps), "steps", flush=True)
        Path(out).write_text(
            json.dumps({"target": os.path.basename(target), "draft": os.path.basename(draft), "runs": runs}, indent=1)
        )
    s.close()


if __name__ == "__main__":
    what, out, *rest = sys.argv[1:]
    if what == "devices":
        devices(out)
    elif what == "costs":
        costs(out, rest)
    elif what == "engine":
        engine(out, rest[0], rest[1])
    elif what == "mtpcosts":
        from bench.gpu.mtp_measure import mtp_costs

        mtp_costs(out, rest[0])
    elif what == "mtpbench":
        from bench.gpu.mtp_measure import mtp_bench

        mtp_bench(out, rest[0], rest[1])
    elif what == "mtpplain":
        from bench.gpu.mtp_measure import mtp_plain

        mtp_plain(out, rest[0], rest[1])
