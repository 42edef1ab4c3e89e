"""Draft sources behind one small interface: a second GGUF (draft model) and prompt n-gram lookup.

Each source is one class that declares its name and needs (see `DraftSource`); app/speculative/registry.py lists
them, and everything that enumerates sources (engine, pool, calibration grid, API schema, GUI) reads the registry.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from app.runtime.sampling import SamplingParams, adjust_logits, distribution, draw
from app.speculative.adaptive import certain_depth
from app.speculative.settings import SpecSettings

if TYPE_CHECKING:  # llama.cpp loads with the first model, not with this module (the registry imports it)
    from app.runtime.llama import Context, Model

# llama.cpp's own pairing rules (common/speculative.cpp): vocab sizes may differ by at most this much, and token
# texts must agree from this id on (the first few ids are control tokens that families number differently).
VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START_TOKEN_ID = 5
CATCH_UP_SAMPLE = 16  # a draft model's prefill of at least this many tokens measures its prefill speed
# What a draft model feeds before a draft when it drafted the step before: the target's token, and after a wholly
# accepted draft also its own last token (drafted, never decoded).
STEADY_SYNC = 2


@dataclass
class Draft:
    """Tokens a source proposes after the committed history, with what the verifier needs to stay exact."""

    source: str
    tokens: list[int] = field(default_factory=list)
    # The draft's top-1 probability at each position; NaN where no confidence stop asked for it (p_min 0, greedy).
    confidence: list[float] = field(default_factory=list)
    dists: list[np.ndarray | None] = field(default_factory=list)  # q each token was drawn from; None = point mass
    draft_ms: float = 0.0
    # Why a source that was asked to draft could not (not for a draft merely cut short), for the response to say.
    why_empty: str = ""
    # Tokens the cost stop declined: the depth it was allowed beyond what it drafted (not rejections: never tested).
    declined: int = 0
    # Tokens of the history a source with its own KV cache (a draft model) fed before drafting: more than
    # STEADY_SYNC is a catch-up after steps it sat out, whose ms are in draft_ms but are no cost of its tokens.
    synced: int = 0

    @property
    def caught_up(self) -> bool:
        return self.synced > STEADY_SYNC


@dataclass(frozen=True)
class SourceEnv:
    """What a loaded session offers its sources: the target model and context, and the draft model's context (None
    when no draft GGUF is loaded). A source that needs more (another head, a file) takes it from these."""

    target: Model
    target_ctx: Context
    draft_ctx: Context | None


class DraftSource(Protocol):
    """One draft source: a class declaring its name and needs, whose instances propose drafts for one session.

    Declarations (class attributes):
      name: the value of `speculative.source` that selects it (unique; not "none" or "pool");
      label: how the GUI lists it;
      needs_draft_model: it runs on the draft GGUF (`EngineConfig.draft`), a second model's memory and time; requests
        for it are refused with "needs a draft model" when none is loaded;
      cheap_peek: proposing costs microseconds (no model call), so the pool proposes first and lets the source
        compete only on steps where it has a draft (prompt lookup).
    Optional declarations (read with defaults by the registry, the loader and the conversation cache):
      default_n_max: the depth an override naming it but no n_max drafts (default: settings.DEFAULT_N_MAX);
      unavailable_reason(model): why it cannot run on that model, said when a request asks for it;
      cache_attachment: True when its instance keeps state beside the target's memory that must come back with the
        target's checkpoints (app/engine/cache.Attachment: checkpoint_state / restored), as the MTP head's does.
    Class methods:
      create(env): the source for a loaded session, or None when it cannot run there (e.g. no draft model);
      calibration_grid(mode): the settings a calibration measures for it ("quick" or "full").
    Instance methods: `propose` drafts up to n_max tokens continuing `history` (never more; fewer than n_min: none)
    and, given `floors` (the cost stop, app/speculative/adaptive.cost_stop_step), stops before token i+1 once the
    product of its confidences falls below floors[i] (a source without the argument still works: see takes_floors);
    `rollback(n)` says the first n tokens of the history are committed; `reset` forgets per-request state; `close`
    frees what `create` allocated.
    """

    name: ClassVar[str]
    label: ClassVar[str]
    needs_draft_model: ClassVar[bool]
    cheap_peek: ClassVar[bool]

    @classmethod
    def create(cls, env: SourceEnv) -> DraftSource | None: ...

    @classmethod
    def calibration_grid(cls, mode: str) -> tuple[SpecSettings, ...]: ...

    def propose(
        self,
        history: Sequence[int],
        n_max: int,
        n_min: int,
        p_min: float,
        sampling: SamplingParams,
        rng: np.random.Generator,
        floors: Sequence[float] | None = None,
    ) -> Draft: ...

    def rollback(self, n_committed: int) -> None: ...

    def reset(self) -> None: ...

    def close(self) -> None: ...


class IncompatibleDraft(ValueError):
    """The draft model cannot draft for this target; the message says which llama.cpp rule failed."""


def check_pair(target: Model, draft: Model) -> None:
    """Raise IncompatibleDraft unless `draft` shares the target's vocabulary by llama.cpp's rules."""
    tv, dv = target.vocab, draft.vocab
    if tv.type != dv.type:
        raise IncompatibleDraft(f"vocabulary types differ (target {tv.type}, draft {dv.type})")
    if tv.add_bos != dv.add_bos or tv.add_eos != dv.add_eos or tv.bos != dv.bos or tv.eos != dv.eos:
        raise IncompatibleDraft(
            f"special tokens differ (target bos={tv.bos} add_bos={tv.add_bos} eos={tv.eos} add_eos={tv.add_eos}; "
            f"draft bos={dv.bos} add_bos={dv.add_bos} eos={dv.eos} add_eos={dv.add_eos})"
        )
    if abs(tv.n_vocab - dv.n_vocab) > VOCAB_MAX_SIZE_DIFFERENCE:
        raise IncompatibleDraft(
            f"vocabulary sizes differ by more than {VOCAB_MAX_SIZE_DIFFERENCE} "
            f"(target {tv.n_vocab}, draft {dv.n_vocab})"
        )
    for i in range(VOCAB_CHECK_START_TOKEN_ID, min(tv.n_vocab, dv.n_vocab)):
        if tv.text(i) != dv.text(i):
            raise IncompatibleDraft(f"token {i} differs: target {tv.text(i)!r}, draft {dv.text(i)!r}")


def fit_to_vocab(logits: np.ndarray, n_target: int) -> np.ndarray:
    """Draft logits over the target's vocabulary, so q and p index the same ids.

    llama.cpp pairs models whose vocab sizes differ by up to 128 (Qwen2.5 7B-32B have 152064 ids, their 0.5B draft
    151936). Ids only the draft has are dropped, so it never proposes a token the target cannot decode; ids only the
    target has get probability 0 under q. Drafting from this renormalised q keeps rejection sampling exact: the
    verifier only needs the q each token was actually drawn from.
    """
    n = logits.shape[0]
    if n == n_target:
        return logits
    if n > n_target:
        return logits[:n_target]
    out = np.full(n_target, -np.inf, dtype=np.float32)
    out[:n] = logits
    return out


# What a greedy draft's p_min is compared with: the top-1 token's probability among the CONFIDENCE_TOP_K most likely
# tokens, as llama.cpp's drafts judge it (common/speculative.cpp: a top-k 10 sampler, then p of the first candidate),
# so a p_min taken from a llama-server recipe (e.g. MTP n4, p_min 0.55) stops drafts where it stops them there. A
# softmax over the whole vocabulary would give a lower number for the same logits and stop drafts sooner.
CONFIDENCE_TOP_K = 10
# The top K lie within the smallest of these gaps below the top-1 that holds K logits, so only those are sorted (a
# 248k-entry partition costs ~0.4 ms, a masked pass ~0.05). Past the last, a logit adds under K x e^-20 (5e-8) to
# the softmax's sum (>= 1): negligible, so the top K are taken from what is within it.
_GAPS = (2.0, 5.0, 10.0, 20.0)


def _top1_probability(logits: np.ndarray) -> tuple[int, float]:
    """The argmax and its probability among the CONFIDENCE_TOP_K most likely tokens (llama.cpp's draft p_min)."""
    tok = int(np.argmax(logits))
    top = float(logits[tok])
    for gap in _GAPS:
        near = logits[logits >= top - gap]
        if near.shape[0] >= CONFIDENCE_TOP_K:
            break
    if near.shape[0] > CONFIDENCE_TOP_K:
        near = np.partition(near, -CONFIDENCE_TOP_K)[-CONFIDENCE_TOP_K:]
    return tok, 1.0 / float(np.exp(near.astype(np.float64) - top).sum())


def _pick_draft_token(
    logits: np.ndarray,
    params: SamplingParams,
    rng: np.random.Generator,
    need_confidence: bool,
    history: Sequence[int],
) -> tuple[int, float, np.ndarray | None]:
    """One draft token from a draft's logits: (token, its confidence, q it was drawn from or None for greedy).

    Greedy (T = 0) takes the top-1 (after the bias, penalties and DRY, as the target's greedy pick) and reports its
    probability; T > 0 draws from q = the processed distribution, which the verifier needs for exact rejection
    sampling. Without a confidence stop a greedy pick is the argmax alone: the softmax over a 248k vocabulary
    (Qwen3.5/3.6) took 0.38 ms per drafted token on the dev machine's Xeon core against 0.03 ms for the argmax; four
    of them are ~9 % of the 17 ms MTP n4 step measured on the H200.
    """
    if params.greedy:
        if params.adjusts_logits:
            logits = adjust_logits(logits, params, history)
        if not need_confidence:
            return int(np.argmax(logits)), float("nan"), None
        tok, conf = _top1_probability(logits)
        return tok, conf, None
    q = distribution(logits, params, history)
    return draw(q, rng), float(q.max()), q


def catch_up_ms(source: object, missing: int) -> float:
    """The one-off ms `source` pays before its next draft when its KV lacks `missing` tokens of the committed
    history: those tokens at its measured prefill speed (0 for a source without a KV cache, or not measured yet)."""
    per = getattr(source, "prefill_ms_per_token", None)
    return 0.0 if per is None else max(0, missing) * per


def takes_floors(source: object) -> bool:
    """Whether `source.propose` accepts the cost stop's `floors` (a third-party or older source may not)."""
    try:
        return "floors" in inspect.signature(source.propose).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return False


def draft_autoregressive(
    out: Draft,
    logits: Callable[[], np.ndarray],
    advance: Callable[[int], None],
    n_max: int,
    n_min: int,
    p_min: float,
    sampling: SamplingParams,
    rng: np.random.Generator,
    floors: Sequence[float] | None = None,
    history: Sequence[int] = (),
) -> None:
    """Fill `out` one token at a time: pick from `logits()`, stop below p_min, at n_max, or (the cost stop, with
    `floors`) once the product of the confidences so far falls below floors[i], else `advance(token)` (the draft
    model decodes it) and go on. A draft shorter than n_min is dropped. `history`: the committed tokens, which the
    penalties and DRY read (with the draft's own tokens after them)."""
    draft_params = sampling.for_draft()
    need_confidence = p_min > 0.0 or floors is not None
    chance = 1.0  # that every token drafted so far is accepted, by the draft's own confidence
    seen = list(history) if draft_params.adjusts_logits else []
    while True:
        tok, conf, q = _pick_draft_token(logits(), draft_params, rng, need_confidence, seen)
        if conf < p_min:  # False for NaN: no stop asked for
            break
        if floors is not None:
            i = len(out.tokens)
            chance *= conf
            if i >= len(floors) or chance < floors[i]:
                out.declined = max(0, n_max - i)
                break
        out.tokens.append(tok)
        out.confidence.append(conf)
        out.dists.append(q)
        if len(out.tokens) >= n_max:
            break
        if draft_params.adjusts_logits:
            seen.append(tok)
        advance(tok)
    if len(out.tokens) < max(n_min, 1):
        if out.declined:  # the stop cut it below n_min: the whole allowed depth went undrafted
            out.declined = n_max
        out.tokens, out.confidence, out.dists = [], [], []


class DraftModelSource:
    """A second GGUF with the same vocabulary, in its own context and KV cache.

    Greedy top-1 drafting (T = 0) stops when the top-1 probability falls below p_min or at n_max. At T > 0 it
    draws from its own processed distribution q (the target's knobs, penalties and DRY included) and hands q to the
    verifier for exact rejection sampling. A draft shorter than n_min is dropped.
    """

    name: ClassVar[str] = "draft"
    label: ClassVar[str] = "Draft model"
    needs_draft_model: ClassVar[bool] = True
    cheap_peek: ClassVar[bool] = False

    def __init__(self, ctx: Context, n_target_vocab: int | None = None) -> None:
        self.ctx = ctx
        # The target's vocabulary size (None: the same as the draft's); see fit_to_vocab.
        self.n_target_vocab = n_target_vocab if n_target_vocab is not None else ctx.n_vocab
        # Recurrent/hybrid drafts: the state at the committed history, taken before drafting past it, so that a
        # rollback restores it instead of re-prefilling everything (the same rule as the target's verify).
        self._checkpoint: tuple[bytes, list[int]] | None = None
        # Decayed sums (tokens, ms) of its catch-up prefills of CATCH_UP_SAMPLE tokens or more: prefill_ms_per_token,
        # what the pool and Dynamic Draft charge before its first draft in a request (see kv_prefix). Sums, not a
        # mean of ratios, so a long prefill (the calibration's) outweighs short ones, whose fixed overheads overstate
        # the ms per token (several times on a GPU).
        self.prefill_sums: tuple[float, float] = (0.0, 0.0)

    @property
    def prefill_ms_per_token(self) -> float | None:
        """Measured ms per token of a catch-up prefill (None until one of CATCH_UP_SAMPLE tokens ran)."""
        n, ms = self.prefill_sums
        return ms / n if n > 0 else None

    @classmethod
    def create(cls, env: SourceEnv) -> DraftModelSource | None:
        return None if env.draft_ctx is None else cls(env.draft_ctx, n_target_vocab=env.target.vocab.n_vocab)

    @classmethod
    def calibration_grid(cls, mode: str) -> tuple[SpecSettings, ...]:
        if mode == "full":
            grid = [SpecSettings(cls.name, n, 0, p) for n in (1, 2, 3, 4, 6, 8) for p in (0.0, 0.25, 0.5, 0.75)]
        else:
            # Quick must cover the 1.5B/0.5B pair up to 4k context in 10 minutes on a 2-core CPU: a coarse depth
            # ladder, one confidence stop, and the adaptive variant (which picks its depth itself).
            grid = [SpecSettings(cls.name, n, 0, 0.0) for n in (2, 4, 8)]
            grid.append(SpecSettings(cls.name, 4, 0, 0.5))
        # The cost stop picks its depth from this device's measured costs, up to the draft cap.
        return (*grid, SpecSettings(cls.name, 8, 0, 0.0, adaptive=True), SpecSettings(cls.name, 16, cost_stop=True))

    def _sync(self, history: Sequence[int]) -> int | None:
        """Make the draft KV hold history[:-1] and decode history[-1] so its logits are fresh; returns how many
        tokens that fed.

        None when the history holds an id the draft's (smaller) vocabulary lacks: the draft cannot read it, so it
        proposes nothing for the rest of that history (the target decodes plainly; still exact)."""
        from app.runtime.llama import common_prefix

        ctx = self.ctx
        keep = min(common_prefix(ctx.tokens, history), len(history) - 1)
        if not ctx.truncate(keep):
            ctx.clear()  # recurrent memory: no partial removal, so re-prefill from scratch (correct, slower)
        rest = history[len(ctx.tokens) :]
        if any(not 0 <= t < ctx.n_vocab for t in rest):
            return None
        t0 = time.perf_counter()
        ctx.prefill(rest)
        if len(rest) >= CATCH_UP_SAMPLE:  # a few tokens are a decode, not a prefill: their ms/token would mislead
            n, ms = self.prefill_sums
            self.prefill_sums = (0.7 * n + len(rest), 0.7 * ms + (time.perf_counter() - t0) * 1000.0)
        if ctx.model.is_recurrent:
            from app.runtime.llama import LlamaError  # loaded by now: this context exists

            try:
                self._checkpoint = ctx.save_state()
            except LlamaError:
                self._checkpoint = None
        return len(rest)

    def propose(
        self,
        history: Sequence[int],
        n_max: int,
        n_min: int,
        p_min: float,
        sampling: SamplingParams,
        rng: np.random.Generator,
        floors: Sequence[float] | None = None,
    ) -> Draft:
        t0 = time.perf_counter()
        out = Draft(self.name)
        room = self.ctx.n_ctx - len(history)
        n_max = min(n_max, room)
        if n_max <= 0 or not history or (synced := self._sync(history)) is None:
            return out
        out.synced = synced
        draft_autoregressive(
            out,
            lambda: fit_to_vocab(self.ctx.logits(-1), self.n_target_vocab),
            lambda tok: self.ctx.decode([tok]),
            n_max,
            n_min,
            p_min,
            sampling,
            rng,
            floors,
            history,
        )
        out.draft_ms = (time.perf_counter() - t0) * 1000.0
        return out

    def kv_prefix(self, history: Sequence[int]) -> int:
        """How many leading tokens of `history` its KV cache already holds: the rest is its catch-up."""
        from app.runtime.llama import common_prefix

        return common_prefix(self.ctx.tokens, history)

    def rollback(self, n_committed: int) -> None:
        if self.ctx.truncate(n_committed):
            return
        cp, self._checkpoint = self._checkpoint, None
        if cp is not None and len(cp[1]) <= n_committed:  # taken at the committed history this draft continued
            from app.runtime.llama import LlamaError

            try:
                self.ctx.load_state(cp)
                return
            except LlamaError:
                pass
        self.ctx.clear()

    def reset(self) -> None:
        """Nothing to forget: the KV cache is reused across requests through the common prefix."""

    def close(self) -> None:
        self.ctx.close()


class PromptLookupSource:
    """Prompt-lookup drafting: find the latest earlier occurrence of the last n tokens and propose what followed.

    Several n-gram sizes are tried, longest first, so a long exact match (copy-heavy text) wins over a short one.
    The index is updated incrementally as the history grows and rebuilt when it changes underneath.
    """

    name: ClassVar[str] = "lookup"
    label: ClassVar[str] = "Prompt lookup"
    needs_draft_model: ClassVar[bool] = False
    cheap_peek: ClassVar[bool] = True

    @classmethod
    def create(cls, env: SourceEnv) -> PromptLookupSource:
        return cls()

    @classmethod
    def calibration_grid(cls, mode: str) -> tuple[SpecSettings, ...]:
        depths = [SpecSettings(cls.name, n, 0, 0.0) for n in (2, 4, 8)] if mode == "full" else []
        return (*depths, SpecSettings(cls.name, 8, 0, 0.0, adaptive=True))

    def __init__(self, ngram_max: int = 4, ngram_min: int = 1) -> None:
        if not 1 <= ngram_min <= ngram_max:
            raise ValueError("need 1 <= ngram_min <= ngram_max")
        self.sizes = tuple(range(ngram_max, ngram_min - 1, -1))
        self._indexed: list[int] = []
        # n -> n-gram -> position right after its latest occurrence that has a continuation
        self._index: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in self.sizes}

    def _update(self, history: Sequence[int]) -> None:
        n_old = len(self._indexed)
        if n_old > len(history) or list(history[:n_old]) != self._indexed:
            self._indexed = []
            self._index = {n: {} for n in self.sizes}
            n_old = 0
        h = list(history)
        for end in range(max(n_old, 1), len(h)):  # an n-gram ending before `end` is followed by h[end]
            for n in self.sizes:
                if end >= n:
                    self._index[n][tuple(h[end - n : end])] = end
        self._indexed = h

    def propose(
        self,
        history: Sequence[int],
        n_max: int,
        n_min: int,
        p_min: float,
        sampling: SamplingParams,
        rng: np.random.Generator,
        floors: Sequence[float] | None = None,
    ) -> Draft:
        """With `floors` (the cost stop) its tokens count as certain (chance 1), so the draft ends before the first
        floor above 1."""
        t0 = time.perf_counter()
        out = Draft(self.name)
        if floors is not None:
            cut = certain_depth(floors)
            out.declined, n_max = max(0, n_max - cut), min(n_max, cut)
        if n_max <= 0:
            return out
        self._update(history)
        h = self._indexed
        for n in self.sizes:
            if len(h) <= n:
                continue
            start = self._index[n].get(tuple(h[-n:]))
            if start is not None and start < len(h):
                cont = h[start : start + n_max]
                if len(cont) >= max(n_min, 1):
                    out.tokens = list(cont)
                    out.confidence = [1.0] * len(cont)
                    out.dists = [None] * len(cont)
                break
        out.draft_ms = (time.perf_counter() - t0) * 1000.0
        return out

    def rollback(self, n_committed: int) -> None:
        """Stateless beyond the index, which resynchronises itself from the history."""

    def reset(self) -> None:
        self._indexed = []
        self._index = {n: {} for n in self.sizes}

    def close(self) -> None:
        """Nothing allocated."""


def load_draft_model(target: Model, path: str, ctx_params, model_params=None) -> tuple[Model, Context]:
    """Load a draft GGUF, check it pairs with `target`, and give it its own context."""
    from app.runtime.llama import Context, LlamaError, Model

    draft = Model(path, model_params)
    try:
        check_pair(target, draft)
    except IncompatibleDraft:
        draft.close()
        raise
    try:
        ctx = Context(draft, ctx_params)
    except LlamaError:
        draft.close()
        raise
    return draft, ctx
