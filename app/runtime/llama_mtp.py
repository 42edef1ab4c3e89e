"""llama.cpp's multi-token-prediction (MTP/NextN) staging API over ctypes: target hidden states and an MTP context."""

from __future__ import annotations

import ctypes
from dataclasses import replace
from typing import Any

import llama_cpp as L
import numpy as np

from app.runtime.llama import Context, ContextParams, LlamaError, Model

# The staging header (src/llama-ext.h) is C++ without extern "C", so libllama exports these under their Itanium-ABI
# (GCC/Clang) names; the plain C name is tried first in case a later build exports it. MSVC builds: unverified.
_SYMBOLS = {
    "set_embeddings_nextn": ("llama_set_embeddings_nextn", "_Z26llama_set_embeddings_nextnP13llama_contextbb"),
    "get_embeddings_nextn": ("llama_get_embeddings_nextn", "_Z26llama_get_embeddings_nextnP13llama_context"),
    "get_embeddings_nextn_ith": (
        "llama_get_embeddings_nextn_ith",
        "_Z30llama_get_embeddings_nextn_ithP13llama_contexti",
    ),
}
_SIGNATURES = {
    "set_embeddings_nextn": ([ctypes.c_void_p, ctypes.c_bool, ctypes.c_bool], None),
    "get_embeddings_nextn": ([ctypes.c_void_p], ctypes.POINTER(ctypes.c_float)),
    "get_embeddings_nextn_ith": ([ctypes.c_void_p, ctypes.c_int32], ctypes.POINTER(ctypes.c_float)),
}
# Architectures whose MTP is one NextN block applied recursively with its own KV cache (llama.cpp's qwen35/qwen35moe
# path). Chained heads (step35) and heads sharing the target's KV (gemma4 assistants) need another driver.
SUPPORTED_ARCHS = frozenset({"qwen35", "qwen35moe"})


def _bind() -> dict[str, Any] | None:
    lib = L.llama_cpp._lib
    out = {}
    for key, names in _SYMBOLS.items():
        fn = next((getattr(lib, n) for n in names if hasattr(lib, n)), None)
        if fn is None:
            return None
        fn.argtypes, fn.restype = _SIGNATURES[key]
        out[key] = fn
    return out


_API = _bind()


def mtp_unavailable_reason(model: Model) -> str | None:
    """Why this loaded model cannot draft with its MTP head here, or None when it can."""
    name = model.path.name
    if model.n_layer_nextn == 0:
        return f"{name} has no MTP (NextN) layers"
    arch = model.meta("general.architecture") or "?"
    if arch not in SUPPORTED_ARCHS:
        supported = ", ".join(sorted(SUPPORTED_ARCHS))
        return f"{name}: MTP drafting for architecture {arch!r} is not supported (only {supported})"
    if model.n_layer_nextn != 1:
        return f"{name} has {model.n_layer_nextn} MTP layers; this driver runs exactly one"
    if not model.params.load_mtp:
        return f"{name} was loaded without its MTP layers (MTP turned off)"
    if _API is None:
        return "this llama.cpp build does not export the MTP staging API (llama_get_embeddings_nextn)"
    return None


def n_embd_out(model: Model) -> int:
    return int(L.llama_model_n_embd_out(model.ptr))


def capture_hidden(ctx: Context) -> None:
    """Make a target context output its NextN hidden state (after the final norm) for every token it decodes."""
    assert _API is not None
    _API["set_embeddings_nextn"](ctx.ptr, True, False)  # unmasked: a row per batch token, not only logit rows


def hidden_rows(ctx: Context, n: int) -> np.ndarray:
    """Copy of the hidden-state rows of the last decode's first `n` batch tokens (capture_hidden must be on)."""
    assert _API is not None
    ptr = _API["get_embeddings_nextn"](ctx.ptr)
    if not ptr:
        raise LlamaError("the target produced no hidden states for the MTP head")
    return np.ctypeslib.as_array(ptr, shape=(n, n_embd_out(ctx.model))).copy()


class MtpContext(Context):
    """A context of type MTP on the target's own weights: each decoded token is paired with a hidden-state row.

    Position p holds (token p, the hidden state that predicted it); its logits predict token p + 1 and its own
    hidden state (hidden_out) feeds the next draft step. Its memory is a plain attention KV cache of the NextN
    layer, so partial removal (truncate) works even when the target is hybrid.
    """

    def __init__(self, model: Model, params: ContextParams) -> None:
        reason = mtp_unavailable_reason(model)
        if reason is not None:
            raise LlamaError(reason)  # checked here: a graph without the NextN tensors would hit a GGML_ASSERT
        super().__init__(model, replace(params, mtp=True))
        assert _API is not None
        self.n_embd = n_embd_out(model)
        self._rows = np.zeros((self.n_batch, self.n_embd), dtype=np.float32)
        _API["set_embeddings_nextn"](self.ptr, True, True)  # masked: hidden rows only where logits are requested

    def decode_pairs(self, tokens: list[int], hidden: np.ndarray, logits_from: int | None = None) -> None:
        """Decode `tokens` paired row by row with `hidden` (len(tokens) x n_embd)."""
        n = len(tokens)
        if hidden.shape != (n, self.n_embd):
            raise LlamaError(f"internal: {hidden.shape} hidden rows for {n} MTP tokens of width {self.n_embd}")
        if n > self.n_batch:
            raise LlamaError(f"internal: decode of {n} tokens exceeds n_batch {self.n_batch}")
        self._rows[:n] = hidden
        # A batch carrying both token ids and embedding rows: llama.cpp's MTP graph embeds the ids and takes the rows
        # as the hidden-state input. The pointer is ours, so it is cleared before llama_batch_free can see it.
        self._batch.embd = self._rows.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        try:
            self.decode(tokens, logits_from)
        finally:
            self._batch.embd = None

    def hidden_out(self, row: int) -> np.ndarray:
        """The NextN hidden state of batch row `row` of the last decode (a row with logits), as a copy."""
        assert _API is not None
        ptr = _API["get_embeddings_nextn_ith"](self.ptr, row)
        if not ptr:
            raise LlamaError(f"no MTP hidden state for batch row {row}")
        return np.ctypeslib.as_array(ptr, shape=(self.n_embd,)).copy()
