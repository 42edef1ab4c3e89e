"""One request's mutable state in the decode loop (Run), what one step drafted (StepDraft), and how tokens commit."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.engine.chat import TextStream
from app.engine.reasoning_budget import ReasoningBudget
from app.engine.types import Event, GenerationRequest, StepEvent, TextEvent, Timings, TokenLogprob
from app.runtime.grammar import Grammar, GrammarError
from app.runtime.llama import Vocab
from app.speculative.control import DraftController
from app.speculative.settings import SpecSettings
from app.speculative.sources import DraftSource
from app.speculative.telemetry import SourceStats


@dataclass
class Run:
    """Mutable state of one generation (kept together so the loop reads plainly)."""

    request: GenerationRequest
    prompt: list[int]
    settings: SpecSettings
    rng: np.random.Generator
    stream: TextStream
    control: DraftController  # per-step draft control (app/speculative/control.py)
    generated: list[int] = field(default_factory=list)
    draft_n: int = 0
    draft_accepted: int = 0
    steps: int = 0
    finish: str | None = None
    margins: list[float] = field(default_factory=list)
    grammar: Grammar | None = None  # the output's grammar, advanced by every committed token
    logprobs: list[TokenLogprob] = field(default_factory=list)
    logprobs_pending: list[TokenLogprob] = field(default_factory=list)  # committed, not yet in a TextEvent
    step_logprobs: list[TokenLogprob] | None = None  # the current step's, read from its verify rows
    idle_reasons: dict[str, str] = field(default_factory=dict)  # source -> why its last empty draft was empty
    verify_warm: bool = False  # a verify already ran in this request (the first one's ms include one-off work)
    # Pool sources with their own KV cache (a draft model): how many leading tokens of the history it holds, read once
    # per request and then followed step by step; the rest is the catch-up its next draft pays (see SourcePool).
    kv_held: dict[str, int] = field(default_factory=dict)
    budget: ReasoningBudget | None = None  # the request's reasoning budget (app.engine.reasoning_budget)
    forced: list[int] = field(default_factory=list)  # its forced end, committed by the next step (_forced_step)
    mu: float = 0.0  # mirostat's state (SamplingParams.mirostat_mu), moved on by every committed draw

    @property
    def remaining(self) -> int:
        """Tokens still wanted at most (the reply may end sooner)."""
        return self.request.max_tokens - len(self.generated)

    def grammar_before_step(self) -> Grammar | None:
        """A copy of the grammar's state where a spent budget may cut this step (see within_budget), else None."""
        if self.grammar is None or self.budget is None or self.budget.done:
            return None
        return self.grammar.clone()

    def within_budget(self, tokens: list[int], piece: Callable[..., bytes], before: Grammar | None = None) -> int:
        """How many of a step's tokens the reasoning budget lets stay; once it is spent, the forced end is queued for
        the next step. The grammar followed every token the step's verify accepted: where the budget keeps fewer, it
        goes back to `before` (grammar_before_step) and takes the kept ones only."""
        if self.budget is None:
            return len(tokens)
        keep = self.budget.admit([piece(t, special=True) for t in tokens])
        if before is not None and self.grammar is not None:
            if keep < len(tokens):
                self.grammar.rewind_to(before)
                for t in tokens[:keep]:
                    self.grammar.accept(t)
            else:
                before.close()
        if self.budget.due():
            self.forced = self.forced_end()
        return keep

    def forced_end(self) -> list[int]:
        """The budget's forced end, unless the request's grammar would refuse it (then the block is left to end
        by itself, and the report says so)."""
        assert self.budget is not None
        forced = list(self.budget.force())
        if self.grammar is not None:
            probe = self.grammar.clone()
            try:
                for t in forced:
                    probe.accept(t)
            except GrammarError:
                self.budget.grammar_refused = True
                return []
            finally:
                probe.close()
        return forced

    def commit(
        self, tokens: list[int], n_drafted: int, lps: list[TokenLogprob] | None, vocab: Vocab
    ) -> Iterator[Event]:
        """Commit tokens in order, stopping at end-of-generation, max_tokens or a stop string."""
        for i, tok in enumerate(tokens):
            if vocab.is_eog(tok):
                self.finish = "stop"
                return
            self.generated.append(tok)
            if lps is not None:
                self.logprobs.append(lps[i])
                self.logprobs_pending.append(lps[i])
            text = self.stream.push(vocab.piece(tok))
            if text:
                yield TextEvent(text, 1, 1 if i < n_drafted else 0, tuple(self.logprobs_pending))
                self.logprobs_pending.clear()
            if self.stream.stopped:
                self.finish = "stop"
                return
            if len(self.generated) >= self.request.max_tokens:
                self.finish = "length"
                return

    def step_event(
        self, n_before: int, draft: StepDraft | None, accepted: int, verify_ms: float, t: float
    ) -> StepEvent:
        """The step's event for the live plots and the CLI (draft None: a step that committed a forced end)."""
        return StepEvent(
            index=self.steps,
            source=draft.source_name if draft is not None else "none",
            depth=draft.depth if draft is not None else 0,
            drafted=len(draft.tokens) if draft is not None else 0,
            accepted=accepted,
            emitted=len(self.generated) - n_before,
            draft_ms=round(draft.draft_ms, 3) if draft is not None else 0.0,
            verify_ms=round(verify_ms, 3),
            t=t,
            n_generated=len(self.generated),
        )

    def timings(self, n_prefilled: int, prompt_ms: float, gen_ms: float, cache_n: int) -> Timings:
        """The request's timings, under llama-server's names."""
        n_gen = len(self.generated)
        return Timings(
            prompt_n=n_prefilled,
            prompt_ms=round(prompt_ms, 3),
            prompt_per_second=round(n_prefilled / prompt_ms * 1000.0, 3) if prompt_ms > 0 else 0.0,
            predicted_n=n_gen,
            predicted_ms=round(gen_ms, 3),
            predicted_per_second=round(n_gen / gen_ms * 1000.0, 3) if gen_ms > 0 else 0.0,
            cache_n=cache_n,
            draft_n=self.draft_n,
            draft_n_accepted=self.draft_accepted,
        )


@dataclass
class StepDraft:
    """What one step drafted: the source (None: plain decode), the depth allowed and the proposed tokens."""

    src: DraftSource | None
    depth: int
    tokens: list[int] = field(default_factory=list)
    dists: list[np.ndarray | None] = field(default_factory=list)
    draft_ms: float = 0.0
    declined: int = 0  # tokens the cost stop chose not to draft
    caught_up: bool = False  # its source first fed history it had not seen (Draft.caught_up)

    @property
    def source_name(self) -> str:
        return self.src.name if (self.src is not None and self.depth > 0) else "none"

    def within_vocab(self, n_vocab: int) -> None:
        """Cut the draft at its first id outside the target's vocabulary: such an id must never reach llama_decode."""
        for i, t in enumerate(self.tokens):
            if not 0 <= t < n_vocab:
                self.tokens, self.dists = self.tokens[:i], self.dists[:i]
                return


def with_idle_reasons(per_source: dict[str, dict[str, Any]], reasons: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The request's per-source statistics, each source that could not draft saying why (`idle_reason`)."""
    for name, why in reasons.items():
        per_source.setdefault(name, SourceStats().to_dict())["idle_reason"] = why  # zeros where it never ran
    return per_source


def with_seeded_costs(warm: dict[str, Any] | None, seeded: int) -> dict[str, Any] | None:
    """The request's source-memory record, saying how many verify batch sizes the session's cost table took from the
    memory when this request was the first to need it (a restart's first request; every `dynadraft generate`)."""
    if not seeded:
        return warm
    return {**(warm or {}), "verify_costs_from_memory": seeded}


def top2_margin(logits: np.ndarray) -> float:
    """Top-1 minus top-2 logit: how close greedy decoding was to a tie at this row."""
    top = np.partition(logits, -2)[-2:]
    return float(top[1] - top[0])
