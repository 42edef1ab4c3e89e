"""Calibration on an external llama-server: every setting measured through the server itself, the table kept per binary.

A build that applies `speculative.n_max/n_min/p_min` per request (its /props lists them, and a probe request's
draft count follows them) is measured on one running server. A build that ignores them is restarted with each
setting's start-time flags: slower (a model load per setting, and each context prefilled again after it), which the
progress text and the ETA say. Prompt lookup is the build's `ngram-simple` drafting, a start-time flag in both
cases. The loop runs setting by setting (so each restart serves every context), plain decoding first: it is the
reference every other run is checked against (app.speculative.exactness) and the baseline every range needs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Any

from app.calibration.runner import (
    FIXED_BASELINE,
    CalibrationCancelled,
    Plan,
    Progress,
    Result,
    _run_once,
    build_messages_with,
    candidates,
    corpus_text,
    counted,
    plan_for,
)
from app.engine.external import ExternalSession
from app.engine.external_policy import external_fingerprint, external_store
from app.engine.types import EngineError, GenerationSummary
from app.policy.report import comparison_rows, to_csv, to_markdown
from app.policy.table import Measurement, build_rows, new_table, ranges_from_points
from app.runtime.llama_server import SPECULATIVE_FIELDS
from app.speculative.exactness import compare
from app.speculative.registry import POOL
from app.speculative.settings import SpecSettings

PROBE_TOKENS = 24
PROBE_MESSAGES = ({"role": "user", "content": "Count from one to twenty in words."},)


class ServerVocab:
    """Tokenize and detokenize through the server's own /tokenize and /detokenize (what build_messages needs)."""

    def __init__(self, session: ExternalSession) -> None:
        self.session = session

    def tokenize(self, text: str, add_special: bool, parse_special: bool = True) -> list[int]:
        body = {"content": text, "add_special": add_special, "parse_special": parse_special}
        return [int(t) for t in self.session.server.request("POST", "/tokenize", body)[1]["tokens"]]

    def detokenize(self, tokens: list[int]) -> str:
        return str(self.session.server.request("POST", "/detokenize", {"tokens": list(tokens)})[1]["content"])


def external_candidates(sources: Collection[str], mode: str) -> tuple[SpecSettings, ...]:
    """The bundled grid for these sources as a llama-server can run it: no pool, no cost stop (it stops drafts by
    p_min only) and no adaptive length (its depth is fixed per setting); lookup only where the build has n-gram
    drafting (the runtime's sources say)."""
    out: list[SpecSettings] = []
    for c in candidates(sources, mode):
        c = c.with_(adaptive=False)
        if c.source != POOL and not c.cost_stop and c not in out:
            out.append(c)
    return tuple(out)


def external_plan(session: ExternalSession, mode: str = "quick", budget_min: float | None = None) -> Plan:
    grid = external_candidates(session.capabilities.sources, mode)
    # Context-only: the server sweep has no class sections (its tables have no class rows; every class falls back).
    return replace(plan_for(session.n_ctx, grid, mode, budget_min), classes=())


def honours_per_request(session: ExternalSession) -> bool:
    """Whether the running build applies per-request draft fields: /props lists them AND the draft count of one
    greedy request changes with speculative.n_max (1 against the start depth, p_min 0 in both). If ignored, both
    runs use the start flags and, being greedy, draft exactly the same."""
    if not set(SPECULATIVE_FIELDS) <= set(session.features.speculative):
        return False
    start = session.start_settings
    if start.is_plain or start.source != "draft" or start.n_max < 2:
        return True  # nothing to probe against: trust /props
    shallow, deep = (start.with_(n_max=n, n_min=0, p_min=0.0) for n in (1, start.n_max))
    a, b = (_run_once(session, PROBE_MESSAGES, s, PROBE_TOKENS, None) for s in (shallow, deep))
    return a.timings.draft_n != b.timings.draft_n


@dataclass(frozen=True)
class _Group:
    """Settings measured on one server start: `start` is its start-time draft setting."""

    start: SpecSettings
    settings: tuple[SpecSettings, ...]


def _groups(grid: tuple[SpecSettings, ...], per_request: bool, base: SpecSettings) -> list[_Group]:
    if not per_request:
        return [_Group(s, (s,)) for s in grid]
    # Per request: plain and every draft setting on one server with the draft allocation; lookup needs its flags.
    shared = tuple(s for s in grid if s.source != "lookup")
    return [_Group(base, shared)] + [_Group(s, (s,)) for s in grid if s.source == "lookup"]


def _safe(reference: GenerationSummary, out: GenerationSummary) -> tuple[bool, str]:
    """Safe: the whole output equals plain decoding's (tokens, length, finish), or departs only at a near-tie."""
    verdict = compare(reference.tokens, reference.margins, out.tokens)
    same_end = len(out.tokens) == len(reference.tokens) and out.finish_reason == reference.finish_reason
    ok = (verdict.identical and same_end) or (not verdict.identical and verdict.acceptable)
    if verdict.identical and not same_end:
        return False, f"same tokens but {len(out.tokens)} vs {len(reference.tokens)} ({out.finish_reason})"
    return ok, verdict.describe()


def run_external_calibration(
    session: ExternalSession,
    plan: Plan,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    dry_run: bool = False,
) -> Result:
    """The sweep on the engine thread's ExternalSession; saves the table (unless dry_run) to this binary's store."""
    t_start = time.perf_counter()
    per_request = honours_per_request(session)
    groups = _groups(plan.candidates, per_request, session.base_settings)
    n_runs = sum(len(g.settings) for g in groups) * len(plan.contexts) * (plan.repeats + 1)  # +1: the warm-up
    restarts = 0 if per_request and len(groups) == 1 else len(groups)
    how = (
        "one server, settings sent per request"
        if per_request
        else "this build ignores per-request draft fields: the server restarts for every setting (slower)"
    )
    done = 0
    run_s: list[float] = []
    restart_s: list[float] = []
    samples: dict[tuple[int, SpecSettings], list[float]] = {}
    safe: dict[tuple[int, SpecSettings], bool] = {}
    reference: dict[int, GenerationSummary] = {}
    unsafe: list[str] = []
    skipped: list[str] = []

    def eta(groups_left: int) -> float:
        mean_run = sum(run_s) / len(run_s) if run_s else 0.0
        mean_restart = sum(restart_s) / len(restart_s) if restart_s else 0.0
        return mean_run * max(0, n_runs - done) + (mean_restart * groups_left if restarts else 0.0)

    def tick(message: str, groups_left: int) -> None:
        if progress is not None:
            progress(Progress(done, n_runs, eta(groups_left), message))

    def check_cancel() -> None:
        if cancel is not None and cancel.is_set():
            raise CalibrationCancelled()

    vocab = ServerVocab(session)
    corpus = plan.corpus or corpus_text()
    prompts = {c: build_messages_with(vocab, session.format_prompt, c, corpus) for c in plan.contexts}
    try:
        for gi, group in enumerate(groups):
            check_cancel()
            left = len(groups) - gi
            if plan.budget_s is not None and gi > 0:
                per_group = (time.perf_counter() - t_start) / gi
                if time.perf_counter() - t_start + per_group > plan.budget_s:
                    skipped += [s.label() for g in groups[gi:] for s in g.settings]
                    break
            if group.start != session.start_settings:
                tick(f"restarting llama-server for {group.start.label()} ({how})", left)
                t = time.perf_counter()
                session.restart(group.start)
                restart_s.append(time.perf_counter() - t)
            for c in plan.contexts:
                msgs, got = prompts[c]
                for setting in group.settings:
                    check_cancel()
                    tick(f"context {got} tokens: {setting.label()} ({how})", left)
                    t = time.perf_counter()
                    try:
                        # Warm-up (prefills this server's cache), then the measured repeats re-decode one token.
                        _run_once(session, msgs, setting, 1, cancel)
                        outs = [
                            _run_once(session, msgs, setting, plan.gen_tokens, cancel, margins=setting.is_plain)
                            for _ in range(plan.repeats)
                        ]
                    except EngineError as e:
                        unsafe.append(f"{got}: {setting.label()}: failed: {e}")
                        samples[(c, setting)], safe[(c, setting)] = [], False
                        continue
                    finally:
                        run_s.append((time.perf_counter() - t) / (plan.repeats + 1))
                        done += plan.repeats + 1
                    samples[(c, setting)] = [o.timings.predicted_per_second for o in outs]
                    if setting.is_plain:
                        reference[c], safe[(c, setting)] = outs[0], True
                        continue
                    if c not in reference:  # plain decoding failed here: nothing to check against
                        safe[(c, setting)] = False
                        continue
                    verdicts = [_safe(reference[c], o) for o in outs]
                    safe[(c, setting)] = all(ok for ok, _ in verdicts)
                    unsafe += [f"{got}: {setting.label()}: {why}" for ok, why in verdicts if not ok][:1]
    except BaseException:
        # Back to what the configuration says the server runs (a cancel keeps the old table, and its setting).
        session.reload_policy()
        raise

    lengths = {c: prompts[c][1] for c in plan.contexts}
    ranges = dict(zip(plan.contexts, ranges_from_points(list(lengths.values())), strict=True))
    measurements = [
        Measurement(ranges[c][0], ranges[c][1], s, tuple(v), safe.get((c, s), False), lengths[c])
        for (c, s), v in samples.items()
    ]
    mode = "per request" if per_request else "one server start per setting"
    table = new_table(
        external_fingerprint(session),
        build_rows(measurements),
        notes=f"llama-server ({mode}): {counted(len(plan.contexts), 'context')}, {plan.gen_tokens} generated tokens, "
        f"{counted(plan.repeats, 'repeat')}, greedy",
    )
    rows = comparison_rows(table, fixed=FIXED_BASELINE if session.config.draft is not None else None)
    saved = external_store(session).save(table, activate=True) if not dry_run else None
    session.reload_policy()  # back to what the (new) table says the server runs: may restart it
    return Result(
        table=table,
        markdown=to_markdown(rows),
        csv=to_csv(rows),
        wall_s=time.perf_counter() - t_start,
        saved_to=saved,
        skipped_contexts=[],
        unsafe=unsafe + [f"not measured within the budget: {', '.join(skipped)}"] * bool(skipped),
    )


def calibrate_session(
    session: Any,
    mode: str = "quick",
    budget_min: float | None = None,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    **plan_changes: Any,
) -> Result:
    """Calibrate whichever runtime the engine thread holds: the bundled sweep, or this one on a llama-server."""
    from app.calibration.runner import default_plan, plan_with, run_calibration

    if isinstance(session, ExternalSession):
        plan = plan_with(external_plan(session, mode, budget_min), **plan_changes)
        return run_external_calibration(session, plan, progress=progress, cancel=cancel)
    plan = plan_with(default_plan(session, mode, budget_min), **plan_changes)
    return run_calibration(session, plan, progress=progress, cancel=cancel)
