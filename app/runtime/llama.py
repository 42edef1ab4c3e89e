"""A thin, typed layer over llama-cpp-python's low-level C API: model, vocabulary, context, batch and KV memory."""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp as L
import numpy as np

from app.runtime.device import FLASH_ATTN_MODES
from app.runtime.threads import resolve_threads

log = logging.getLogger(__name__)

_init_lock = threading.Lock()
_initialised = False
_log_cb = None  # keep a reference: ctypes callbacks are freed with their Python object


class LlamaError(RuntimeError):
    """llama.cpp refused an operation (load, decode, tokenize); the message says which and why."""


def init_backend() -> None:
    """Initialise llama.cpp once per process and route its log through Python logging (quiet by default)."""
    global _initialised, _log_cb
    with _init_lock:
        if _initialised:
            return
        L.llama_backend_init()

        @L.llama_log_callback
        def _forward(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
            # llama.cpp prints hundreds of info lines per load; keep warnings and errors only.
            if level in (3, 4):  # GGML_LOG_LEVEL_WARN, GGML_LOG_LEVEL_ERROR
                log.warning(text.decode("utf-8", "replace").rstrip())

        _log_cb = _forward
        if not os.environ.get("DYNADRAFT_LLAMA_LOG"):
            L.llama_log_set(_log_cb, ctypes.c_void_p(0))
        _initialised = True


def system_info() -> str:
    init_backend()
    return L.llama_print_system_info().decode("utf-8", "replace").strip()


@dataclass(frozen=True)
class ModelParams:
    """How to load a GGUF: layers offloaded to the GPU and whether CPU weight repacking is allowed."""

    n_gpu_layers: int = 0
    use_extra_bufts: bool = True  # CPU weight repacking; off gives batch-size-independent kernels on some CPUs
    load_mtp: bool = False  # also load the GGUF's multi-token-prediction (NextN) layers, for an MTP draft context


@dataclass(frozen=True)
class FimTokens:
    """A model's fill-in-the-middle ids: prefix, suffix and middle; repository and file separators, -1 if absent."""

    pre: int
    suf: int
    mid: int
    rep: int = -1
    sep: int = -1

    @classmethod
    def of(cls, vocab: L.llama_vocab_p) -> FimTokens | None:
        """The vocabulary's, or None where it lacks any of prefix, suffix and middle."""
        pre, suf, mid = (int(f(vocab)) for f in (L.llama_vocab_fim_pre, L.llama_vocab_fim_suf, L.llama_vocab_fim_mid))
        if min(pre, suf, mid) < 0:
            return None
        return cls(pre, suf, mid, rep=int(L.llama_vocab_fim_rep(vocab)), sep=int(L.llama_vocab_fim_sep(vocab)))


class Vocab:
    """Token ids <-> text for one model, with llama.cpp's own tokenizer."""

    def __init__(self, model_ptr: L.llama_model_p) -> None:
        self.ptr = L.llama_model_get_vocab(model_ptr)
        self.n_vocab = int(L.llama_vocab_n_tokens(self.ptr))
        self.type = int(L.llama_vocab_type(self.ptr))
        self.bos = int(L.llama_vocab_bos(self.ptr))
        self.eos = int(L.llama_vocab_eos(self.ptr))
        self.add_bos = bool(L.llama_vocab_get_add_bos(self.ptr))
        self.add_eos = bool(L.llama_vocab_get_add_eos(self.ptr))
        # Fill-in-the-middle markers (Qwen's <|fim_prefix|>, CodeLlama's <PRE>, ...) as llama.cpp finds them.
        self.fim = FimTokens.of(self.ptr)
        self._piece_cache: dict[int, bytes] = {}
        self._all_pieces: list[bytes] | None = None
        self._eog = np.array([bool(L.llama_vocab_is_eog(self.ptr, t)) for t in range(self.n_vocab)], dtype=bool)

    def tokenize(self, text: str, add_special: bool, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 16
        buf = (L.llama_token * cap)()
        n = L.llama_tokenize(self.ptr, data, len(data), buf, cap, add_special, parse_special)
        if n < 0:
            cap = -n
            buf = (L.llama_token * cap)()
            n = L.llama_tokenize(self.ptr, data, len(data), buf, cap, add_special, parse_special)
            if n < 0:
                raise LlamaError(f"tokenization failed ({n})")
        return list(buf[:n])

    def piece(self, token: int, special: bool = False) -> bytes:
        """The raw bytes of one token (may be part of a multi-byte UTF-8 character)."""
        key = token if not special else -1 - token
        cached = self._piece_cache.get(key)
        if cached is not None:
            return cached
        if not 0 <= token < self.n_vocab:  # llama.cpp indexes its token table unchecked here: that would abort
            raise ValueError(f"token {token} is not in the vocabulary (0..{self.n_vocab - 1})")
        buf = ctypes.create_string_buffer(64)
        n = L.llama_token_to_piece(self.ptr, token, buf, 64, 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = L.llama_token_to_piece(self.ptr, token, buf, -n, 0, special)
        out = buf.raw[: max(n, 0)]
        self._piece_cache[key] = out
        return out

    def all_pieces(self) -> list[bytes]:
        """Every token's bytes, control tokens rendered as text (what DRY's sequence breakers are matched against);
        read once, on first use."""
        if self._all_pieces is None:
            self._all_pieces = [self.piece(t, special=True) for t in range(self.n_vocab)]
        return self._all_pieces

    def pieces(self, text: str, add_special: bool, parse_special: bool = True) -> list[tuple[int, bytes]]:
        """tokenize's ids with their bytes, control tokens rendered as text (llama-server's `with_pieces`)."""
        return [(t, self.piece(t, special=True)) for t in self.tokenize(text, add_special, parse_special)]

    def detokenize(self, tokens: Sequence[int], special: bool = False) -> str:
        return b"".join(self.piece(t, special) for t in tokens).decode("utf-8", "replace")

    def is_eog(self, token: int) -> bool:
        return bool(self._eog[token]) if 0 <= token < self.n_vocab else False

    def text(self, token: int) -> bytes:
        return L.llama_vocab_get_text(self.ptr, token) or b""


class Model:
    """A loaded GGUF model (weights only; contexts are created from it)."""

    def __init__(self, path: str | Path, params: ModelParams | None = None) -> None:
        init_backend()
        self.path = Path(path)
        if not self.path.is_file():
            raise LlamaError(f"model file not found: {self.path}")
        params = params or ModelParams()
        mp = L.llama_model_default_params()
        mp.n_gpu_layers = params.n_gpu_layers
        mp.use_extra_bufts = params.use_extra_bufts
        mp.load_mtp = params.load_mtp
        ptr = L.llama_model_load_from_file(str(self.path).encode("utf-8"), mp)
        if not ptr:
            raise LlamaError(f"llama.cpp could not load {self.path.name} (unsupported format or corrupt file)")
        self.ptr = ptr
        self.params = params
        self.vocab = Vocab(ptr)
        self.n_ctx_train = int(L.llama_model_n_ctx_train(ptr))
        self.n_params = int(L.llama_model_n_params(ptr))
        self.n_layer = int(L.llama_model_n_layer(ptr))
        self.size_bytes = int(L.llama_model_size(ptr))
        self.is_recurrent = bool(L.llama_model_is_recurrent(ptr)) or bool(L.llama_model_is_hybrid(ptr))
        self.n_layer_nextn = int(L.llama_model_n_layer_nextn(ptr))  # MTP/NextN blocks in the file (loaded or not)
        buf = ctypes.create_string_buffer(256)
        L.llama_model_desc(ptr, buf, 256)
        self.description = buf.value.decode("utf-8", "replace")
        tmpl = L.llama_model_chat_template(ptr, None)
        self.chat_template: str | None = tmpl.decode("utf-8", "replace") if tmpl else None

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(4096)
        n = L.llama_model_meta_val_str(self.ptr, key.encode(), buf, 4096)
        return buf.value.decode("utf-8", "replace") if n >= 0 else None

    def close(self) -> None:
        if getattr(self, "ptr", None):
            L.llama_model_free(self.ptr)
            self.ptr = None

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass


@dataclass(frozen=True)
class ContextParams:
    """Context size, batch sizes and threads; `n_batch` bounds every decode call."""

    n_ctx: int = 4096
    n_batch: int = 512
    n_threads: int = 0  # 0: one per physical core (app.runtime.threads), as llama.cpp's -t
    # llama.cpp's own default is "auto" (on where the backend supports it). It matters for speculation: on the H200's
    # Vulkan backend flash attention made a 2-8 token verify 5-20x cheaper at 8k+ tokens of context.
    flash_attn: str = "auto"
    type_k: str = "f16"
    type_v: str = "f16"
    mtp: bool = False  # an MTP draft context: runs the model's NextN block on (token, target hidden state) pairs
    # Recurrent-state snapshots kept per sequence (llama.cpp's n_rs_seq): with k of them, dropping up to the last k
    # positions of a recurrent/hybrid memory is a plain seq_rm instead of a saved and restored checkpoint. llama.cpp
    # sets 0 on architectures without that support; Context.n_rs_seq says what was granted.
    n_rs_seq: int = 0


_KV_TYPES = {"f16": 1, "f32": 0, "q8_0": 8, "q4_0": 2, "bf16": 30}
_FLASH_ATTN_TYPES = (L.LLAMA_FLASH_ATTN_TYPE_AUTO, L.LLAMA_FLASH_ATTN_TYPE_ENABLED, L.LLAMA_FLASH_ATTN_TYPE_DISABLED)
_FLASH_ATTN = dict(zip(FLASH_ATTN_MODES, _FLASH_ATTN_TYPES, strict=True))


class Context:
    """One llama.cpp context (KV cache + compute buffers) for a model, with a single sequence (id 0)."""

    def __init__(self, model: Model, params: ContextParams) -> None:
        if params.type_k not in _KV_TYPES or params.type_v not in _KV_TYPES:
            raise LlamaError(f"KV cache type must be one of {', '.join(_KV_TYPES)}")
        if params.flash_attn not in _FLASH_ATTN:
            raise LlamaError(f"flash attention must be one of {', '.join(FLASH_ATTN_MODES)}")
        if params.n_ctx < 16 or params.n_batch < 1:
            raise LlamaError("n_ctx must be >= 16 and n_batch >= 1")
        cp = L.llama_context_default_params()
        cp.n_ctx = params.n_ctx
        cp.n_batch = params.n_batch
        cp.n_ubatch = params.n_batch
        cp.n_seq_max = 1
        threads = resolve_threads(params.n_threads)
        cp.n_threads = threads
        cp.n_threads_batch = threads
        cp.flash_attn_type = _FLASH_ATTN[params.flash_attn]
        cp.type_k = _KV_TYPES[params.type_k]
        cp.type_v = _KV_TYPES[params.type_v]
        cp.no_perf = True
        cp.ctx_type = L.LLAMA_CONTEXT_TYPE_MTP if params.mtp else L.LLAMA_CONTEXT_TYPE_DEFAULT
        cp.n_rs_seq = max(0, params.n_rs_seq)
        ptr = L.llama_init_from_model(model.ptr, cp)
        if not ptr:
            raise LlamaError(f"llama.cpp could not create a context (n_ctx={params.n_ctx}); not enough memory?")
        self.ptr = ptr
        self.model = model
        self.params = params
        self.n_threads = threads
        self.n_ctx = int(L.llama_n_ctx(ptr))
        self.n_batch = int(L.llama_n_batch(ptr))
        self.n_rs_seq = int(L.llama_n_rs_seq(ptr))
        # An MTP context runs only the NextN block, a full-attention layer: its memory is a plain KV cache.
        self.recurrent = model.is_recurrent and not params.mtp
        self.n_vocab = model.vocab.n_vocab
        self.mem = L.llama_get_memory(ptr)
        self._batch = L.llama_batch_init(self.n_batch, 0, 1)
        self.tokens: list[int] = []  # exactly what the KV cache of sequence 0 holds, in position order
        self.decode_s = 0.0  # seconds spent inside llama_decode (benchmarks: Python overhead = the rest)
        self.decode_calls = 0
        # How many trailing positions a recurrent/hybrid memory can drop in place right now: llama.cpp's snapshots
        # hold the states after each token of the LAST decode only (at most n_rs_seq of them), and a rollback uses
        # them up until the next decode. llama.cpp does not check the first condition; asking outside it would
        # silently restore a stale state, so truncate() refuses instead.
        self._rs_window = 0
        # Called as on_decoded(pos0, n) after every successful decode (the MTP source reads hidden states there).
        self.on_decoded: Callable[[int, int], None] | None = None

    # -- decoding ---------------------------------------------------------------------------------------------------
    def decode(self, tokens: Sequence[int], logits_from: int | None = None) -> None:
        """Append `tokens` to the KV cache in one llama_decode; rows >= `logits_from` get logits (default: last only).

        Callers keep len(tokens) <= n_batch (asserted here, never reaching a ggml abort) and positions < n_ctx.
        """
        n = len(tokens)
        if n == 0:
            return
        if n > self.n_batch:
            raise LlamaError(f"internal: decode of {n} tokens exceeds n_batch {self.n_batch}")
        pos0 = len(self.tokens)
        if pos0 + n > self.n_ctx:
            raise LlamaError(f"context full: {pos0 + n} > n_ctx {self.n_ctx}")
        first_out = n - 1 if logits_from is None else logits_from
        b = self._batch
        for i, t in enumerate(tokens):
            if not 0 <= t < self.n_vocab:
                raise LlamaError(f"token id {t} outside the vocabulary (0..{self.n_vocab - 1})")
            b.token[i] = t
            b.pos[i] = pos0 + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if i >= first_out else 0
        b.n_tokens = n
        t0 = time.perf_counter()
        rc = L.llama_decode(self.ptr, b)
        self.decode_s += time.perf_counter() - t0
        self.decode_calls += 1
        if rc != 0:
            # The KV cache may hold part of the batch now; drop it so `tokens` stays the truth. Recurrent memory
            # cannot drop a partial range: then forget everything (the next request re-prefills).
            if self.recurrent or not L.llama_memory_seq_rm(self.mem, 0, pos0, -1):
                self.clear()
            raise LlamaError(f"llama_decode failed with code {rc}")
        self.tokens.extend(tokens)
        self._rs_window = self._droppable_after(n)
        self._first_out = first_out
        if self.on_decoded is not None:
            self.on_decoded(pos0, n)

    def logits(self, row: int) -> np.ndarray:
        """Logits of batch row `row` of the last decode, as a view (copy it before the next decode)."""
        ptr = L.llama_get_logits_ith(self.ptr, row)
        if not ptr:
            raise LlamaError(f"no logits for batch row {row}")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def prefill(self, tokens: Sequence[int], stop: Callable[[], bool] | None = None) -> bool:
        """Decode `tokens` in n_batch chunks; logits only for the very last one.

        `stop` is asked before each chunk: when it says so, return False with the KV cache (and `self.tokens`)
        holding the whole chunks decoded so far, a prefix a later prompt can reuse.
        """
        for start in range(0, len(tokens), self.n_batch):
            if stop is not None and stop():
                return False
            self.decode(tokens[start : start + self.n_batch])
        return True

    # -- KV memory --------------------------------------------------------------------------------------------------
    def truncate(self, n_keep: int) -> bool:
        """Drop every cached position >= n_keep; False when the memory can't drop that range: recurrent/hybrid
        memory can only drop positions of the last decode inside its snapshot window (see `can_drop`)."""
        if n_keep >= len(self.tokens):
            return True
        recurrent = self.recurrent
        if recurrent and len(self.tokens) - n_keep > self._rs_window and n_keep > 0:
            return False
        ok = bool(L.llama_memory_seq_rm(self.mem, 0, n_keep, -1))
        if ok:
            del self.tokens[n_keep:]
            if recurrent:
                self._rs_window = 0
        return ok

    def can_drop(self, n_decoded: int, n_drop: int) -> bool:
        """Whether, after a decode of `n_decoded` tokens, dropping its last `n_drop` positions will need no saved
        checkpoint: always on attention-only memory, within the snapshot window on recurrent/hybrid memory."""
        return not self.recurrent or n_drop <= self._droppable_after(n_decoded)

    def _droppable_after(self, n_decoded: int) -> int:
        """Trailing positions a recurrent memory can drop in place after a decode of n_decoded tokens: the decode
        kept the state after each of its tokens, so the oldest state it can go back to is after its first one
        (n_decoded - 1 positions dropped), and never more than n_rs_seq back."""
        return min(n_decoded - 1, self.n_rs_seq)

    def clear(self) -> None:
        L.llama_memory_clear(self.mem, True)
        self.tokens.clear()
        self._rs_window = 0

    def save_state(self) -> tuple[bytes, list[int]]:
        """A checkpoint of sequence 0 (needed to roll back recurrent/hybrid memory)."""
        size = L.llama_state_seq_get_size(self.ptr, 0)
        raw = bytearray(size)
        # Written in place and sliced through a memoryview: a ctypes slice would build a list of ints (slow at MBs).
        n = L.llama_state_seq_get_data(self.ptr, (ctypes.c_uint8 * size).from_buffer(raw), size, 0) if size else 0
        if n == 0:
            raise LlamaError("could not save a sequence checkpoint")
        return bytes(memoryview(raw)[:n]), list(self.tokens)

    def load_state(self, state: tuple[bytes, list[int]]) -> None:
        data, tokens = state
        L.llama_memory_seq_rm(self.mem, 0, -1, -1)
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if L.llama_state_seq_set_data(self.ptr, buf, len(data), 0) == 0:
            self.tokens.clear()
            raise LlamaError("could not restore the sequence checkpoint")
        self.tokens = list(tokens)
        self._rs_window = 0  # the restored state has no snapshots of its own

    def close(self) -> None:
        if getattr(self, "ptr", None):
            L.llama_batch_free(self._batch)
            L.llama_free(self.ptr)
            self.ptr = None

    def __del__(self) -> None:  # pragma: no cover
        try:
            self.close()
        except Exception:
            pass


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:  # the usual case, compared at C speed (sources call this every step on long histories)
        return n
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
