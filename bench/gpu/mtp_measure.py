"""MTP measurements on a qwen35moe/qwen35 GGUF with a NextN block: draft, verify and rollback costs; engine vs server.

`mtp_costs` (measure.py mtpcosts OUT.json MODEL.gguf), at each KV depth (DD_MTP_CONTEXTS, default 2k/8k/16k/32k),
flash attention on, everything through the engine's own code (app.runtime.llama, app.speculative.mtp):
- the target's prefill, and the MTP context's catch-up over the same positions (the first proposal);
- the MTP draft at steady state: MtpSource.propose of n = 1..8 tokens after a rollback to the committed history
  (one (token, hidden state) pair to catch up, then n - 1 more single decodes), ms per call and per drafted token;
- verify batches b = 1..8 tokens with logits on every row and every row read, the hidden-state rows handed to the
  MTP source as the engine does; the hybrid memory cannot drop positions, so each verify is bracketed by the
  engine's full sequence checkpoint (save_state before, load_state after), timed separately; also the size and cost
  of llama.cpp's partial-only checkpoint (LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: the recurrent state alone), which the
  engine does not use today.
Every shape runs twice before it is timed (Vulkan builds pipelines lazily), then DD_REPS times (default 5); medians.

`mtp_bench` (measure.py mtpbench OUT.json MODEL.gguf LLAMA_SERVER): the engine's tok/s against the pinned
llama-server with `--spec-type draft-mtp` and the same n-max/p-min, on the same file and prompt token ids
(DD_MTP_BENCH_CONTEXTS, default 2048), greedy, DD_MAX_TOKENS (default 128) tokens, plain, MTP n2,p0 and n4,p0:
for each setting a server is started with that setting, then llama-server and the engine run one after the other
(one run each after a warm-up of both). Both report llama.cpp's predicted_per_second (tokens after the prompt).
DD_MTP_BENCH_SERVER=0 runs the engine alone, its settings interleaved per context (one run each after a warm-up).
"""

from __future__ import annotations

import ctypes
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

NGL = int(os.environ.get("DD_NGL", "-1"))
THREADS = int(os.environ.get("DD_THREADS", "0"))


def _env_ints(name: str, default: str) -> tuple[int, ...]:
    return tuple(int(x) for x in os.environ.get(name, default).split(","))


def _median_ms(fn: Any, reps: int) -> float:
    fn(), fn()  # warm: pipeline compilation for this shape
    return round(statistics.median(fn() for _ in range(reps)), 4)


def _partial_state_ms(ctx: Any) -> tuple[int, float, float]:
    """Bytes, save ms and restore ms of llama.cpp's partial-only checkpoint (the recurrent state) of sequence 0."""
    import llama_cpp as L

    flags = L.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
    t0 = time.perf_counter()
    size = L.llama_state_seq_get_size_ext(ctx.ptr, 0, flags)
    buf = (ctypes.c_uint8 * size)()
    n = L.llama_state_seq_get_data_ext(ctx.ptr, buf, size, 0, flags)
    t1 = time.perf_counter()
    ok = L.llama_state_seq_set_data_ext(ctx.ptr, buf, n, 0, flags)
    t2 = time.perf_counter()
    if not n or not ok:
        return 0, 0.0, 0.0
    return int(n), (t1 - t0) * 1000, (t2 - t1) * 1000


def mtp_costs(out: str, path: str) -> None:
    from app.runtime.llama import Context, ContextParams, Model, ModelParams
    from app.speculative.mtp import attach_mtp

    contexts = _env_ints("DD_MTP_CONTEXTS", "2048,8192,16384,32768")
    batches = _env_ints("DD_BATCHES", "1,2,3,4,5,6,7,8")
    depths = _env_ints("DD_MTP_DEPTHS", "1,2,3,4,5,6,7,8")
    reps = int(os.environ.get("DD_REPS", "5"))
    t_load = time.perf_counter()
    m = Model(path, ModelParams(NGL, load_mtp=True))
    load_s = time.perf_counter() - t_load
    cp = ContextParams(n_ctx=max(contexts) + 64, n_batch=512, n_threads=THREADS, flash_attn="on")
    ctx = Context(m, cp)
    src = attach_mtp(ctx, m, cp)
    rng = np.random.default_rng(0)
    n_vocab = m.vocab.n_vocab
    result: dict[str, Any] = {
        "model": os.path.basename(path),
        "size": os.path.getsize(path),
        "n_gpu_layers": NGL,
        "flash_attn": "on",
        "reps": reps,
        "load_s": round(load_s, 2),
        "contexts": {},
    }
    for c in contexts:
        ctx.clear()
        src.rollback(0)
        toks = [int(t) for t in rng.integers(1000, min(n_vocab - 1, 100000), size=c)]
        row = _context_row(ctx, src, toks, depths, batches, reps, rng)
        result["contexts"][str(c)] = row
        print(
            f"mtpcosts {c}: prefill {row['prefill_ms']:.0f} ms, MTP catch-up {row['mtp_catchup_ms']:.0f} ms, "
            f"draft/token {row['draft_ms_per_token']}, verify {row['verify_ms']}, checkpoint "
            f"{row['checkpoint_bytes'] / 1e6:.0f} MB save {row['checkpoint_save_ms']} / load "
            f"{row['checkpoint_load_ms']} ms, partial {row['partial_checkpoint_bytes'] / 1e6:.1f} MB "
            f"{row['partial_save_ms']} / {row['partial_load_ms']} ms",
            flush=True,
        )
        Path(out).write_text(json.dumps(result, indent=1))  # after each context: a timeout keeps what was done
    src.close()
    ctx.close()
    m.close()


def _context_row(ctx: Any, src: Any, toks: list[int], depths: Any, batches: Any, reps: int, rng: Any) -> dict:  # type: ignore[type-arg]
    """One KV depth's figures (see the module docstring); the target holds `toks` afterwards."""
    from app.runtime.sampling import SamplingParams

    greedy = SamplingParams(temperature=0.0)
    c = len(toks)
    t0 = time.perf_counter()
    ctx.prefill(toks)
    prefill_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    first = src.propose(toks, 1, 0, 0.0, greedy, rng)  # catches the MTP context up over all c positions
    catchup_ms = (time.perf_counter() - t0) * 1000
    src.rollback(c)
    row: dict[str, Any] = {
        "prefill_ms": round(prefill_ms, 2),
        "mtp_catchup_ms": round(catchup_ms, 2),
        "first_draft_n": len(first.tokens),
    }

    def propose(n: int) -> float:
        d = src.propose(toks, n, 0, 0.0, greedy, rng)
        assert len(d.tokens) == n, (n, len(d.tokens))  # p_min 0: the head drafts the full depth
        src.rollback(c)
        return float(d.draft_ms)

    row["draft_ms"] = {str(n): _median_ms(lambda n=n: propose(n), reps) for n in depths}
    row["draft_ms_per_token"] = {k: round(v / int(k), 4) for k, v in row["draft_ms"].items()}
    verify: dict[str, float] = {}
    save: list[float] = []
    load: list[float] = []

    def once(batch: list[int]) -> float:
        t = time.perf_counter()
        state = ctx.save_state()
        t1 = time.perf_counter()
        ctx.decode(batch, logits_from=0)
        for i in range(len(batch)):
            ctx.logits(i)
        t2 = time.perf_counter()
        ctx.load_state(state)
        t3 = time.perf_counter()
        save.append((t1 - t) * 1000)
        load.append((t3 - t2) * 1000)
        return (t2 - t1) * 1000

    for b in batches:
        batch = [int(t) for t in rng.integers(1000, 30000, size=b)]
        verify[str(b)] = _median_ms(lambda batch=batch: once(batch), reps)
    state = ctx.save_state()
    row["verify_ms"] = verify
    row["checkpoint_bytes"] = len(state[0])
    row["checkpoint_save_ms"] = round(statistics.median(save), 3)
    row["checkpoint_load_ms"] = round(statistics.median(load), 3)
    pbytes, psave, pload = _partial_state_ms(ctx)
    row["partial_checkpoint_bytes"] = pbytes
    row["partial_save_ms"], row["partial_load_ms"] = round(psave, 3), round(pload, 3)
    ctx.load_state(state)  # the partial restore above must leave nothing behind
    return row


def mtp_bench(out: str, path: str, server: str) -> None:
    from app.calibration.runner import build_messages, corpus_text
    from app.engine.session import EngineConfig, Session
    from app.engine.types import DoneEvent, GenerationRequest
    from app.runtime.llama_server import ExternalServer, ServerSpec
    from app.runtime.sampling import SamplingParams
    from app.speculative.settings import PLAIN, SpecSettings

    contexts = _env_ints("DD_MTP_BENCH_CONTEXTS", "2048")
    n_predict = int(os.environ.get("DD_MAX_TOKENS", "128"))
    n_ctx = max(contexts) + n_predict + 256
    greedy = SamplingParams(temperature=0.0)
    common: dict[str, Any] = {"model": path, "n_ctx": n_ctx, "n_batch": 512, "n_threads": THREADS}
    common |= {"n_gpu_layers": NGL, "flash_attn": "on"}  # the same on both sides
    s = Session(EngineConfig(**common, dynamic_draft=False))
    corpus = corpus_text()
    prompts = []
    for c in contexts:
        msgs, _ = build_messages(s, c, corpus)
        req = GenerationRequest(messages=msgs, max_tokens=n_predict)
        prompts.append((msgs, s.format_prompt(req)))
    named = {"off": PLAIN, "n2": SpecSettings("mtp", 2, 0, 0.0), "n4": SpecSettings("mtp", 4, 0, 0.0)}
    settings = [named[k] for k in os.environ.get("DD_MTP_BENCH_SETTINGS", "off,n2,n4").split(",")]
    server_timeout = float(os.environ.get("DD_SERVER_TIMEOUT_S", "600"))
    runs: list[dict[str, Any]] = []

    def ours(msgs: Any, st: SpecSettings) -> dict[str, Any]:
        req = GenerationRequest(
            messages=msgs, max_tokens=n_predict, sampling=greedy, speculative=st, cache_prompt=False
        )
        sm = [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary
        t = sm.timings
        return {
            "tok_s": t.predicted_per_second,
            "predicted_n": t.predicted_n,
            "draft_n": t.draft_n,
            "draft_n_accepted": t.draft_n_accepted,
            "tokens": list(sm.tokens),
        }

    def keep(run: dict[str, Any], line: str) -> None:
        """Record one measured run: printed at once, and the file rewritten (a later hang loses nothing)."""
        runs.append(run)
        print(f"mtpbench {run['context']} {run['setting']}: {line}", flush=True)
        Path(out).write_text(json.dumps({"model": os.path.basename(path), "runs": runs}, indent=1))

    if os.environ.get("DD_MTP_BENCH_SERVER", "1") == "0":  # the engine alone: settings interleaved per context
        try:
            for msgs, tokens in prompts:
                for st in settings:
                    ours(msgs, st)  # warm-up
                for st in settings:
                    dd = ours(msgs, st)
                    engine_only = {"context": len(tokens), "setting": st.label(), "engine": dd | {"tokens": None}}
                    keep(
                        engine_only, f"engine {dd['tok_s']:.2f} tok/s (draft {dd['draft_n']}/{dd['draft_n_accepted']})"
                    )
        finally:
            s.close()
        return
    try:
        for st in settings:
            flags: tuple[str, ...] = ()
            if st.source == "mtp":
                flags = ("--spec-type", "draft-mtp", "--spec-draft-n-max", str(st.n_max))
                flags += ("--spec-draft-n-min", "0", "--spec-draft-p-min", f"{st.p_min:g}")
            spec = ServerSpec(binary=server, **common, extra_args=flags, start_timeout_s=300.0)
            with ExternalServer(spec) as srv:

                def theirs(tokens: list[int], n: int = n_predict, srv: ExternalServer = srv) -> dict[str, Any]:
                    body = {"prompt": tokens, "n_predict": n, "temperature": 0, "cache_prompt": False}
                    try:
                        status, r = srv.request(
                            "POST", "/completion", {**body, "return_tokens": True}, timeout=server_timeout
                        )
                    except TimeoutError:  # seen: draft-mtp on a hybrid model slows with n_ctx (see the results)
                        return {"tok_s": 0.0, "error": f"no answer within {server_timeout:.0f} s", "tokens": []}
                    assert status == 200, r
                    t = r["timings"]
                    return {
                        "tok_s": t["predicted_per_second"],
                        "predicted_n": t["predicted_n"],
                        "draft_n": t.get("draft_n", 0),
                        "draft_n_accepted": t.get("draft_n_accepted", 0),
                        "tokens": r["tokens"],
                    }

                for msgs, tokens in prompts:
                    ours(msgs, st)  # warm-up of both sides (pipelines, first-use costs)
                    cpp = theirs(tokens[:64], 16)
                    if "error" not in cpp:
                        cpp = theirs(tokens)
                    dd = ours(msgs, st)
                    both = {
                        "context": len(tokens),
                        "setting": st.label(),
                        "llama_server": {k: v for k, v in cpp.items() if k != "tokens"},
                        "engine": {k: v for k, v in dd.items() if k != "tokens"},
                        "ratio": round(dd["tok_s"] / cpp["tok_s"], 4) if cpp["tok_s"] else None,
                        "same_tokens": cpp["tokens"] == dd["tokens"],
                    }
                    keep(
                        both,
                        f"llama-server {cpp['tok_s']:.2f} tok/s "
                        f"(draft {cpp.get('draft_n')}/{cpp.get('draft_n_accepted')} {cpp.get('error', '')}), "
                        f"engine {dd['tok_s']:.2f} tok/s "
                        f"(draft {dd['draft_n']}/{dd['draft_n_accepted']}), ratio {both['ratio']}, "
                        f"same tokens {both['same_tokens']}",
                    )
    finally:
        s.close()
