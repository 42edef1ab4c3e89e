"""The MTP draft source: the target's own multi-token-prediction head, kept in step with the target's hidden states."""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from app.runtime.llama import Context, ContextParams, LlamaError, Model, common_prefix
from app.runtime.llama_mtp import MtpContext, capture_hidden, hidden_rows, mtp_unavailable_reason
from app.runtime.sampling import SamplingParams
from app.speculative.settings import SpecSettings
from app.speculative.sources import Draft, SourceEnv, draft_autoregressive

log = logging.getLogger(__name__)


class MtpSource:
    """Drafts with the target's NextN block, applied recursively (one head, as Qwen3.5/3.6 ship it).

    The MTP context's position p holds the pair (token p, the target's hidden state at p - 1; zeros at p = 0), so its
    logits there predict token p + 1 as the target's own head would. Every target decode hands its hidden-state rows
    over (Context.on_decoded); they are kept per position, with the tokens they were computed along, so the MTP
    context catches up lazily: the pairs of every committed token plus the pair of the last token are decoded in one
    batch at the next proposal, whose last row drafts the first token. Each further draft token is paired with the
    head's own hidden state. Rollback drops those draft-only positions; the target side needs nothing (its hybrid
    memory is restored from checkpoints by the session, and re-decoding re-sends the rows).

    A restored target checkpoint has no rows for the positions it brings back, so the conversation cache keeps this
    source's state beside each target checkpoint (checkpoint_state / restored, see there): the MTP context's own
    memory and the one row its next pair needs.

    Greedy drafts stop below p_min on the head's top-1 probability; at T > 0 each token is drawn from the head's
    processed distribution q, which goes to the verifier for exact rejection sampling. Row storage costs
    n_ctx x n_embd floats at most (the hidden state of every position the target holds).
    """

    name: ClassVar[str] = "mtp"
    label: ClassVar[str] = "MTP head (the model's own)"
    needs_draft_model: ClassVar[bool] = False  # it runs on the target's own weights
    cheap_peek: ClassVar[bool] = False
    # One MTP head applied recursively drifts after a few tokens: Qwen's own MTP setups draft 2-4.
    default_n_max: ClassVar[int] = 3
    load_flags: ClassVar[tuple[str, ...]] = ("load_mtp",)  # the target loads its NextN layers (ModelParams)
    cache_attachment: ClassVar[bool] = True  # checkpoint_state / restored: its context and row beside the target's

    @classmethod
    def unavailable_reason(cls, model: Model) -> str | None:
        return mtp_unavailable_reason(model)

    @classmethod
    def create(cls, env: SourceEnv) -> MtpSource | None:
        """The source when the target was loaded with an MTP head this driver runs, else None (see
        mtp_unavailable_reason; the session says why when a request asks for it)."""
        if mtp_unavailable_reason(env.target) is not None:
            return None
        try:
            return attach_mtp(env.target_ctx, env.target, env.target_ctx.params)
        except LlamaError as e:
            log.warning("%s: no MTP draft source: %s", env.target.path.name, e)
            return None

    @classmethod
    def calibration_grid(cls, mode: str) -> tuple[SpecSettings, ...]:
        """The design note's MTP rows (n2,p0 / n4,p0.25 / n4,p0) in quick mode, depths 1-6 by p_min in full, then
        adaptive length and the cost stop."""
        if mode == "full":
            rows = [SpecSettings("mtp", n, 0, p) for n in (1, 2, 3, 4, 6) for p in (0.0, 0.25, 0.55)]
        else:
            rows = [SpecSettings("mtp", 2, 0, 0.0), SpecSettings("mtp", 4, 0, 0.25), SpecSettings("mtp", 4, 0, 0.0)]
        # The cost stop: depth from measured costs, up to the 6 that one head applied recursively can carry.
        return (*rows, SpecSettings("mtp", 6, 0, 0.0, adaptive=True), SpecSettings("mtp", 6, cost_stop=True))

    def __init__(self, target: Context, mtp: MtpContext) -> None:
        self.target = target
        self.mtp = mtp
        self.n_embd = mtp.n_embd
        self._rows = np.zeros((0, self.n_embd), dtype=np.float32)
        self._row_tokens: list[int] = []  # the tokens the stored rows were computed along (row p follows [:p + 1])
        # Rows below this position are unknown (the target's memory was restored without them); a catch-up needs an
        # unbroken run of rows from the last MTP position it keeps.
        self._rows_from = 0
        self._n_paired = 0  # leading MTP positions paired with target hidden states (the rest are draft steps)
        self._why_idle = ""  # why the head cannot draft on the current prefix (said in each empty draft)
        capture_hidden(target)
        target.on_decoded = self._on_target_decoded

    # -- the target's side -------------------------------------------------------------------------------------------
    def _on_target_decoded(self, pos0: int, n: int) -> None:
        rows = hidden_rows(self.target, n)
        end = pos0 + n
        self._grow_rows(end)
        self._rows[pos0:end] = rows
        tokens = self.target.tokens
        if len(self._row_tokens) < pos0:  # positions the target got from elsewhere, with no rows (restored)
            self._row_tokens = list(tokens[:pos0])
            self._rows_from = pos0
        # Rows along other tokens than the target's (restored without telling us) need no mark: a catch-up compares
        # the tokens first.
        self._rows_from = min(self._rows_from, pos0)
        self._row_tokens[pos0:] = tokens[pos0:end]

    def _grow_rows(self, end: int) -> None:
        if end > len(self._rows):
            grown = np.zeros((min(max(end, 2 * len(self._rows), 256), self.target.n_ctx), self.n_embd), np.float32)
            grown[: len(self._rows)] = self._rows
            self._rows = grown

    # -- DraftSource -------------------------------------------------------------------------------------------------
    def _catch_up(self, history: Sequence[int]) -> bool:
        """Pair every token of `history` with the target's hidden state before it; logits of the last pair ready.

        False when some hidden states it needs are unknown (the target's memory was restored from a checkpoint that
        carried no MTP state): no draft then, and the MTP context is left as it was.
        """
        mtp = self.mtp
        n_kv = len(history) - 1
        if common_prefix(self._row_tokens, history) < n_kv:
            return False
        keep = min(common_prefix(mtp.tokens, history), self._n_paired, n_kv)
        if self._rows_from > max(keep - 1, 0):
            return False
        mtp.truncate(keep)  # a plain KV cache: partial removal always works
        self._n_paired = keep
        zero = np.zeros((1, self.n_embd), dtype=np.float32)
        for start in range(keep, n_kv + 1, mtp.n_batch):
            end = min(start + mtp.n_batch, n_kv + 1)
            hidden = self._rows[max(start - 1, 0) : end - 1]
            if start == 0:
                hidden = np.concatenate([zero, hidden])
            mtp.decode_pairs(list(history[start:end]), hidden)
            self._n_paired = end
        return True

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
        n_max = min(n_max, self.mtp.n_ctx - len(history))
        if n_max <= 0 or not history:
            return out
        if not self._catch_up(history):
            out.why_empty = self._why_idle or "the target's hidden states for this prefix are unknown"
            return out
        self._why_idle = ""
        mtp = self.mtp
        # Each further draft token is paired with the head's own hidden state at the token before it.
        draft_autoregressive(
            out,
            lambda: mtp.logits(-1),
            lambda tok: mtp.decode_pairs([tok], mtp.hidden_out(-1)[None, :]),
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

    def rollback(self, n_committed: int) -> None:
        self._n_paired = min(self._n_paired, n_committed)
        self.mtp.truncate(self._n_paired)
        del self._row_tokens[n_committed:]  # rows of rejected draft tokens

    # -- the conversation cache's side (app/engine/cache.py calls these for the target's checkpoints) ----------------
    def checkpoint_state(self, tokens: Sequence[int]) -> bytes | None:
        """This source's part of a target checkpoint holding `tokens`: the MTP context caught up to pair every one of
        them, its memory, and the target's hidden row at the last (the next pair's input). None when the rows are
        not known (a conversation restored without MTP state) or the MTP context fails.

        Cost per checkpoint, computed (not measured) for the Qwen3.6-35B-A3B shape (n_embd 2048, one NextN block
        with 2 KV heads of 256, f16 KV): the NextN layer's K and V, 2 x 2 x 256 x 2 B = 2 KiB per token, plus the
        ~24 B per token of cell metadata llama.cpp's state format adds (seen on the tiny test model: 152 B per token
        for its 128 B of K and V): ~65 MiB at 32k tokens, a tenth of the target's 10 full-attention layers; plus one
        8 KiB row. Time: a copy, plus the MTP forward of the pairs the MTP context lags behind: none after an MTP
        request, the prompt's (one block, beside the trunk's 40) after a request that did not draft with MTP.
        """
        n = len(tokens)
        if n == 0 or common_prefix(self._row_tokens, tokens) < n or self._rows_from > n - 1:
            return None
        try:
            if not self._catch_up(tokens):
                return None
            data, _ = self.mtp.save_state()
        except LlamaError as e:
            log.warning("MTP state not saved with the checkpoint: %s", e)
            return None
        return pack_state(self._rows[n - 1], data)

    def restored(self, tokens: Sequence[int], state: bytes | None) -> None:
        """The target's memory now holds `tokens` from a checkpoint whose MTP part is `state` (None: it had none):
        bring the MTP context and the last row back, or say why the head drafts nothing on this prefix."""
        n = len(tokens)
        self._row_tokens = list(tokens)
        self._rows_from = n  # nothing known until a row comes back with the state or from the next target decode
        unpacked = unpack_state(state, self.n_embd) if state else None
        why = "it was saved without MTP state (an older cache, or MTP off)" if state is None else ""
        if unpacked is not None:
            row, data = unpacked
            try:
                self.mtp.load_state((data, list(tokens)))
            except LlamaError as e:
                self.mtp.clear()
                self._n_paired = 0
                why = str(e)
            else:
                self._n_paired = n
                self._grow_rows(n)
                self._rows[n - 1] = row
                self._rows_from = n - 1
                self._why_idle = ""
                return
        elif state is not None:
            why = "its MTP state is not one this build reads"
        self._why_idle = (
            f"the {n}-token prefix came back from the conversation cache and the MTP head cannot continue from it: "
            f"{why}; MTP drafts again once the conversation is prefilled afresh (cache_prompt off, or the cache "
            "dropped)"
        )
        log.warning("restored a %d-token checkpoint, but the MTP head cannot draft on it: %s", n, self._why_idle)

    def reset(self) -> None:
        """Nothing to forget: the MTP cache is reused across requests through the common prefix, like the target's."""

    def close(self) -> None:
        if self.target.on_decoded == self._on_target_decoded:
            self.target.on_decoded = None
        self.mtp.close()


def attach_mtp(target: Context, model: Model, params: ContextParams) -> MtpSource:
    """An MTP source on `target`'s model (loaded with load_mtp); raises LlamaError saying why it cannot be."""
    mctx = MtpContext(model, params)
    try:
        return MtpSource(target, mctx)
    except LlamaError:
        mctx.close()
        raise


_STATE_MAGIC = b"DDMTP1"
_STATE_HEAD = struct.Struct("<6sI")  # magic, n_embd


def pack_state(row: np.ndarray, data: bytes) -> bytes:
    """The MTP part of a checkpoint: a header, the target's last hidden row (float32) and the MTP context's state."""
    row = np.ascontiguousarray(row, dtype=np.float32)
    return _STATE_HEAD.pack(_STATE_MAGIC, row.size) + row.tobytes() + data


def unpack_state(blob: bytes, n_embd: int) -> tuple[np.ndarray, bytes] | None:
    """(row, MTP context state) from pack_state's bytes, or None when they are not that for this width."""
    head = _STATE_HEAD.size
    if len(blob) <= head + 4 * n_embd:
        return None
    magic, width = _STATE_HEAD.unpack_from(blob)
    if magic != _STATE_MAGIC or width != n_embd:
        return None
    row = np.frombuffer(blob, dtype=np.float32, count=n_embd, offset=head).copy()
    return row, blob[head + 4 * n_embd :]
