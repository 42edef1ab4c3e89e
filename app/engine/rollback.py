"""Undoing a rejected draft in the target's memory: KV truncation, a recurrent snapshot, or checkpoint and replay."""

from __future__ import annotations

from app.runtime.llama import Context, LlamaError

State = tuple[bytes, list[int]]  # Context.save_state


class RollbackFailed(Exception):
    """The memory could not be put back: speculation must stop. It was rebuilt from the committed tokens, unless
    `rebuild_error` says why that failed too."""

    def __init__(self, reason: str, rebuild_error: LlamaError | None = None) -> None:
        super().__init__(reason)
        self.rebuild_error = rebuild_error


def checkpoint(ctx: Context, n_draft: int) -> State | None:
    """A saved state to return to when the verify of `n_draft` tokens cannot be undone in place: recurrent memory
    drops rejected positions only inside its snapshot window. Raises LlamaError when saving fails."""
    if not n_draft or ctx.can_drop(n_draft + 1, n_draft):  # the verify decodes [last] + draft; at most n are rejected
        return None
    return ctx.save_state()


def restore(ctx: Context, history: list[int], accepted: list[int], saved: State | None) -> None:
    """Put the memory back to `history` (its last token decoded by the verify) plus the accepted draft tokens."""
    if ctx.truncate(len(history) + len(accepted)):
        return
    # Recurrent/hybrid memory: restore the checkpoint and replay what was accepted.
    try:
        if saved is None:
            raise LlamaError("the memory cannot drop a partial range and no checkpoint was taken")
        ctx.load_state(saved)
        ctx.decode([history[-1], *accepted])
    except LlamaError as e:
        # Never continue from a wrong state: rebuild it from the committed tokens (the caller decodes plainly on).
        reason = f"rollback of the target memory failed ({e})"
        ctx.clear()
        try:
            ctx.prefill([*history, *accepted])
        except LlamaError as e2:
            raise RollbackFailed(reason, e2) from e2
        raise RollbackFailed(reason) from e
