"""The calibration sweep: measure generation tok/s per (prompt length, draft setting) on this device, build the table.

How a sweep stays inside its budget:
- Prompts of successive lengths share one growing corpus prefix, so the prefix cache prefills each length only
  incrementally (an 8k prefill of the 1.5B target alone takes ~4 minutes on a 2-core CPU) and repeats re-decode just
  the last prompt token. The draft model's cache follows the same prefix.
- Every candidate runs once per context; those clearly dominated there (below `prune_ratio` x the best) are dropped
  before the repeats (one round of successive halving). Plain decoding is never dropped.
- A context whose estimated cost no longer fits the budget is skipped; the table then covers fewer contexts. A class
  section's further prompts come after every context (sweep_prompts), so the budget drops them first.
A row is safe only if the run finished and its greedy output equals plain decoding's, or first departs from it at a
near-tie (app.speculative.exactness). The table is written once, at the end, atomically; a cancel writes nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from app.calibration.classes import GENERAL_INSTRUCTION, SECTIONS, class_corpus, general_corpus
from app.engine.runtime import Runtime, SweepAccess, Tokenizer
from app.engine.types import DoneEvent, EngineError, GenerationRequest, GenerationSummary
from app.policy.content_class import CHAT, TABLE_CLASSES
from app.policy.report import ComparisonRow, class_comparison_rows, comparison_rows, to_csv, to_markdown
from app.policy.store import TableStore
from app.policy.table import FrontierTable, Measurement, build_rows, new_table, normalize, ranges_from_points
from app.runtime.sampling import SamplingParams
from app.speculative import registry
from app.speculative.exactness import compare_outputs
from app.speculative.mtp import MtpSource
from app.speculative.settings import PLAIN, SpecSettings

FIXED_BASELINE = SpecSettings(source="draft", n_max=2, p_min=0.0)  # the seed's fixed "n2,p0.0"
# The report's static baselines, in order (report_baseline): the draft model's n2,p0, else the MTP head's.
BASELINES = (FIXED_BASELINE, FIXED_BASELINE.with_(source=MtpSource.name))
INSTRUCTION = GENERAL_INSTRUCTION


class CalibrationCancelled(Exception):
    """The sweep was cancelled; nothing was written."""


@dataclass(frozen=True)
class Progress:
    """Where a sweep is: cell `done` of `total` (runs), estimated seconds left, and what runs now."""

    done: int
    total: int
    eta_s: float
    message: str


@dataclass(frozen=True)
class Plan:
    """What a sweep measures."""

    contexts: tuple[int, ...]
    candidates: tuple[SpecSettings, ...]
    gen_tokens: int
    repeats: int
    budget_s: float | None
    prune_ratio: float = 0.8
    corpus: str | None = None  # the user's own text (None: the shipped corpus); see cell_corpora
    classes: tuple[str, ...] = ()  # content classes with a section of their own (their own prompts and rows)
    class_points: int = 1  # how many contexts each class is measured at (every other one, from the shortest)
    class_prompts: int = 1  # how many of each class section's prompts are measured (app.calibration.classes)
    corpus_class: str | None = None  # the class the user's corpus fills (None: chat)
    # One untimed run of every candidate before the sweep (None: when a GPU backend runs the model). ggml's GPU
    # backends build their kernels on first use: on the H200 (Vulkan) the first cell's first runs read 18-50 tok/s
    # for settings that ran 70-245 later, so they were also pruned from the repeats on those figures.
    warm_up: bool | None = None


@dataclass
class Result:
    """The outcome: the table (saved unless `dry_run`), the report in three formats, and the raw runs."""

    table: FrontierTable
    markdown: str
    csv: str
    wall_s: float
    saved_to: Path | None
    skipped_contexts: list[int] = field(default_factory=list)
    unsafe: list[str] = field(default_factory=list)
    # "code@512" (none of the class's prompts there), "code@512 prompt 2": class prompts the budget left out
    skipped_classes: list[str] = field(default_factory=list)

    @classmethod
    def of_sweep(
        cls,
        table: FrontierTable,
        rows: list[ComparisonRow],
        t_start: float,
        saved: Path | None,
        unsafe: list[str],
        skipped_contexts: list[int] | None = None,
        skipped_classes: list[str] | None = None,
    ) -> Result:
        """A finished sweep's result: its report `rows` as Markdown and CSV, its wall time since `t_start`."""
        wall_s = time.perf_counter() - t_start
        return cls(
            table, to_markdown(rows), to_csv(rows), wall_s, saved, skipped_contexts or [], unsafe, skipped_classes or []
        )


def candidates(loaded: Collection[str], mode: str) -> tuple[SpecSettings, ...]:
    """The settings grid: plain decoding first, then each loaded source's own grid (registry order), then the pool
    (which picks source and depth itself) where it has a source to choose besides the cheap peeks."""
    out: list[SpecSettings] = [PLAIN]
    for cls in registry.sources():
        if cls.name in loaded:
            out += cls.calibration_grid(mode)
    if registry.unavailable(registry.POOL, loaded) is None:
        # The pool chooses source and length per step; its draft steps take the cost stop (depth from the draft's
        # confidence and the measured costs), so its cap is the engine's draft allocation, not a tuned depth.
        out.append(SpecSettings(registry.POOL, 16, 0, 0.0, cost_stop=True))
    return tuple(out)


def learns_across_requests(setting: SpecSettings) -> bool:
    """Whether a setting starts each request from the source memory (app/engine/memory.py): the pool, adaptive
    length."""
    return setting.source == registry.POOL or setting.adaptive


def default_plan(runtime: Runtime, mode: str = "quick", budget_min: float | None = None) -> Plan:
    """A quick or full sweep of every candidate the runtime's loaded sources allow, in its context window."""
    return plan_for(runtime.n_ctx, candidates(runtime.capabilities.sources, mode), mode, budget_min)


def plan_for(n_ctx: int, grid: tuple[SpecSettings, ...], mode: str, budget_min: float | None) -> Plan:
    """The contexts, lengths, repeats and budget of a quick or full sweep of `grid` in a window of n_ctx tokens."""
    gen = 64 if mode == "quick" else 2048
    limit = n_ctx - gen - 64
    points = (512, 1024, 2048, 4096) if mode == "quick" else (512, 1024, 2048, 4096, 8192, 16384, 32768)
    contexts = tuple(c for c in points if c <= limit) or (max(64, limit),)
    if len(contexts) < len(points) and limit >= 1.5 * contexts[-1]:
        # The default 4096-token context cannot hold a 4096-token prompt: measure the longest one that fits, so
        # the table covers the whole window the engine will run with.
        contexts = (*contexts, limit)
    budget = budget_min * 60.0 if budget_min else (600.0 if mode == "quick" else None)
    return Plan(
        contexts=contexts,
        candidates=grid,
        gen_tokens=gen,
        repeats=2 if mode == "quick" else 3,
        budget_s=budget,
        classes=TABLE_CLASSES,
        class_points=1 if mode == "quick" else 3,
        class_prompts=2 if mode == "quick" else 3,
    )


def corpus_text() -> str:
    """The shipped context-only corpus: prose and code, joined so one document mixes both (like real chats)."""
    return general_corpus()


MIN_CORPUS_CHARS = 200


def check_corpus(text: str) -> str:
    """A user's own calibration text, stripped; ValueError when there is too little to cut prompts from."""
    text = text.strip()
    if len(text) < MIN_CORPUS_CHARS:
        raise ValueError(
            f"the calibration text has {len(text)} characters; give at least {MIN_CORPUS_CHARS} (it is repeated to "
            "reach long prompts, so a few pages of your usual kind of text are enough)"
        )
    return text


def build_messages(
    runtime: Runtime, target_tokens: int, corpus: str, instruction: str = INSTRUCTION
) -> tuple[tuple[dict[str, str], ...], int]:
    """Messages whose templated prompt has (as nearly as tokenization allows) `target_tokens` tokens: the corpus
    cut to length, then `instruction`.

    Longer prompts extend the same document, so consecutive contexts share their prefix in the KV cache.
    """
    return build_messages_with(runtime.tokenizer(), runtime.format_prompt, target_tokens, corpus, instruction)


def build_messages_with(
    vocab: Tokenizer,
    format_prompt: Callable[[GenerationRequest], list[int]],
    target_tokens: int,
    corpus: str,
    instruction: str = INSTRUCTION,
) -> tuple[tuple[dict[str, str], ...], int]:
    """build_messages for any runtime: `vocab` tokenizes and detokenizes, `format_prompt` counts the final prompt."""
    doc = vocab.tokenize(corpus, add_special=False, parse_special=False)
    while len(doc) < target_tokens + 64:  # a long context cycles the corpus
        doc = doc + doc

    def make(n: int) -> tuple[tuple[dict[str, str], ...], int]:
        msgs = ({"role": "user", "content": vocab.detokenize(doc[:n]) + instruction},)
        return msgs, len(format_prompt(GenerationRequest(messages=msgs)))

    overhead = make(1)[1] - 1
    n = max(1, target_tokens - overhead)
    msgs, got = make(n)
    for _ in range(4):  # detokenize/retokenize is not exactly length-preserving: correct a few times
        if got == target_tokens:
            break
        n = max(1, n + (target_tokens - got))
        msgs, got = make(n)
    return msgs, got


def _run_once(
    runtime: Runtime,
    messages: tuple[dict[str, str], ...],
    setting: SpecSettings,
    gen_tokens: int,
    cancel: threading.Event | None,
    margins: bool = False,
) -> GenerationSummary:
    req = GenerationRequest(
        messages=messages,
        max_tokens=gen_tokens,
        sampling=SamplingParams(temperature=0.0),
        speculative=setting,
        collect_margins=margins,
    )
    summary = None
    for ev in runtime.generate(req, cancel):
        if isinstance(ev, DoneEvent):
            summary = ev.summary
    assert summary is not None
    if summary.finish_reason == "cancelled":
        raise CalibrationCancelled()
    return summary


def run_calibration(
    runtime: Runtime,
    plan: Plan,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    store: TableStore | None = None,
    dry_run: bool = False,
    access: SweepAccess | None = None,
) -> Result:
    """Run the sweep on a runtime that takes every setting per request (the bundled one), on the engine thread:
    plan -> sweep -> combine -> build the table -> save it (unless dry_run) and apply it."""
    access = access or runtime.sweep_access()
    if access.starts is not None:
        raise EngineError("this runtime takes draft settings as start flags: app.calibration.calibrate measures it")
    sweep = PromptSweep(runtime, access, plan, progress, cancel)
    sweep.warm_up()
    skipped_prompts = sweep.run()
    measured, measurements = sweep.measurements()
    table = new_table(access.fingerprint, build_rows(measurements), notes=table_notes(plan, measured, sweep.classes))
    rows = report_rows(table)
    saved = None
    if not dry_run:
        saved = (store or access.store).save(table, activate=True)
        runtime.reload_policy()  # the new table applies to the next request
    return Result.of_sweep(
        table,
        rows,
        sweep.t_start,
        saved,
        skipped_contexts=[t for (c, t), _ in skipped_prompts if c is None],
        unsafe=sweep.unsafe,
        skipped_classes=[prompt_label(key) for key in skipped_prompts if key[0][0] is not None],
    )


def table_notes(plan: Plan, measured: list[int], classes: list[str]) -> str:
    """How the table was measured, as its notes say it (the app and the CLI report show them)."""
    return (
        f"{counted(len(measured), 'context')}, {plan.gen_tokens} generated tokens, up to "
        f"{counted(plan.repeats, 'repeat')}, greedy"
        + (f", your own text ({len(plan.corpus)} characters)" if plan.corpus else ", the shipped corpus")
        + (f"; classes: {', '.join(classes)}, {_prompts_each(plan.class_prompts)}" if classes else "")
        + (f" (your text: {corpus_class(plan)})" if plan.corpus and classes else "")
    )


class PromptSweep:
    """The bundled sweep's state: every usable candidate measured prompt by prompt, each checked against plain
    decoding of the same prompt, within the plan's budget."""

    def __init__(
        self,
        runtime: Runtime,
        access: SweepAccess,
        plan: Plan,
        progress: Callable[[Progress], None] | None,
        cancel: threading.Event | None,
    ) -> None:
        self.runtime, self.access, self.plan, self.progress, self.cancel = runtime, access, plan, progress, cancel
        self.t_start = time.perf_counter()
        loaded = runtime.capabilities.sources
        self.usable = [c for c in plan.candidates if c.is_plain or registry.unavailable(c.source, loaded) is None]
        self.cells = sweep_cells(plan)
        self.corpora = cell_corpora(plan)
        n_prompts = sum(len(self.corpora[c][1]) for c, _ in self.cells)
        # Settings that start from the source memory get one untimed run per cell (measure_prompt says why).
        self.learning = [s for s in self.usable if learns_across_requests(s)] if access.learns else []
        self.total_runs = len(self.cells) * len(self.learning) + n_prompts * (
            len(self.usable) + 1 + max(0, plan.repeats - 1) * max(2, len(self.usable) // 2)
        )
        self.done = 0
        self.run_seconds: list[float] = []
        # Keyed by prompt = (cell, k): cell = (class or None, target context) is the context-only sweep or a class's
        # section, k its prompt. A cell's rows combine its prompts at the end (combine_prompts).
        self.samples: dict[tuple[PromptKey, SpecSettings], list[float]] = {}
        self.safe: dict[tuple[PromptKey, SpecSettings], bool] = {}
        self.out_tokens: dict[PromptKey, int] = {}
        self.prompt_len: dict[Cell, int] = {}
        self.unsafe: list[str] = []

    def tick(self, message: str) -> None:
        if self.progress is None:
            return
        mean = sum(self.run_seconds) / len(self.run_seconds) if self.run_seconds else 0.0
        self.progress(Progress(self.done, self.total_runs, mean * max(0, self.total_runs - self.done), message))

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise CalibrationCancelled()

    def _timed(self, messages: tuple[dict[str, str], ...], setting: SpecSettings, **kw: bool) -> GenerationSummary:
        """One counted run of the plan's length (its seconds feed the ETA, failed or not)."""
        t = time.perf_counter()
        try:
            return _run_once(self.runtime, messages, setting, self.plan.gen_tokens, self.cancel, **kw)
        finally:
            self.run_seconds.append(time.perf_counter() - t)
            self.done += 1

    def warm_up(self) -> None:
        """Where a GPU backend runs the model (or the plan says so): every verify batch size and every candidate once,
        untimed, on the first cell's prompt (see Plan.warm_up)."""
        plan, access = self.plan, self.access
        if not self.cells or not (plan.warm_up if plan.warm_up is not None else access.fingerprint.backend != "cpu"):
            return
        klass, target = self.cells[0]
        messages, _ = build_messages(self.runtime, target, self.corpora[klass][0], self.corpora[klass][1][0])
        if access.warm_up is not None:
            self.tick("warming up the GPU kernels: every verify batch size")
            access.warm_up(max(s.n_max for s in self.usable) + 1)
        for setting in self.usable:
            self.tick(f"warming up the GPU kernels: {setting.label()}")
            self.check_cancel()
            _run_once(self.runtime, messages, setting, plan.gen_tokens, self.cancel)

    def run(self) -> list[PromptKey]:
        """Measure the prompts in sweep order until the budget runs out; returns the prompts it left out."""
        prompts = sweep_prompts(self.cells, {c: len(self.corpora[c[0]][1]) for c in self.cells})
        budget = self.plan.budget_s
        for i, (cell, k) in enumerate(prompts):
            klass, target = cell
            self.check_cancel()
            if budget is not None and i > 0 and self.run_seconds:
                # The next prompt costs at least one run per candidate, plus its (incremental) prefill.
                est = (len(self.usable) + 1) * (sum(self.run_seconds) / len(self.run_seconds)) * (1.0 + target / 8192)
                if time.perf_counter() - self.t_start + est > budget:
                    return prompts[i:]
            corpus, instructions = self.corpora[klass]
            messages, got = build_messages(self.runtime, target, corpus, instructions[k])
            self.prompt_len.setdefault(cell, got)
            where = f"context {got} tokens" + (f", {klass}" if klass else "")
            where += f", prompt {k + 1} of {len(instructions)}" if len(instructions) > 1 else ""
            self.measure_prompt((cell, k), messages, where)
        return []

    def measure_prompt(self, key: PromptKey, messages: tuple[dict[str, str], ...], where: str) -> None:
        """Every usable candidate on one prompt: the plain reference, one run each, then the repeats of those not
        clearly dominated (one round of successive halving)."""
        ref = self._reference(key, messages, where)
        # Settings that start from the source memory are served warm from it once a class has been seen, so they
        # are timed warm: one untimed run on each cell's first prompt fills the memory (the calibration's runs are
        # remembered like any request's). Timed cold, the pool's first repeat understated it.
        for setting in self.learning if key[1] == 0 else ():  # a cell's later prompts find the memory filled
            self.check_cancel()
            self.tick(f"{where}: {setting.label()} (untimed: fills the source memory)")
            _run_once(self.runtime, messages, setting, self.plan.gen_tokens, self.cancel)
            self.done += 1
        for setting in self.usable:
            if not setting.is_plain:
                self._measure(key, messages, where, ref, setting)
        samples = self.samples
        best = max(v[0] for (q, _), v in samples.items() if q == key and v)
        survivors = [
            s
            for s in self.usable
            if s.is_plain
            or s in BASELINES
            or (samples.get((key, s)) and samples[(key, s)][0] >= self.plan.prune_ratio * best)
        ]
        for _ in range(self.plan.repeats - 1):
            for setting in survivors:
                if setting.is_plain:
                    self.check_cancel()
                    samples[(key, PLAIN)].append(self._timed(messages, PLAIN).timings.predicted_per_second)
                else:
                    self._measure(key, messages, where, ref, setting)

    def _reference(self, key: PromptKey, messages: tuple[dict[str, str], ...], where: str) -> GenerationSummary:
        """Plain decoding of the prompt: the first sample of plain and what every other run is checked against."""
        self.tick(f"{where}: prefill and plain decoding (reference)")
        t0 = time.perf_counter()
        # Prefill first (one token), so the reference starts from the same cache state as every later run: all of
        # them re-decode only the last prompt token. A reference whose first token came from the big prefill batch
        # would differ at token 0 by batch-size numerics alone (seen on Vulkan), not by anything speculation did.
        _run_once(self.runtime, messages, PLAIN, 1, self.cancel)
        ref = _run_once(self.runtime, messages, PLAIN, self.plan.gen_tokens, self.cancel, margins=True)
        self.run_seconds.append(time.perf_counter() - t0)
        self.done += 1
        self.samples[(key, PLAIN)] = [ref.timings.predicted_per_second]
        self.safe[(key, PLAIN)] = True
        self.out_tokens[key] = max(1, len(ref.tokens))
        return ref

    def _measure(
        self, key: PromptKey, messages: tuple[dict[str, str], ...], where: str, ref: GenerationSummary, s: SpecSettings
    ) -> None:
        """One timed run of a setting, safe only if its output is plain decoding's (or departs at a near-tie)."""
        self.check_cancel()
        self.tick(f"{where}: {s.label()}")
        label = prompt_label(key, self.prompt_len[key[0]])
        try:
            out = self._timed(messages, s)
        except EngineError as e:
            self.safe[(key, s)] = False
            self.unsafe.append(f"{label}: {s.label()}: failed: {e}")
            self.samples.setdefault((key, s), [])
            return
        verdict = compare_outputs(ref.tokens, ref.margins, ref.finish_reason, out.tokens, out.finish_reason)
        if not verdict.acceptable:
            self.unsafe.append(f"{label}: {s.label()}: {verdict.describe()}")
        self.safe[(key, s)] = self.safe.get((key, s), True) and verdict.acceptable
        self.samples.setdefault((key, s), []).append(out.timings.predicted_per_second)

    @property
    def classes(self) -> list[str]:
        """The content classes measured (in the table's order)."""
        return sorted({c for c, _ in self.prompt_len if c is not None}, key=TABLE_CLASSES.index)

    def measurements(self) -> tuple[list[int], list[Measurement]]:
        """The contexts measured and one measurement per (cell, setting), its prompts combined (combine_prompts)."""
        measured = [t for c, t in self.cells if c is None and (c, t) in self.prompt_len]
        if not measured:
            raise EngineError("calibration measured nothing: the budget is too small for even one context")
        # A class's rows cover the context-only range of the context they were measured at: the same ranges, fewer.
        lengths = [self.prompt_len[(None, c)] for c in measured]
        ranges = dict(zip(measured, ranges_from_points(lengths), strict=True))
        combined, combined_safe = combine_prompts(self.samples, self.safe, self.out_tokens)
        per_prompt = prompt_medians(self.samples)
        return measured, [
            Measurement(
                ctx_lo=ranges[t][0],
                ctx_hi=ranges[t][1],
                setting=setting,
                samples_tps=vals,
                safe=combined_safe[((c, t), setting)],
                prompt_tokens=self.prompt_len[(c, t)],
                content_class=c,
                prompt_tps=per_prompt.get(((c, t), setting), ()),
            )
            for ((c, t), setting), vals in combined.items()
            if t in ranges
        ]


def counted(n: int, word: str) -> str:
    """ "1 context", "3 contexts": a count for the table notes."""
    return f"{n} {word}" + ("" if n == 1 else "s")


def _prompts_each(n: int) -> str:
    return "1 prompt each" if n <= 1 else f"up to {counted(n, 'prompt')} each"


def report_rows(table: FrontierTable) -> list[ComparisonRow]:
    """The static-vs-DD report of a table, as the CLI prints it and the app shows it, against report_baseline."""
    fixed = report_baseline(table)
    return comparison_rows(table, fixed=fixed) + class_comparison_rows(table, fixed=fixed)


def report_baseline(table: FrontierTable) -> SpecSettings | None:
    """What "static" means in the report: the fixed n2,p0 of the draft model where the table measured it, else of the
    MTP head (an MTP model without a draft), else None: the table's best static setting. Never a setting the table
    has no row of, whose gains could only read n/a."""
    measured = {normalize(r.setting) for r in table.rows if r.safe}
    for fixed in BASELINES:
        if normalize(fixed) in measured:
            return fixed
    return None


Cell = tuple[str | None, int]
"""What one set of table rows is measured on: (content class or None for the context-only sweep, target length)."""

PromptKey = tuple[Cell, int]
"""One prompt the sweep measures every candidate on: its cell and its index among the cell's prompts."""


def combine_prompts(
    samples: dict[tuple[PromptKey, SpecSettings], list[float]],
    safe: dict[tuple[PromptKey, SpecSettings], bool],
    out_tokens: dict[PromptKey, int],
) -> tuple[dict[tuple[Cell, SpecSettings], tuple[float, ...]], dict[tuple[Cell, SpecSettings], bool]]:
    """One cell's samples per setting from its prompts' runs: repeat r's tok/s is the mix over the prompts (all their
    tokens over all their generation time), as that class's requests add up for a user; a prompt with fewer runs of
    the setting (pruned there) lends its median to the later repeats. Safe only if safe on every prompt measured.

    A setting missing on a prompt of the cell (a budget cut after the cell's first prompts) is combined over the
    prompts that measured it; the setting set is the same on every prompt, so its rows still compare like for like.
    """
    by_cell: dict[tuple[Cell, SpecSettings], list[PromptKey]] = {}
    for key, setting in samples:
        by_cell.setdefault((key[0], setting), []).append(key)
    combined: dict[tuple[Cell, SpecSettings], tuple[float, ...]] = {}
    ok: dict[tuple[Cell, SpecSettings], bool] = {}
    for (cell, setting), keys in by_cell.items():
        runs = [samples[(k, setting)] for k in keys]
        ok[(cell, setting)] = all(safe.get((k, setting), False) for k in keys)
        if any(not r or min(r) <= 0 for r in runs):  # failed somewhere: an unsafe row without samples
            combined[(cell, setting)] = ()
            continue
        tokens = [out_tokens[k] for k in keys]
        repeats = max(len(r) for r in runs)
        combined[(cell, setting)] = tuple(
            sum(tokens) / sum(n / (r[i] if i < len(r) else median(r)) for n, r in zip(tokens, runs, strict=True))
            for i in range(repeats)
        )
    return combined, ok


def prompt_medians(
    samples: dict[tuple[PromptKey, SpecSettings], list[float]],
) -> dict[tuple[Cell, SpecSettings], tuple[float, ...]]:
    """Each cell's median tok/s per prompt, in prompt order, for the settings that ran on two or more of its prompts
    (and ran everywhere they were tried): the rows' `prompt_tps`, which cross-validate the cell's choice over its
    prompts (app.policy.held_out). Plain runs first on every prompt, so a setting with as many values ran on the
    same prompts."""
    by_cell: dict[tuple[Cell, SpecSettings], list[list[float]]] = {}
    for (key, setting), runs in sorted(samples.items(), key=lambda item: item[0][0][1]):
        by_cell.setdefault((key[0], setting), []).append(runs)
    return {
        cell: tuple(median(r) for r in runs)
        for cell, runs in by_cell.items()
        if len(runs) >= 2 and all(r and min(r) > 0 for r in runs)
    }


def sweep_cells(plan: Plan) -> list[Cell]:
    """The sweep's order: per context, the context-only prompt, then each class measured at that context.

    Classes are measured at fewer contexts (`class_points`: every other context from the shortest), so a quick
    sweep stays inside its budget; rows a class lacks fall back to the context-only ones. Cells are in increasing
    context order, so the budget cuts the longest (most expensive) ones first.
    """
    classes = [c for c in TABLE_CLASSES if c in plan.classes or (plan.corpus and c == corpus_class(plan))]
    class_at = set(plan.contexts[0::2][: max(0, plan.class_points)]) if classes else set()
    cells: list[Cell] = []
    for target in plan.contexts:
        cells.append((None, target))
        if target in class_at:
            cells += [(c, target) for c in classes]
    return cells


def sweep_prompts(cells: list[Cell], n_prompts: dict[Cell, int]) -> list[PromptKey]:
    """The order prompts are measured in: every cell's first prompt in sweep order, then the class sections' further
    prompts. So a budget that runs short drops the second opinions on a class before any context the table covers
    (on a 2-core CPU a class prompt of the 1.5B/0.5B pair takes about a minute; a GPU runs them all)."""
    first = [(c, 0) for c in cells]
    more = [(c, k) for c in cells for k in range(1, n_prompts[c])]
    return first + more


def corpus_class(plan: Plan) -> str:
    """The class the user's own corpus fills (chat unless the plan says otherwise)."""
    return plan.corpus_class or CHAT


def cell_corpora(plan: Plan) -> dict[str | None, tuple[str, tuple[str, ...]]]:
    """(text, instructions) per cell kind: the context-only sweep reads the user's text (else the shipped prose and
    code) under the general instruction; a class reads its shipped section under the first `class_prompts` of its
    own instructions (one prompt each), except the class the user's text fills, which reads that text."""
    out: dict[str | None, tuple[str, tuple[str, ...]]] = {None: (plan.corpus or corpus_text(), (INSTRUCTION,))}
    for c, section in SECTIONS.items():
        text = plan.corpus if plan.corpus and c == corpus_class(plan) else class_corpus(c)
        out[c] = (text, section.instructions[: max(1, plan.class_prompts)])
    return out


def cell_label(cell: Cell, prompt_tokens: int | None = None) -> str:
    """ "512" for a context-only cell, "code@512" for a class's (the measured length when given)."""
    n = cell[1] if prompt_tokens is None else prompt_tokens
    return str(n) if cell[0] is None else f"{cell[0]}@{n}"


def prompt_label(key: PromptKey, prompt_tokens: int | None = None) -> str:
    """ "code@512" for a cell's first prompt, "code@512 prompt 2" for a further one (cell_label otherwise)."""
    return cell_label(key[0], prompt_tokens) + (f" prompt {key[1] + 1}" if key[1] else "")


def plan_with(plan: Plan, **changes: object) -> Plan:
    from dataclasses import replace

    return replace(plan, **changes)  # type: ignore[arg-type]
