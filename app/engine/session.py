"""The generation session: target (+ draft) contexts, prefix cache, and the speculative decode loop as a generator."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from app.engine import catch_up, choose, loader, memory, rollback
from app.engine.chat import TextStream
from app.engine.config import EngineConfig, profile_of
from app.engine.history import RollingWindow, check_prompt_fits, saying_dropped
from app.engine.identity import config_fingerprint, llama_build
from app.engine.profile import recalibrate_command
from app.engine.prompting import PromptBuilder, opens_think
from app.engine.reasoning_budget import request_budget
from app.engine.request_policy import (
    choose_settings,
    policy_with_default,
    policy_without_table,
    request_class,
    wire_record,
)
from app.engine.run import Run, StepDraft, top2_margin, with_idle_reasons, with_seeded_costs
from app.engine.runtime import Capabilities, ModelMeta, SweepAccess
from app.engine.types import (
    DoneEvent,
    EngineError,
    Event,
    GenerationRequest,
    GenerationSummary,
    InvalidRequest,
    TextEvent,
    Timings,
    TokenLogprob,
)
from app.policy.content_class import CHAT, RequestClass
from app.policy.dynamic import DecisionRecord, DraftCaps, DynamicDraftPolicy
from app.policy.fingerprint import Fingerprint
from app.policy.store import calibration_store
from app.runtime import mirostat
from app.runtime.grammar import Grammar, GrammarError
from app.runtime.llama import LlamaError, Vocab
from app.speculative import registry
from app.speculative.adaptive import cost_stop_step
from app.speculative.control import StepOutcome, StepPlan, StepView, controller_for, guard_record
from app.speculative.settings import SpecSettings
from app.speculative.sources import takes_floors
from app.speculative.telemetry import SpecStats
from app.speculative.verify import Verdict

log = logging.getLogger(__name__)


class Session:
    """Owns the llama.cpp contexts of one target (and draft). Not thread-safe: one engine thread drives it."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self._loaded = parts = loader.load(config)
        self.model, self.ctx, self.draft_model = parts.model, parts.ctx, parts.draft_model
        self.sources, self.missing = parts.sources, parts.missing
        self.context_notes = parts.context_notes  # the CLI, the server and the app say them
        self.policy = policy_without_table(config, "", parts.sources)
        self.dd_status = "no calibration table"
        self.stats = SpecStats()
        # Verify cost per batch size is a property of this model on this device: learnt once, shared by requests.
        self._verify_ms: dict[int, float] = {}
        self._verify_seeded = False  # the remembered table (source memory) was read into _verify_ms
        self._draft_ms: dict[str, float] = {}  # and each draft source's ms per drafted token (the pool's arms)
        # Verify batch sizes decoded at least once: a GPU builds a shape's kernels on its first use, so that first
        # sample is not a cost (nor is a request's first verify: cache warm-up after the prefill).
        self._decoded_batches: set[int] = set()
        # Which sources' propose() take the cost stop's floors (a third-party source may predate them).
        self._takes_floors = {name: takes_floors(src) for name, src in self.sources.items()}
        # Optional device cost profile for the pool (see SourcePool) and for the cost stop of a non-adaptive request.
        self.pool_step_cost = None
        self.pool_cost_label: str | None = None  # names that profile: its rewards get a source memory of their own
        # The pool weighs a draft model's catch-up against the tokens still wanted (False: the choice before
        # 2026-12-02, kept for bench/adaptive/bench_catch_up.py's side-by-side).
        self.weigh_catch_up = True
        self._caps = DraftCaps(parts.depth_cap, self.draft_model is not None, frozenset(self.missing))
        self._caps_without_draft = replace(self._caps, draft_loaded=False)  # DD's choice when the draft can't pay
        self.speculation_disabled_reason: str | None = None
        self.prompts = PromptBuilder(self.model, config.chat_template)
        self.cache = loader.open_cache(config, parts)
        self.window = RollingWindow()  # where long chats are cut, so their next turns reuse the cached window
        self._memory: memory.SourceMemoryStore | None = None
        self._memory_opened = False
        self.use_source_memory = config.source_memory  # switchable per request (bench: warm vs cold side by side)
        self.reload_policy()

    # -- public helpers -------------------------------------------------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(sources=tuple(self.sources), pool=True, adaptive=True)

    def sweep_access(self) -> SweepAccess:
        """Settings go per request; calibration warms each verify shape first and times the learning settings warm."""
        store = calibration_store(self.config.model, self.config.draft)
        return SweepAccess(self.fingerprint(), store, warm_up=self.warm_up, learns=self.use_source_memory)

    def status(self) -> str:
        return f"bundled {llama_build()}"

    def fingerprint(self) -> Fingerprint:
        """This engine's calibration fingerprint (target/draft hashes, device, context settings); the model files are
        hashed once (cached by app/engine/identity)."""
        return config_fingerprint(self.config, self.ctx.n_ctx, self.ctx.n_threads, llama_build(), self.model.n_layer)

    @property
    def caps(self) -> DraftCaps:
        """The draft allocation: the configured depth cap, never more than one verify batch can hold."""
        if self.speculation_disabled_reason:
            return DraftCaps(0, False)
        return self._caps

    def source_memory(self) -> memory.SourceMemoryStore | None:
        """The remembered source statistics for this engine (opened on first use; None when off)."""
        if not self.use_source_memory or (self.pool_step_cost is not None and not self.pool_cost_label):
            return None  # off; or rewards in an unnamed device profile's units, which must not mix with measured ones
        if not self._memory_opened:
            self._memory_opened = True
            self._memory = memory.open_store(
                self.config, self.fingerprint, self.pool_cost_label if self.pool_step_cost is not None else None
            )
        return self._memory

    def _seed_verify_costs(self) -> int:
        """Once per session, before its first request that learns verify costs: start from the table this engine
        measured last time (source memory), so the cost stop neither drafts shallow for a request's first steps nor
        pays again for each batch size it tries. Sizes this session measured already are kept. Returns how many
        sizes came from the memory (0 after the first call)."""
        if self._verify_seeded:
            return 0
        self._verify_seeded = True
        return memory.seed_verify_costs(self.source_memory(), self._verify_ms)

    def set_policy(self, policy: DynamicDraftPolicy) -> None:
        self.policy = policy

    @property
    def n_ctx(self) -> int:
        return int(self.ctx.n_ctx)

    def model_meta(self) -> ModelMeta:
        m = self.model
        return ModelMeta(
            self.n_ctx,
            m.n_ctx_train,
            m.n_params,
            m.size_bytes,
            m.vocab.n_vocab,
            self.context_notes,
            llama_build(),
            self.prompts.template or "",
            self.prompts.bos_text,
            self.prompts.eos_text,
        )

    def tokenizer(self) -> Vocab:
        """llama.cpp's vocabulary: tokenizing reads the model only, never a context (Runtime's Tokenizer)."""
        return self.model.vocab

    def reload_policy(self) -> str:
        """Load the active calibration table for this exact engine (Dynamic Draft); returns a status line.

        Without a table, DD decides "no_table" and the configured default runs, so every generation still carries
        a decision record. The fingerprint (which hashes the model files, cached) is computed only if a table exists.
        """
        store = calibration_store(self.config.model, self.config.draft)
        if not store.active_path.exists():  # a corrupt pointer goes on, to be reported
            self.policy = policy_without_table(self.config, "no calibration table yet", self.sources)
            self.dd_status = "no calibration table yet: run a calibration"
            return self.dd_status
        fingerprint = self.fingerprint()
        result = store.load_active(fingerprint)
        self.policy = policy_with_default(self.config, self.sources, result.table, fingerprint, result.message)
        self.dd_status = result.message
        if result.status == "stale":
            self.dd_status += ": " + recalibrate_command(self.config.model, self.config.draft, profile_of(self.config))
        return self.dd_status

    def render_prompt(self, request: GenerationRequest) -> str:
        """The chat template applied to the request's messages; any thread may call it (see PromptBuilder)."""
        return self.prompts.render(request)

    def format_prompt(self, request: GenerationRequest) -> list[int]:
        """Apply the chat template (for messages) and tokenize: exactly the tokens the model will see."""
        return self.templated(request)[0]

    def templated(self, request: GenerationRequest) -> tuple[list[int], str]:
        """format_prompt's tokens and the text they came from (the templated prompt, or the raw prompt)."""
        return self.prompts.templated(request, self.n_ctx)

    def warm_up(self, max_rows: int) -> None:
        """Decode one batch of every size 1..max_rows with logits on every row, as a verify does, then forget it: a
        GPU backend builds each shape's kernels on first use, so a timed run (calibration) must not be the first.
        Seen on the H200: verify batches of 6-8 rows cost 22-39 ms the first time and 13-16 ms after."""
        tok = self.model.vocab.tokenize(" the", add_special=False)[:1] or [0]
        try:
            for b in range(1, min(max_rows, self.ctx.n_batch, self.ctx.n_ctx) + 1):
                self.ctx.clear()
                self.ctx.decode(tok * b, logits_from=0)
                self._decoded_batches.add(b)
        finally:
            self.ctx.clear()  # the next request prefills its prompt afresh (the conversation cache sees the change)

    def close(self) -> None:
        if hasattr(self, "cache"):  # close() also cleans up a construction that failed before the cache existed
            self.cache.close()
        if (store := getattr(self, "_memory", None)) is not None:
            store.flush()  # the last throttled write
        self._loaded.close()

    # -- settings -------------------------------------------------------------------------------------------------
    def _choose_settings(
        self, n_prompt: int, override: SpecSettings | None, content_class: RequestClass | None = None
    ) -> tuple[SpecSettings, DecisionRecord]:
        return choose_settings(self.policy, self.caps, n_prompt, override, self.sources, self.missing, content_class)

    # -- generation -----------------------------------------------------------------------------------------------
    def generate(self, request: GenerationRequest, cancel: threading.Event | None = None) -> Iterator[Event]:
        """Run one request; yields TextEvent/StepEvent and ends with a DoneEvent. Raises EngineError subclasses."""
        request = self.prompts.resolved(request)
        request, prompt, text, dropped = self.window.fit(request, self.templated, self.n_ctx)
        n_prompt = len(prompt)
        max_tokens = check_prompt_fits(n_prompt, request.max_tokens, self.n_ctx, request.until_context_end)
        request = replace(request, max_tokens=max_tokens, until_context_end=False)
        settings, record = self._choose_settings(n_prompt, request.speculative, request_class(request, text))
        if request.grammar is not None and request.sampling.mirostat and not request.sampling.greedy:
            raise InvalidRequest("mirostat with a grammar (or a JSON schema) is not supported", param="mirostat")
        grammar = self._compile_grammar(request.grammar)
        try:
            yield from saying_dropped(self._generate(request, prompt, settings, record, grammar, cancel), dropped)
        finally:
            if grammar is not None:
                grammar.close()

    def _compile_grammar(self, gbnf: str | None) -> Grammar | None:
        if gbnf is None:
            return None
        try:
            return Grammar(self.model.vocab.ptr, self.model.vocab.n_vocab, gbnf)
        except GrammarError as e:
            raise InvalidRequest(str(e)) from e

    def _generate(
        self,
        request: GenerationRequest,
        prompt: list[int],
        settings: SpecSettings,
        record: DecisionRecord,
        grammar: Grammar | None,
        cancel: threading.Event | None,
    ) -> Iterator[Event]:
        """One request's phases: restore the cache, set the run up, prefill, step until done, then sum it up."""
        # Prefill only what neither the live memory nor a saved state (the conversation cache) already holds.
        # Restored first: a draft model's catch-up (what DD weighs its fixed pick against) is what it still lacks.
        t_prompt = time.perf_counter()
        cache_n = self.cache.prepare(prompt, request.cache_prompt)
        restore_ms = (time.perf_counter() - t_prompt) * 1000.0
        settings, record = self._weigh_catch_up(prompt, request.max_tokens, settings, record)
        # DD's or the default's choice is guarded; a request's own setting runs as asked (calibration measures so).
        guarded = self.config.spec_guard and (request.speculative is None or record.reason == "forced")
        run = self._new_run(request, prompt, settings, grammar, guarded)
        self.stats.start_request(record.content_class or CHAT)
        warm, seeded, measures_costs = self._warm_start(run, record)

        t_prompt = time.perf_counter()
        first = self._prefill(run, cache_n, cancel)
        prompt_ms = restore_ms + (time.perf_counter() - t_prompt) * 1000.0
        n_prefilled = len(self.ctx.tokens) - cache_n  # less than the prompt's rest when cancelled

        t_gen = time.perf_counter()
        if first is not None:
            if request.echo_open_think and request.messages is not None and opens_think(self.render_prompt(request)):
                run.stream.text = "<think>\n"
                yield TextEvent("<think>\n", 0, 0)
            yield from run.commit([first[0]], 0, first[1], self.model.vocab)
            uses_draft = settings.source == registry.POOL or registry.needs_draft_model(settings.source)
            self.cache.checkpoint(prompt, request.cache_prompt, uses_draft)
        else:
            run.finish = "cancelled"
        while run.finish is None:
            if cancel is not None and cancel.is_set():
                run.finish = "cancelled"
                break
            yield from self._step(run)

        tail = run.stream.flush()
        if tail or run.logprobs_pending:
            yield TextEvent(tail, 0, 0, tuple(run.logprobs_pending))
        gen_ms = (time.perf_counter() - t_gen) * 1000.0
        self._learn_from(run, warm, measures_costs)
        timings = run.timings(n_prefilled, prompt_ms, gen_ms, cache_n)
        kept = with_seeded_costs(warm.to_dict() if warm is not None else None, seeded)
        yield DoneEvent(self._summary(run, record, timings, kept))

    def _new_run(
        self,
        request: GenerationRequest,
        prompt: list[int],
        settings: SpecSettings,
        grammar: Grammar | None,
        guarded: bool = False,
    ) -> Run:
        """The request's mutable state, with its reasoning budget and its per-step draft control (control.py)."""
        return Run(
            request=request,
            prompt=prompt,
            settings=settings,
            rng=np.random.default_rng(request.sampling.seed),
            stream=TextStream(request.stop),
            control=controller_for(
                settings,
                self.sources,
                self._verify_ms,
                self._draft_ms,
                self.pool_step_cost,
                self._caps.n_max + 1,
                guarded,
            ),
            grammar=grammar,
            mu=mirostat.initial_mu(request.sampling.mirostat_tau),
            budget=request_budget(
                self.config.reasoning_budget if request.reasoning_budget is None else request.reasoning_budget,
                request.reasoning_budget_message or self.config.reasoning_budget_message,
                prompt,
                self.model.vocab,
            ),
        )

    def _warm_start(self, run: Run, record: DecisionRecord) -> tuple[memory.WarmStart | None, int, bool]:
        """What the run starts from: the source memory's pulls for the pool or adaptive length, and the verify costs
        the memory kept (seeded once per session). Returns (warm start, cost rows seeded, whether the run measures
        verify costs: the pool, an adaptive length and a cost stop learn them, unless a device profile stands in)."""
        control = run.control
        measures_costs = self.pool_step_cost is None and control.learns_costs
        seeded = self._seed_verify_costs() if measures_costs else 0
        warm = None
        if control.pool is not None or control.adaptive is not None:
            warm = memory.warm_start(
                self.source_memory(),
                self.stats.content_class,
                control.pool,
                control.adaptive,
                run.settings.source,
                record.content_subclass,
            )
        return warm, seeded, measures_costs

    def _prefill(
        self, run: Run, cache_n: int, cancel: threading.Event | None
    ) -> tuple[int, list[TokenLogprob] | None] | None:
        """Decode the prompt past what the cache held and choose the reply's first token with its logprobs; None when
        cancelled (cancellation is checked between n_batch chunks: a long prompt must not hold the engine thread)."""
        try:
            prefilled = self.ctx.prefill(run.prompt[cache_n:], stop=cancel.is_set if cancel is not None else None)
        except LlamaError as e:
            self.ctx.clear()
            raise EngineError(f"prompt processing failed: {e}") from e
        if not prefilled:
            return None
        token = self._first_token(run, run.prompt)
        if run.request.collect_margins:
            run.margins.append(top2_margin(self.ctx.logits(-1)))
        return token, self._logprobs(run, [token], [-1])

    def _learn_from(self, run: Run, warm: memory.WarmStart | None, measures_costs: bool) -> None:
        """After the last step: each source the pool never tried says why (never silently unused), and what the run
        measured goes to the session (draft costs) and the source memory (pulls, verify costs, prefill speeds)."""
        control = run.control
        for name, why in control.untried().items():
            run.idle_reasons.setdefault(name, why)
        memory.remember(self._memory, warm, control.pool, control.adaptive, run.settings.source, self.stats.request)
        if measures_costs and self._memory is not None:  # _seed_verify_costs opened the memory
            self._memory.record_verify_costs(self._verify_ms)
        catch_up.keep_prefill_speeds(self._memory, self.sources)
        self._draft_ms.update(control.draft_costs())

    def _summary(
        self, run: Run, record: DecisionRecord, timings: Timings, source_memory: dict[str, Any] | None
    ) -> GenerationSummary:
        return GenerationSummary(
            text=run.stream.text,
            tokens=tuple(run.generated),
            stopping_word=run.stream.stopped_by,
            reasoning=run.budget.report() if run.budget is not None else None,
            finish_reason=run.finish or "stop",  # type: ignore[arg-type]
            timings=timings,
            steps=run.steps,
            prompt_tokens=len(run.prompt),
            settings=run.settings,
            dynamic_draft=wire_record(
                record, self.policy, self.dd_status, self.speculation_disabled_reason, guard_record(run.control)
            ),
            per_source=with_idle_reasons(self.stats.request_summary(), run.idle_reasons),
            content_class=self.stats.content_class,
            content_subclass=record.content_subclass,
            source_memory=source_memory,
            # One more than the tokens when the run ended on an end token: the row that chose to stop.
            margins=tuple(run.margins[: len(run.generated) + (run.finish == "stop")]),
            logprobs=tuple(run.logprobs),
            cache=self.cache.snapshot(),
        )

    def _first_token(self, run: Run, prompt: list[int]) -> int:
        """The reply's first token, from the prompt's logits; a budget of 0 in a block the prompt opened starts the
        forced end right here instead (the rest of it is the next step's)."""
        if run.budget is not None and run.budget.due():
            forced = run.forced_end()
            if forced:
                run.forced = forced[1:]
                return forced[0]
        token = choose.sample(self.ctx.logits(-1), run, prompt)
        run.within_budget([token], self.model.vocab.piece)
        return token

    def _forced_step(self, run: Run) -> Iterator[Event]:
        """Commit the reasoning budget's forced end (message and closing tag) in one target decode, like a draft
        accepted by rule, then the target's own next token after it."""
        ctx = self.ctx
        history = run.prompt + run.generated
        room = max(0, min(ctx.n_ctx - len(history) - 1, ctx.n_batch - 1))
        forced, run.forced = run.forced[:room], []
        if not forced:
            run.finish = "length"
            return
        n_before = len(run.generated)
        t0 = time.perf_counter()
        try:
            ctx.decode([history[-1], *forced], logits_from=0)
        except LlamaError as e:
            raise EngineError(f"decode failed: {e}") from e
        if run.grammar is not None:
            for t in forced:  # admitted: Run.forced_end checked them on a copy
                run.grammar.accept(t)
        committed = [*forced, choose.sample(ctx.logits(len(forced)), run, history + forced)]
        lps = self._logprobs(run, committed, range(len(committed)))
        verify_ms = (time.perf_counter() - t0) * 1000.0
        yield from run.commit(committed, 0, lps, self.model.vocab)
        yield run.step_event(n_before, None, 0, verify_ms, time.perf_counter())

    def _plan(self, run: Run, history: list[int]) -> StepPlan:
        """The run's controller says this step's source and depth (a plain decode once speculation is off)."""
        view = StepView(
            history,
            run.remaining,
            self.sources,
            run.request.sampling,
            run.rng,
            lambda available: self._catch_up(run, history, available),
            disabled=bool(self.speculation_disabled_reason),
        )
        return run.control.plan(view)

    def _weigh_catch_up(
        self, prompt: list[int], max_tokens: int, settings: SpecSettings, record: DecisionRecord
    ) -> tuple[SpecSettings, DecisionRecord]:
        """DD's fixed draft-model pick against the prefill its draft must do first (what its KV lacks of the prompt,
        at its measured prefill speed): DynamicDraftPolicy.weigh_catch_up keeps it or runs the best choice without
        the draft model. Not weighed before that speed was measured once, nor under a device cost profile."""
        if not (record.applied and self._prices_catch_up):
            return settings, record
        src = self.sources.get(settings.source)
        ms = catch_up.prompt_catch_up_ms(self.source_memory, settings.source, src, prompt)
        if ms is None:
            return settings, record
        return self.policy.weigh_catch_up(settings, record, self.caps, self._caps_without_draft, ms, max_tokens)

    @property
    def _prices_catch_up(self) -> bool:
        """Whether a draft's catch-up is priced (in ms: not under a device cost profile, whose units are not ms)."""
        return self.weigh_catch_up and self.pool_step_cost is None

    def _catch_up(self, run: Run, history: list[int], available: set[str]) -> dict[str, float] | None:
        """Each available pool source's one-off ms before its next draft (None under a device cost profile: its
        units are not ms)."""
        if not self._prices_catch_up:
            return None
        return catch_up.pool_catch_up_ms(self.source_memory, self.sources, available, run.kv_held, history)

    def _step(self, run: Run) -> Iterator[Event]:
        """One speculative step: draft, verify [last] + draft in one target decode, restore after a rejection,
        then emit the accepted tokens plus the target's own next one and let the step's observers learn from it."""
        if run.forced:
            yield from self._forced_step(run)
            return
        history = run.prompt + run.generated  # the last token is committed but not yet in the KV cache
        n_kv = len(self.ctx.tokens)  # == len(history) - 1
        draft = self._draft(run, history)
        saved = self._checkpoint(draft)
        grammar_before = run.grammar_before_step()
        t0 = time.perf_counter()
        verdict = self._verify(run, history, draft)
        a = verdict.n_accepted
        committed = [*draft.tokens[:a], verdict.next_token]
        # A spent reasoning budget keeps only the tokens before its forced end: the last one kept is then committed
        # but not in the KV, as the target's own token is after a rejection.
        keep = run.within_budget(committed, self.model.vocab.piece, grammar_before)
        kept = a if keep == len(committed) else keep - 1
        if kept < len(draft.tokens):
            self._restore_after_rejection(history, draft.tokens[:kept], saved)
        verify_ms = (time.perf_counter() - t0) * 1000.0
        if draft.src is not None:
            draft.src.rollback(n_kv + 1 + kept)
            if draft.depth > 0 and draft.src.name in run.kv_held:  # it proposed: its KV now holds what was committed
                run.kv_held[draft.src.name] = n_kv + 1 + kept
        n_before = len(run.generated)
        rows = len(draft.tokens) + 1
        cost_sample = run.verify_warm and rows in self._decoded_batches  # see _decoded_batches
        self._decoded_batches.add(rows)
        run.verify_warm = True
        self._observe(run, draft, a, verify_ms, committed, cost_sample)  # what the verify found, cut or not
        yield from run.commit(committed[:keep], min(a, keep), run.step_logprobs, self.model.vocab)
        yield run.step_event(n_before, draft, a, verify_ms, time.perf_counter())

    def _draft(self, run: Run, history: list[int]) -> StepDraft:
        """Plan this step's source and depth and let it propose; an empty draft means a plain decode."""
        ctx = self.ctx
        s = run.settings
        plan = self._plan(run, history)
        src = self.sources.get(plan.source) if plan.source != registry.NONE else None
        depth, ready = plan.depth, plan.peeked
        # Never draft past the context window or the tokens still wanted (the target adds one of its own).
        room = max(0, min(ctx.n_ctx - len(history) - 1, run.remaining - 1, ctx.n_batch - 1))
        floors, declined = None, 0
        # In the pool, a peeked proposal (prompt lookup) runs at the length the pool chose from its acceptance
        # model: its tokens carry no confidence for the cost stop to read, and it is not certain either.
        if s.cost_stop and src is not None and ready is None and plan.costs is not None:
            # The controller (adaptive length, pool) still says whether to draft; the measured costs say how deep.
            asked = min(s.n_max, room)
            wanted = depth
            depth, floors = cost_stop_step(plan.costs, wanted, asked)
            declined = asked - depth if wanted > 0 else 0
        depth = max(0, min(depth, room))
        draft = StepDraft(src, depth, declined=declined)
        if src is not None and depth > 0:
            n_min = min(s.n_min, depth)
            if ready is not None:  # a cheap peek's (prompt lookup: certain tokens) is cut at the ceiling below
                d = ready
            elif floors is not None and self._takes_floors.get(type(src).name, False):
                d = src.propose(history, depth, n_min, s.p_min, run.request.sampling, run.rng, floors=floors)
            else:
                d = src.propose(history, depth, n_min, s.p_min, run.request.sampling, run.rng)
            draft.tokens, draft.dists, draft.draft_ms = d.tokens[:depth], d.dists[:depth], d.draft_ms
            draft.caught_up = d.caught_up
            draft.declined += d.declined
            if d.why_empty:
                run.idle_reasons[type(src).name] = d.why_empty
        draft.within_vocab(self.model.vocab.n_vocab)
        return draft

    def _checkpoint(self, draft: StepDraft) -> rollback.State | None:
        """A state to return to where the memory cannot drop the rejected positions in place (else None); when even
        that fails, the draft is dropped and speculation turned off."""
        try:
            return rollback.checkpoint(self.ctx, len(draft.tokens))
        except LlamaError as e:
            self._disable_speculation(f"cannot checkpoint the recurrent state for rollback ({e})")
            draft.tokens, draft.dists = [], []
            return None

    def _verify(self, run: Run, history: list[int], draft: StepDraft) -> Verdict:
        """Decode [last] + draft once and accept the longest prefix the target agrees with (greedy or sampled)."""
        ctx = self.ctx
        try:
            ctx.decode([history[-1], *draft.tokens], logits_from=0)
        except LlamaError as e:
            raise EngineError(f"decode failed: {e}") from e
        verdict = choose.verdict(ctx.logits, run, history, draft.tokens, draft.dists)
        if run.request.collect_margins:
            run.margins.extend(top2_margin(ctx.logits(i)) for i in range(verdict.n_accepted + 1))
        # Logprobs now: restoring after a rejection may decode again and overwrite these rows.
        emitted = [*draft.tokens[: verdict.n_accepted], verdict.next_token]
        run.step_logprobs = self._logprobs(run, emitted, range(verdict.n_accepted + 1))
        return verdict

    def _logprobs(self, run: Run, tokens: Sequence[int], rows: Sequence[int]) -> list[TokenLogprob] | None:
        return choose.logprobs(run, tokens, rows, self.ctx.logits, self.model.vocab.piece)

    def _restore_after_rejection(self, history: list[int], accepted: list[int], saved: rollback.State | None) -> None:
        """Drop the rejected draft positions from the target memory; where that fails, plain decoding from now on."""
        try:
            rollback.restore(self.ctx, history, accepted, saved)
        except rollback.RollbackFailed as e:
            self._disable_speculation(str(e))
            if e.rebuild_error is not None:
                raise EngineError(f"decode failed: {e.rebuild_error}") from e.rebuild_error

    def _observe(
        self, run: Run, draft: StepDraft, a: int, verify_ms: float, committed: list[int], cost_sample: bool = True
    ) -> None:
        """Count the step and feed what it cost and accepted to telemetry and to the run's controller;
        `cost_sample` False keeps a step with one-off work out of the cost models (not out of rewards)."""
        n = len(draft.tokens)
        run.steps += 1
        run.draft_n += n
        run.draft_accepted += a
        self.stats.observe_step(draft.source_name, n, a, draft.draft_ms, verify_ms)
        outcome = StepOutcome(n, a, committed, draft.draft_ms, verify_ms, draft.declined, cost_sample, draft.caught_up)
        run.control.observe(outcome)

    def _disable_speculation(self, reason: str) -> None:
        """Rollback is impossible for this model: plain decoding from now on (this and later requests)."""
        self.speculation_disabled_reason = f"speculation turned off: {reason}"
        log.warning("%s: %s", self.model.path.name, self.speculation_disabled_reason)
