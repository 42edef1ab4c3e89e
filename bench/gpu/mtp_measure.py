"""MTP measurements on a qwen35moe/qwen35 GGUF with a NextN block: draft, verify and rollback costs; engine vs server.

`mtp_costs` (measure.py mtpcosts OUT.json MODEL.gguf), at each KV depth (DD_MTP_CONTEXTS, default 2k/8k/16k/32k),
flash attention on, everything through the engine's own code (app.runtime.llama, app.speculative.mtp):
- the target's prefill, and the MTP context's catch-up over the same positions (the first proposal);
- the MTP draft at steady state: MtpSource.propose of n = 1..8 tokens after a rollback to the committed history
  (one (token, hidden state) pair to catch up, then n - 1 more single decodes), ms per call and per drafted token;
- verify batches b = 1..8 tokens with logits on every row and every row read, the hidden-state rows handed to the
  MTP source as the engine does, each followed by the engine's rollback when every drafted token is rejected:
  the target is created with n_rs_seq = the engine's snapshot window (8; DD_MTP_SNAPSHOTS), so Context.truncate
  drops the b - 1 drafted positions in place from llama.cpp's per-token recurrent snapshots (timed as rollback_ms;
  the history grows by the one kept token per verify);
- for comparison, the engine's old rollback (still its path beyond the snapshot window): the full sequence
  checkpoint saved before a verify and loaded after it (b = 1 and 4, 3 runs), and the size and cost of llama.cpp's
  partial-only checkpoint (LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: the recurrent state alone).
Every shape runs twice before it is timed (Vulkan builds pipelines lazily), then DD_REPS times (default 5); medians.

`mtp_bench` (measure.py mtpbench OUT.json MODEL.gguf LLAMA_SERVER): the engine's tok/s against the pinned
llama-server with `--spec-type draft-mtp` and the same n-max/p-min, on the same file and prompt token ids
(DD_MTP_BENCH_CONTEXTS, default 2048), greedy, DD_MAX_TOKENS (default 128) tokens, plain, MTP n2,p0 and n4,p0.
Every server prefills in one piece (SERVER_BASE_FLAGS). Before the first MTP setting, one probe reproduces the
earlier runs' exact flags (DD_MTP_REPRO_PROBE=1, recorded only); then each of MTP_SERVER_TRIES
(DD_MTP_SERVER_TRIES, ";"-separated) is probed in turn with a short request and DD_SERVER_PROBE_TIMEOUT_S (30 s);
the first that answers is used for every MTP setting, and a probe with no answer records what the server was doing.
For each setting a server is started, both sides warm up, then DD_MTP_BENCH_REPS (default 1) rounds run llama-server
and the engine interleaved (the order alternates), medians kept. A request with no answer within DD_SERVER_TIMEOUT_S
(120 s) is recorded as a timeout and ends that setting. Both sides report llama.cpp's predicted_per_second (tokens
after the prompt). Greedy tokens are compared with the engine's, the first difference judged by the engine's top-2
margin there (app.speculative.exactness); the CPU time the idle server used during each engine run is recorded,
and (DD_MTP_BENCH_ENGINE_ALONE=1) the engine's plain runs are repeated with no server alive, before and after.
DD_MTP_BENCH_SERVER=0 runs the engine alone, settings interleaved.
"""

from __future__ import annotations

import contextlib
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
    from app.engine.config import EngineConfig
    from app.runtime.llama import Context, ContextParams, Model, ModelParams
    from app.speculative.mtp import attach_mtp

    contexts = _env_ints("DD_MTP_CONTEXTS", "2048,8192,16384,32768")
    batches = _env_ints("DD_BATCHES", "1,2,3,4,5,6,7,8")
    depths = _env_ints("DD_MTP_DEPTHS", "1,2,3,4,5,6,7,8")
    reps = int(os.environ.get("DD_REPS", "5"))
    t_load = time.perf_counter()
    m = Model(path, ModelParams(NGL, load_mtp=True))
    load_s = time.perf_counter() - t_load
    # The engine's snapshot window (EngineConfig.recurrent_snapshots), so a rejected draft rolls back as it does there.
    n_rs_seq = int(os.environ.get("DD_MTP_SNAPSHOTS", EngineConfig.recurrent_snapshots))
    # Room for the measured verifies: each keeps one token (the engine's "every draft rejected" case).
    n_ctx = max(contexts) + 2 * len(batches) * (reps + 2) + max(batches) + 64
    cp = ContextParams(n_ctx=n_ctx, n_batch=512, n_threads=THREADS, flash_attn="on", n_rs_seq=n_rs_seq)
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
        "n_rs_seq": ctx.n_rs_seq,
        "load_s": round(load_s, 2),
        "contexts": {},
    }
    for c in contexts:
        ctx.clear()
        src.rollback(0)
        toks = [int(t) for t in rng.integers(1000, min(n_vocab - 1, 100000), size=c)]
        row = _context_row(ctx, src, toks, depths, batches, reps, rng)
        result["contexts"][str(c)] = row
        old = row["full_checkpoint"]
        print(
            f"mtpcosts {c}: prefill {row['prefill_ms']:.0f} ms, MTP catch-up {row['mtp_catchup_ms']:.0f} ms, "
            f"draft/token {row['draft_ms_per_token']}, verify {row['verify_ms']}, snapshot rollback "
            f"{row['rollback_ms']} ms; old path: checkpoint {old['bytes'] / 1e6:.0f} MB save {old['save_ms']} / "
            f"load {old['load_ms']} ms, verify after a load {old['verify_ms']}; partial "
            f"{row['partial_checkpoint_bytes'] / 1e6:.1f} MB {row['partial_save_ms']} / {row['partial_load_ms']} ms",
            flush=True,
        )
        Path(out).write_text(json.dumps(result, indent=1))  # after each context: a timeout keeps what was done
    src.close()
    ctx.close()
    m.close()


def _context_row(ctx: Any, src: Any, toks: list[int], depths: Any, batches: Any, reps: int, rng: Any) -> dict:  # type: ignore[type-arg]
    """One KV depth's figures (see the module docstring); the target holds `toks` (+ a few verified tokens) after."""
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

    def read_rows(batch: list[int]) -> float:
        t = time.perf_counter()
        ctx.decode(batch, logits_from=0)
        for i in range(len(batch)):
            ctx.logits(i)
        return (time.perf_counter() - t) * 1000

    rollback: dict[str, list[float]] = {}

    def snapshot_step(batch: list[int]) -> float:
        """A verify of [last] + (b - 1) drafted tokens, every draft rejected: the engine's rollback keeps [last]
        and drops the rest in place from the recurrent snapshots (Context.truncate), so the history grows by one."""
        n0 = len(ctx.tokens)
        ms = read_rows(batch)
        t = time.perf_counter()
        if not ctx.truncate(n0 + 1):
            raise RuntimeError(f"snapshot rollback of {len(batch) - 1} positions refused (n_rs_seq {ctx.n_rs_seq})")
        rollback.setdefault(str(len(batch)), []).append((time.perf_counter() - t) * 1000)
        src.rollback(n0 + 1)
        return ms

    verify: dict[str, float] = {}
    for b in batches:
        batch = [int(t) for t in rng.integers(1000, 30000, size=b)]
        verify[str(b)] = _median_ms(lambda batch=batch: snapshot_step(batch), reps)
    row["verify_ms"] = verify
    row["rollback_ms"] = {k: round(statistics.median(v), 4) for k, v in rollback.items()}
    row["full_checkpoint"] = _full_checkpoint_path(ctx, src, rng)
    pbytes, psave, pload = _partial_state_ms(ctx)
    row["partial_checkpoint_bytes"] = pbytes
    row["partial_save_ms"], row["partial_load_ms"] = round(psave, 3), round(pload, 3)
    return row


def _full_checkpoint_path(ctx: Any, src: Any, rng: Any) -> dict[str, Any]:
    """The engine's old rollback, for comparison: a whole sequence checkpoint saved before the verify and loaded
    after it (still its path for drafts deeper than the snapshot window). b = 1 and 4, 3 timed runs after a warm
    one; the verify is the one that follows the previous load, as it was in the engine."""
    verify: dict[str, float] = {}
    save: list[float] = []
    load: list[float] = []
    for b in (1, 4):
        batch = [int(t) for t in rng.integers(1000, 30000, size=b)]
        times = []
        for i in range(4):
            t = time.perf_counter()
            state = ctx.save_state()
            t1 = time.perf_counter()
            ctx.decode(batch, logits_from=0)
            for j in range(b):
                ctx.logits(j)
            t2 = time.perf_counter()
            ctx.load_state(state)
            src.rollback(len(ctx.tokens))
            t3 = time.perf_counter()
            if i:
                save.append((t1 - t) * 1000)
                load.append((t3 - t2) * 1000)
                times.append((t2 - t1) * 1000)
        verify[str(b)] = round(statistics.median(times), 4)
    return {
        "bytes": len(state[0]),
        "save_ms": round(statistics.median(save), 3),
        "load_ms": round(statistics.median(load), 3),
        "verify_ms": verify,
    }


# Every llama-server in mtpbench prefills a prompt in one piece, as the engine does. By default the pinned server
# decodes a hybrid model's last 4 prompt tokens (and those n_ubatch before them) as separate batches to take context
# checkpoints there; a Gated DeltaNet prefill split like that gives other logits (max |diff| 0.35 on the tiny
# reference model), which is why the greedy tokens differed from the engine's on every row (see the results).
SERVER_BASE_FLAGS = ("--ctx-checkpoints", "0")
# Tried in order for the MTP settings until one answers a probe; the default draft-mtp path gave no answer on the
# H200 (its draft sampling runs on the backend there: top-k over the whole vocabulary, off with the flag below).
MTP_SERVER_TRIES = ("", "--no-spec-draft-backend-sampling")


def _hang_snapshot(srv: Any) -> dict[str, Any]:
    """What a server that gave no answer is doing: its CPU use over 2 s, its threads' states, the GPU's use, its
    log's tail (a busy loop, a wait on the device, or a slow step)."""
    import subprocess

    snap: dict[str, Any] = {}
    pid = srv.pid
    try:
        a, t = _cpu_s(pid), time.perf_counter()
        time.sleep(2.0)
        snap["cpu_cores_busy"] = round((_cpu_s(pid) - a) / (time.perf_counter() - t), 2)
        states: dict[str, int] = {}
        for task in Path(f"/proc/{pid}/task").iterdir():
            st = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            states[st] = states.get(st, 0) + 1
        snap["thread_states"] = states
    except (OSError, ValueError, IndexError, TypeError) as e:
        snap["proc_error"] = str(e)
    try:
        q = subprocess.run(
            ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        snap["gpu"] = q.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    snap["log_tail"] = srv.logs(40).splitlines()[-40:]
    return snap


def mtp_bench(out: str, path: str, server: str) -> None:
    from app.calibration.runner import build_messages, corpus_text
    from app.engine.config import EngineConfig
    from app.engine.session import Session
    from app.engine.types import GenerationRequest
    from app.runtime.llama_server import ExternalServer, ServerSpec
    from app.speculative.exactness import compare
    from app.speculative.settings import PLAIN, SpecSettings

    contexts = _env_ints("DD_MTP_BENCH_CONTEXTS", "2048")
    n_predict = int(os.environ.get("DD_MAX_TOKENS", "128"))
    reps = int(os.environ.get("DD_MTP_BENCH_REPS", "1"))
    n_ctx = max(contexts) + n_predict + 256
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
    server_timeout = float(os.environ.get("DD_SERVER_TIMEOUT_S", "120"))
    probe_timeout = float(os.environ.get("DD_SERVER_PROBE_TIMEOUT_S", "30"))
    base_flags = tuple(os.environ.get("DD_SERVER_BASE_FLAGS", " ".join(SERVER_BASE_FLAGS)).split())
    tries = [tuple(t.split()) for t in os.environ.get("DD_MTP_SERVER_TRIES", ";".join(MTP_SERVER_TRIES)).split(";")]
    report: dict[str, Any] = {
        "model": os.path.basename(path),
        "server_base_flags": base_flags,
        "probes": [],
        "runs": [],
    }

    def save() -> None:
        Path(out).write_text(json.dumps(report, indent=1))  # rewritten after each record: a later hang loses nothing

    def ours(msgs: Any, st: SpecSettings, margins: bool = False) -> dict[str, Any]:
        return engine_run(s, msgs, st, n_predict, margins)

    def server_spec(flags: tuple[str, ...], base: tuple[str, ...] = base_flags) -> ServerSpec:
        return ServerSpec(binary=server, **common, extra_args=base + flags, start_timeout_s=300.0)

    def answering_flags(st: SpecSettings, spec_flags: tuple[str, ...]) -> tuple[str, ...] | None:
        """The first of `tries` under which a server answers a short probe (64 prompt tokens, 16 tokens) in time.
        Probes log verbosely (-v: where a hang sits); the timed server is started again without it."""
        for i, extra in enumerate(tries):
            flags = spec_flags + extra
            # First (DD_MTP_REPRO_PROBE=1), the flags of the earlier runs exactly, without the base flags: whether the
            # earlier no-answer reproduces, and so which of the changes below it is that lets the server answer.
            repro = i == 0 and os.environ.get("DD_MTP_REPRO_PROBE", "1") == "1"
            for base in ((), base_flags) if repro else (base_flags,):
                with ExternalServer(server_spec((*flags, "-v"), base)) as srv:
                    r = server_completion(srv, prompts[0][1][:64], 16, probe_timeout)
                report["probes"].append({"setting": st.label(), "flags": base + flags, **_no_tokens(r)})
                save()
                outcome = r.get("error") or f"{r['tok_s']:.2f} tok/s"
                print(f"mtpbench probe {st.label()} {' '.join(base + flags)}: {outcome}", flush=True)
            if "error" not in r:
                return flags
        return None

    if os.environ.get("DD_MTP_BENCH_SERVER", "1") == "0":  # the engine alone: settings interleaved per context
        try:
            for msgs, tokens in prompts:
                for st in settings:
                    ours(msgs, st)  # warm-up
                for st in settings:
                    dd = _no_tokens(ours(msgs, st)) | {"margins": None}
                    report["runs"].append({"context": len(tokens), "setting": st.label(), "engine": dd})
                    save()
                    print(f"mtpbench {len(tokens)} {st.label()}: engine {dd['tok_s']:.2f} tok/s", flush=True)
        finally:
            s.close()
        return

    def engine_alone(when: str) -> None:
        """Plain decoding with no llama-server process alive (before the first and after the last), to compare
        with the engine's plain runs beside an idle server."""
        for msgs, tokens in prompts:
            ours(msgs, PLAIN)  # warm-up
            runs = [_no_tokens(ours(msgs, PLAIN)) | {"margins": None} for _ in range(2)]
            report.setdefault("engine_alone", []).append(
                {"when": when, "context": len(tokens), "tok_s": _median_of(runs, "tok_s"), "runs": runs}
            )
            save()
            print(f"mtpbench {len(tokens)} engine alone ({when}): {[r['tok_s'] for r in runs]} tok/s", flush=True)

    alone = os.environ.get("DD_MTP_BENCH_ENGINE_ALONE", "1") == "1"
    found: tuple[str, ...] | None = None
    try:
        if alone:
            engine_alone("before any server")
        for st in settings:
            flags: tuple[str, ...] = ()
            if st.source == "mtp":
                flags = ("--spec-type", "draft-mtp", "--spec-draft-n-max", str(st.n_max))
                flags += ("--spec-draft-n-min", "0", "--spec-draft-p-min", f"{st.p_min:g}")
                if found is None:
                    got = answering_flags(st, flags)
                    if got is None:
                        print(f"mtpbench {st.label()}: no server flags answered the probe", flush=True)
                        report["runs"].append({"setting": st.label(), "llama_server": {"error": "no flags answered"}})
                        save()
                        continue
                    found = got[len(flags) :]
                flags += found
            with ExternalServer(server_spec(flags)) as srv:
                for msgs, tokens in prompts:
                    warm = ours(msgs, st, margins=True)  # warm-up of both sides; the engine's margins for the check
                    cpp: dict[str, Any] = server_completion(srv, tokens[:64], 16, server_timeout)
                    dd_runs: list[dict[str, Any]] = []
                    cpp_runs: list[dict[str, Any]] = []
                    for i in range(reps if "error" not in cpp else 0):
                        for side in ("server", "engine") if i % 2 == 0 else ("engine", "server"):  # interleaved
                            if side == "engine":
                                cpu0 = _cpu_s(srv.pid)
                                dd_runs.append(ours(msgs, st))
                                # an idle server should use no CPU while the engine runs (16 threads each, 16 cores)
                                dd_runs[-1]["server_cpu_s_meanwhile"] = round(_cpu_s(srv.pid) - cpu0, 3)
                            elif "error" not in (cpp := server_completion(srv, tokens, n_predict, server_timeout)):
                                cpp_runs.append(cpp)
                        if "error" in cpp:
                            break
                    keep_run(report, st, tokens, warm, cpp, cpp_runs, dd_runs, compare, base_flags + flags)
                    save()
                    if "error" in cpp:
                        break  # the server is still busy with the request: the next would queue behind it
        if alone:
            engine_alone("after the last server")
    finally:
        s.close()


def server_completion(srv: Any, tokens: list[int], n: int, timeout: float) -> dict[str, Any]:
    """One /completion; a request with no answer within `timeout` is recorded as such, never waited on."""
    body = {"prompt": tokens, "n_predict": n, "temperature": 0, "cache_prompt": False, "return_tokens": True}
    t0 = time.perf_counter()
    try:
        status, r = srv.request("POST", "/completion", body, timeout=timeout)
    except TimeoutError:
        return {"tok_s": 0.0, "error": f"no answer within {timeout:g} s", "hang": _hang_snapshot(srv)}
    t = r["timings"]
    return {
        "tok_s": t["predicted_per_second"],
        "predicted_n": t["predicted_n"],
        "prompt_ms": t["prompt_ms"],
        "predicted_ms": t["predicted_ms"],
        "wall_s": round(time.perf_counter() - t0, 3),
        "draft_n": t.get("draft_n", 0),
        "draft_n_accepted": t.get("draft_n_accepted", 0),
        "tokens": r["tokens"],
    }


def engine_run(s: Any, msgs: Any, st: Any, n_predict: int, margins: bool = False) -> dict[str, Any]:
    """One greedy request through a Session, prompt cache off: llama.cpp's timings, the tokens (and margins)."""
    from app.engine.types import DoneEvent, GenerationRequest, StepEvent
    from app.runtime.sampling import SamplingParams

    req = GenerationRequest(
        messages=msgs,
        max_tokens=n_predict,
        sampling=SamplingParams(temperature=0.0),
        speculative=st,
        cache_prompt=False,
        collect_margins=margins,
    )
    events = list(s.generate(req))
    sm = [e for e in events if isinstance(e, DoneEvent)][0].summary
    t = sm.timings
    steps = [e for e in events if isinstance(e, StepEvent)]
    return {
        "tok_s": t.predicted_per_second,
        "predicted_n": t.predicted_n,
        "draft_n": t.draft_n,
        "draft_n_accepted": t.draft_n_accepted,
        "tokens": list(sm.tokens),
        "margins": list(sm.margins),
        "steps": step_profile(steps, t.predicted_ms),
    }


def step_profile(steps: list[Any], predicted_ms: float) -> dict[str, Any]:
    """Where a run's time went, to tell a uniformly slow run from one with stalls: the verify (target decode) time
    per step as quantiles, its share of the generation time, and the longest gaps between the ends of two steps."""
    if not steps:
        return {}
    verify = sorted(e.verify_ms for e in steps)
    gaps = sorted((b.t - a.t) * 1000.0 for a, b in zip(steps, steps[1:], strict=False))

    def q(xs: list[float], f: float) -> float:
        return round(xs[min(len(xs) - 1, int(f * len(xs)))], 3) if xs else 0.0

    return {
        "n": len(steps),
        "verify_ms_p10_p50_p90_max": [q(verify, 0.1), q(verify, 0.5), q(verify, 0.9), round(verify[-1], 3)],
        "verify_share": round(sum(verify) / predicted_ms, 4) if predicted_ms else None,
        "gap_ms_p50_p90_max": [q(gaps, 0.5), q(gaps, 0.9), round(gaps[-1], 3) if gaps else 0.0],
    }


def _cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) a process has used so far; 0 when it cannot be read."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _no_tokens(r: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in r.items() if k != "tokens"}


def _median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    return round(statistics.median(r[key] for r in runs), 3) if runs else None


def keep_run(
    report: dict[str, Any],
    st: Any,
    tokens: list[int],
    warm: dict[str, Any],
    cpp: dict[str, Any],
    cpp_runs: list[dict[str, Any]],
    dd_runs: list[dict[str, Any]],
    compare: Any,
    flags: tuple[str, ...],
) -> None:
    """Record one (context, setting): medians of both sides, their ratio, and whether the greedy tokens agree (the
    first difference judged by the engine's own top-2 margin there: a near-tie, or not)."""
    cpp_tok = _median_of(cpp_runs, "tok_s")
    dd_tok = _median_of(dd_runs, "tok_s")
    row: dict[str, Any] = {
        "context": len(tokens),
        "setting": st.label(),
        "server_flags": flags,
        "llama_server": {"tok_s": cpp_tok, "runs": [_no_tokens(r) for r in cpp_runs]},
        "engine": {"tok_s": dd_tok, "runs": [_no_tokens(r) | {"margins": None} for r in dd_runs]},
        "ratio": round(dd_tok / cpp_tok, 4) if cpp_tok and dd_tok else None,
    }
    if "error" in cpp:
        row["llama_server"]["error"] = cpp["error"]
        row["llama_server"]["hang"] = cpp.get("hang")
    if cpp_runs:
        verdict = compare(warm["tokens"], warm["margins"], cpp_runs[0]["tokens"])
        row["same_tokens"] = verdict.identical
        row["tokens_check"] = verdict.describe()
    report["runs"].append(row)
    d = dd_runs[0] if dd_runs else {}
    c = cpp_runs[0] if cpp_runs else {}
    print(
        f"mtpbench {row['context']} {row['setting']}: llama-server {cpp_tok} tok/s "
        f"(draft {c.get('draft_n')}/{c.get('draft_n_accepted')}) {cpp.get('error', '')}, engine {dd_tok} tok/s "
        f"(draft {d.get('draft_n')}/{d.get('draft_n_accepted')}), ratio {row['ratio']}, "
        f"tokens {row.get('tokens_check')}",
        flush=True,
    )


# Engine load variants (mtpplain): which MTP-era load choice costs decoding its speed. "default" is what `dynadraft`
# loads for a GGUF with an MTP head: the head, hidden states handed over on every decode, and recurrent-state
# snapshots as deep as the draft cap (16). The pinned llama.cpp writes every snapshot slot's conv state on every decode
# (models/delta-net-base.cpp: n_rs_seq + 1 copies per Gated DeltaNet layer), so the count may cost plain decoding.
PLAIN_VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "snap4": {"recurrent_snapshots": 4},
    "snap16": {"recurrent_snapshots": 16},
    "no_snapshots": {"recurrent_snapshots": 0},  # MTP settings then checkpoint every step: slow, keep them out
    "no_mtp": {"mtp": "off"},
    "bare": {"mtp": "off", "recurrent_snapshots": 0},  # as llama-server loads a model for plain decoding
    # Thread counts (the default load otherwise): with every layer on the GPU each decode still runs a small CPU
    # graph (the token embedding lookup), so a thread team that spins beside the Python thread may cost it.
    "t16": {"n_threads": 16},
    "t8": {"n_threads": 8},
    "t4": {"n_threads": 4},
    "t2": {"n_threads": 2},
    "t1": {"n_threads": 1},
}
CPU_STAT = Path("/sys/fs/cgroup/cpu.stat")


def _throttled_us() -> int:
    """Microseconds this cgroup has been held back by its CPU quota so far (0 where there is no cgroup v2 quota)."""
    try:
        stat = dict(line.split() for line in CPU_STAT.read_text().splitlines())
        return int(stat.get("throttled_usec", 0))
    except (OSError, ValueError):
        return 0


def timed_run(fn: Any, pids: tuple[int | None, ...]) -> dict[str, Any]:
    """One run with the wall-clock span (to line up with a GPU clock log), the quota throttling and the CPU seconds
    the engine process and every llama-server used meanwhile: what else was busy while a run was slow."""
    thr, cpu, t0 = _throttled_us(), [_cpu_s(p) for p in pids], time.time()
    r = fn()
    r["span"] = [round(t0, 3), round(time.time(), 3)]
    r["throttled_ms"] = round((_throttled_us() - thr) / 1000.0, 1)
    r["cpu_s"] = [round(_cpu_s(p) - c, 3) for p, c in zip(pids, cpu, strict=True)]
    return r


def mtp_plain(out: str, path: str, server: str) -> None:
    """Each engine variant (all loaded at once) with each setting it can run (DD_PLAIN_SETTINGS: off, MTP n2/n4) and
    llama-server plain (one-piece prefill): DD_REPS rounds interleaved per context (the order rotates each round),
    llama.cpp's predicted_per_second on both sides, greedy, prompt cache off. Each engine run also keeps its
    step_profile, to tell a uniformly slow run from one with stalls (the engine's plain runs were bimodal on the
    H200 while llama-server's were not)."""
    from app.calibration.runner import build_messages, corpus_text
    from app.engine.config import EngineConfig
    from app.engine.session import Session
    from app.engine.types import GenerationRequest
    from app.runtime.llama_server import ExternalServer, ServerSpec
    from app.runtime.threads import default_threads, resolve_threads
    from app.speculative.settings import PLAIN, SpecSettings

    contexts = _env_ints("DD_MTP_BENCH_CONTEXTS", "2048,8192")
    n_predict = int(os.environ.get("DD_MAX_TOKENS", "128"))
    reps = int(os.environ.get("DD_REPS", "3"))
    common: dict[str, Any] = {"model": path, "n_ctx": max(contexts) + n_predict + 256, "n_batch": 512}
    common |= {"n_threads": THREADS, "n_gpu_layers": NGL, "flash_attn": "on"}
    names = os.environ.get("DD_PLAIN_VARIANTS", ",".join(PLAIN_VARIANTS)).split(",")
    named = {"off": PLAIN, "n2": SpecSettings("mtp", 2, 0, 0.0), "n4": SpecSettings("mtp", 4, 0, 0.0)}
    settings = [named[k] for k in os.environ.get("DD_PLAIN_SETTINGS", "off,n2,n4").split(",")]
    sessions = {n: Session(EngineConfig(**(common | PLAIN_VARIANTS[n]), dynamic_draft=False)) for n in names}
    report: dict[str, Any] = {"model": os.path.basename(path), "variants": {n: PLAIN_VARIANTS[n] for n in names}}
    report["granted"] = {
        n: {"n_rs_seq": s.ctx.n_rs_seq, "mtp": "mtp" not in s.missing, "n_threads": s.ctx.n_threads}
        for n, s in sessions.items()
    }
    report["default_threads"] = default_threads()
    report["rows"] = []
    first = next(iter(sessions.values()))
    # One llama-server per thread count in DD_SERVER_THREADS (0: the default, as the engine's).
    server_threads = _env_ints("DD_SERVER_THREADS", str(THREADS))
    specs = {
        t: ServerSpec(binary=server, **(common | {"n_threads": t}), extra_args=SERVER_BASE_FLAGS, start_timeout_s=300.0)
        for t in server_threads
    }

    def runnable(s: Any, st: Any) -> bool:
        return st.source == "none" or ("mtp" not in s.missing and st.n_max <= s.config.draft_n_max_cap)

    try:
        with contextlib.ExitStack() as stack:
            servers = {t: stack.enter_context(ExternalServer(sp)) for t, sp in specs.items()}
            pids = (os.getpid(), *(srv.pid for srv in servers.values()))
            for c in contexts:
                msgs, _ = build_messages(first, c, corpus_text())
                tokens = first.format_prompt(GenerationRequest(messages=msgs, max_tokens=n_predict))

                def engine(s: Any, st: Any, msgs: Any = msgs) -> dict[str, Any]:
                    r = engine_run(s, msgs, st, n_predict)
                    return {k: r[k] for k in ("tok_s", "draft_n", "draft_n_accepted", "steps")}

                def server_run(srv: Any, tokens: list[int] = tokens) -> dict[str, Any]:
                    return _no_tokens(server_completion(srv, tokens, n_predict, 120.0))

                sides: dict[str, Any] = {
                    f"{n} {st.label()}": (lambda s=s, st=st: engine(s, st))
                    for n, s in sessions.items()
                    for st in settings
                    if runnable(s, st)
                }
                for th, srv in servers.items():
                    sides[f"llama-server t{resolve_threads(th)} off"] = lambda srv=srv: server_run(srv)
                order = list(sides)
                runs: dict[str, list[dict[str, Any]]] = {k: [] for k in order}
                for k in order:
                    sides[k]()  # warm-up
                for i in range(reps):
                    for k in order[i % len(order) :] + order[: i % len(order)]:
                        runs[k].append(timed_run(sides[k], pids))
                median = {k: statistics.median(r["tok_s"] for r in v) for k, v in runs.items()}
                report["rows"].append({"context": len(tokens), "runs": runs, "median": median})
                Path(out).write_text(json.dumps(report, indent=1))
                print(f"mtpplain {len(tokens)}: " + ", ".join(f"{k} {v:.1f}" for k, v in median.items()), flush=True)
    finally:
        for s in sessions.values():
            s.close()
