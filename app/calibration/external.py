"""Calibration on an external llama-server: every setting measured through the server itself, the table kept per binary.

A build that applies `speculative.n_max/n_min/p_min` per request (its /props lists them, and a probe request's
draft count follows them) is measured on one running server. A build that ignores them is restarted with each
setting's start-time flags: slower (a model load per setting, and each context prefilled again after it), which the
progress text and the ETA say. Prompt lookup (the build's `ngram-simple`) and the model's MTP head (`draft-mtp`) are
the build's own --spec-type drafting, start-time flags in both cases: each of their settings gets its own start.
The loop runs setting by setting (so each restart serves every context), plain decoding first: it is the reference
every other run is checked against (app.speculative.exactness) and the baseline every range needs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

from app.calibration.runner import (
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
    report_baseline,
)
from app.engine.external_policy import OWN_SPEC_TYPES
from app.engine.runtime import Runtime, ServerStarts, SweepAccess
from app.engine.types import EngineError, GenerationSummary
from app.policy.report import comparison_rows
from app.policy.table import Measurement, build_rows, new_table, ranges_from_points
from app.speculative.exactness import compare
from app.speculative.registry import POOL
from app.speculative.settings import SpecSettings

PROBE_TOKENS = 24
# The warm-up generates two tokens, not one: after one, the server's cache ends exactly at the prompt, and reusing
# such a cache aborts the ROCmFPx fork (c14872f) on a hybrid model (Qwen3.5/3.6, the MTP models), so the runtime
# sends that request without the cache (ExternalSession._cache_prompt) and the warm-up's prefill would be wasted.
# With a second token decoded the cache reaches past the prompt and the measured runs reuse it.
WARM_UP_TOKENS = 2
PROBE_MESSAGES = ({"role": "user", "content": "Count from one to twenty in words."},)


def external_candidates(sources: Collection[str], mode: str) -> tuple[SpecSettings, ...]:
    """The bundled grid for these sources as a llama-server can run it: no pool, no cost stop (it stops drafts by
    p_min only) and no adaptive length (its depth is fixed per setting: the registry's adaptive MTP row runs at its
    depth cap); lookup and the MTP head only where the build and the model have them (the runtime's sources say)."""
    out: list[SpecSettings] = []
    for c in candidates(sources, mode):
        c = c.with_(adaptive=False)
        if c.source != POOL and not c.cost_stop and c not in out:
            out.append(c)
    return tuple(out)


def external_plan(runtime: Runtime, mode: str = "quick", budget_min: float | None = None) -> Plan:
    grid = external_candidates(runtime.capabilities.sources, mode)
    # Context-only: the server sweep has no class sections (its tables have no class rows; every class falls back).
    return replace(plan_for(runtime.n_ctx, grid, mode, budget_min), classes=())


def honours_per_request(runtime: Runtime, starts: ServerStarts) -> bool:
    """Whether the running build applies per-request draft fields: /props lists them AND the draft count of one
    greedy request changes with speculative.n_max (1 against the start depth, p_min 0 in both). If ignored, both
    runs use the start flags and, being greedy, draft exactly the same."""
    if not starts.lists_per_request_fields():
        return False
    start = starts.start_settings
    if start.is_plain or start.source not in ("draft", "mtp") or start.n_max < 2:
        return True  # nothing to probe against: trust /props
    shallow, deep = (start.with_(n_max=n, n_min=0, p_min=0.0) for n in (1, start.n_max))
    a, b = (_run_once(runtime, PROBE_MESSAGES, s, PROBE_TOKENS, None) for s in (shallow, deep))
    return a.timings.draft_n != b.timings.draft_n


@dataclass(frozen=True)
class _Group:
    """Settings measured on one server start: `start` is its start-time draft setting."""

    start: SpecSettings
    settings: tuple[SpecSettings, ...]


def _groups(grid: tuple[SpecSettings, ...], per_request: bool, base: SpecSettings) -> list[_Group]:
    if not per_request:
        return [_Group(s, (s,)) for s in grid]
    # Per request: plain and every draft-model setting on one server with the draft allocation; the build's own
    # drafting (lookup, the MTP head) needs its own flags, whose depth no request can exceed.
    shared = tuple(s for s in grid if s.source not in OWN_SPEC_TYPES)
    return [_Group(base, shared)] + [_Group(s, (s,)) for s in grid if s.source in OWN_SPEC_TYPES]


def _safe(reference: GenerationSummary, out: GenerationSummary) -> tuple[bool, str]:
    """Safe: the whole output equals plain decoding's (tokens, length, finish), or departs only at a near-tie."""
    verdict = compare(reference.tokens, reference.margins, out.tokens)
    same_end = len(out.tokens) == len(reference.tokens) and out.finish_reason == reference.finish_reason
    ok = (verdict.identical and same_end) or (not verdict.identical and verdict.acceptable)
    if verdict.identical and not same_end:
        return False, f"same tokens but {len(out.tokens)} vs {len(reference.tokens)} ({out.finish_reason})"
    return ok, verdict.describe()


def run_external_calibration(
    runtime: Runtime,
    plan: Plan,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    dry_run: bool = False,
    access: SweepAccess | None = None,
) -> Result:
    """The sweep on a runtime whose draft settings are start flags (an external llama-server), on the engine thread:
    plan -> sweep (restarting it where the build needs) -> build the table -> save it to this binary's store."""
    access = access or runtime.sweep_access()
    if access.starts is None:
        raise EngineError("this runtime takes every setting per request: app.calibration.runner measures it")
    sweep = ServerSweep(runtime, access.starts, plan, progress, cancel)
    try:
        skipped = sweep.run()
    except BaseException:
        # Back to what the configuration says the server runs (a cancel keeps the old table, and its setting).
        runtime.reload_policy()
        raise
    mode = "per request" if sweep.per_request else "one server start per setting"
    table = new_table(
        access.fingerprint,
        build_rows(sweep.measurements()),
        notes=f"llama-server ({mode}): {counted(len(plan.contexts), 'context')}, {plan.gen_tokens} generated tokens, "
        f"{counted(plan.repeats, 'repeat')}, greedy",
    )
    rows = comparison_rows(table, fixed=report_baseline(table))
    saved = access.store.save(table, activate=True) if not dry_run else None
    runtime.reload_policy()  # back to what the (new) table says the server runs: may restart it
    return Result.of_sweep(
        table,
        rows,
        sweep.t_start,
        saved,
        unsafe=sweep.unsafe + [f"not measured within the budget: {', '.join(skipped)}"] * bool(skipped),
    )


class ServerSweep:
    """The server sweep's state: setting by setting (so each restart serves every context), plain decoding first."""

    def __init__(
        self,
        runtime: Runtime,
        starts: ServerStarts,
        plan: Plan,
        progress: Callable[[Progress], None] | None,
        cancel: threading.Event | None,
    ) -> None:
        self.runtime, self.starts, self.plan, self.progress, self.cancel = runtime, starts, plan, progress, cancel
        self.t_start = time.perf_counter()
        self.per_request = honours_per_request(runtime, starts)
        self.groups = _groups(plan.candidates, self.per_request, starts.base_settings)
        self.n_runs = sum(len(g.settings) for g in self.groups) * len(plan.contexts) * (plan.repeats + 1)  # +warm-up
        self.restarts = 0 if self.per_request and len(self.groups) == 1 else len(self.groups)
        self.how = (
            "one server, settings sent per request"
            if self.per_request
            else "this build ignores per-request draft fields: the server restarts for every setting (slower)"
        )
        self.done = 0
        self.run_s: list[float] = []
        self.restart_s: list[float] = []
        self.samples: dict[tuple[int, SpecSettings], list[float]] = {}
        self.safe: dict[tuple[int, SpecSettings], bool] = {}
        self.reference: dict[int, GenerationSummary] = {}
        self.unsafe: list[str] = []
        corpus = plan.corpus or corpus_text()
        vocab = runtime.tokenizer()
        self.prompts = {c: build_messages_with(vocab, runtime.format_prompt, c, corpus) for c in plan.contexts}

    def tick(self, message: str, groups_left: int) -> None:
        if self.progress is None:
            return
        mean_run = sum(self.run_s) / len(self.run_s) if self.run_s else 0.0
        mean_restart = sum(self.restart_s) / len(self.restart_s) if self.restart_s else 0.0
        eta = mean_run * max(0, self.n_runs - self.done) + (mean_restart * groups_left if self.restarts else 0.0)
        self.progress(Progress(self.done, self.n_runs, eta, message))

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise CalibrationCancelled()

    def run(self) -> list[str]:
        """Every group of settings on its server start, within the budget; returns the settings left out."""
        groups, t_start = self.groups, self.t_start
        for gi, group in enumerate(groups):
            self.check_cancel()
            left = len(groups) - gi
            if self.plan.budget_s is not None and gi > 0:
                per_group = (time.perf_counter() - t_start) / gi
                if time.perf_counter() - t_start + per_group > self.plan.budget_s:
                    return [s.label() for g in groups[gi:] for s in g.settings]
            if group.start != self.starts.start_settings:
                self.tick(f"restarting llama-server for {group.start.label()} ({self.how})", left)
                t = time.perf_counter()
                self.starts.restart(group.start)
                self.restart_s.append(time.perf_counter() - t)
            for c in self.plan.contexts:
                for setting in group.settings:
                    self.measure(c, setting, left)
        return []

    def measure(self, c: int, setting: SpecSettings, groups_left: int) -> None:
        """A warm-up run (it prefills this server's cache; WARM_UP_TOKENS), then the measured repeats, which re-decode
        the prompt's end; each checked against plain decoding's output at this context."""
        msgs, got = self.prompts[c]
        plan = self.plan
        self.check_cancel()
        self.tick(f"context {got} tokens: {setting.label()} ({self.how})", groups_left)
        t = time.perf_counter()
        try:
            _run_once(self.runtime, msgs, setting, WARM_UP_TOKENS, self.cancel)
            outs = [
                _run_once(self.runtime, msgs, setting, plan.gen_tokens, self.cancel, margins=setting.is_plain)
                for _ in range(plan.repeats)
            ]
        except EngineError as e:
            self.unsafe.append(f"{got}: {setting.label()}: failed: {e}")
            self.samples[(c, setting)], self.safe[(c, setting)] = [], False
            return
        finally:
            self.run_s.append((time.perf_counter() - t) / (plan.repeats + 1))
            self.done += plan.repeats + 1
        self.samples[(c, setting)] = [o.timings.predicted_per_second for o in outs]
        if setting.is_plain:
            self.reference[c], self.safe[(c, setting)] = outs[0], True
            return
        if c not in self.reference:  # plain decoding failed here: nothing to check against
            self.safe[(c, setting)] = False
            return
        verdicts = [_safe(self.reference[c], o) for o in outs]
        self.safe[(c, setting)] = all(ok for ok, _ in verdicts)
        self.unsafe += [f"{got}: {setting.label()}: {why}" for ok, why in verdicts if not ok][:1]

    def measurements(self) -> list[Measurement]:
        lengths = {c: self.prompts[c][1] for c in self.plan.contexts}
        ranges = dict(zip(self.plan.contexts, ranges_from_points(list(lengths.values())), strict=True))
        return [
            Measurement(ranges[c][0], ranges[c][1], s, tuple(v), self.safe.get((c, s), False), lengths[c])
            for (c, s), v in self.samples.items()
        ]
