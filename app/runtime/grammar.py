"""llama.cpp's grammar sampler (GBNF) over one vocabulary: token masks in C, grammar state advanced per token."""

from __future__ import annotations

import ctypes
import logging
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

import llama_cpp as L
import numpy as np

log = logging.getLogger(__name__)

# llama_token_data as numpy sees it: {int32 id; float logit; float p}, 12 bytes, no padding.
_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
assert _TOKEN_DATA.itemsize == ctypes.sizeof(L.llama_token_data)

_compile_lock = threading.Lock()


class GrammarError(ValueError):
    """llama.cpp refused a grammar; the message carries its parser's reason."""


@contextmanager
def _stderr_to(sink: IO[bytes]) -> Iterator[None]:
    """Point file descriptor 2 at `sink` for a moment: llama.cpp's grammar parser prints its reason there."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        os.dup2(sink.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _compile(vocab_ptr: object, gbnf: str, root: str) -> object:
    """llama_sampler_init_grammar, keeping the parser's message so the caller learns why a grammar failed."""
    with _compile_lock, tempfile.TemporaryFile() as sink:
        with _stderr_to(sink):
            ptr = L.llama_sampler_init_grammar(vocab_ptr, gbnf.encode("utf-8"), root.encode("utf-8"))
        sink.seek(0)
        raw = sink.read()
    if raw:
        os.write(2, raw)  # whatever was printed meanwhile (the parser's report, another thread's log) still shows
    printed = raw.decode("utf-8", "replace")
    if not ptr:
        # The parser prints "parse: error parsing grammar: <reason>" followed by the grammar itself.
        found = re.search(r"error parsing grammar: ([^\n]*)", printed)
        reason = found.group(1).strip() if found else "llama.cpp could not parse it (see its log)"
        raise GrammarError(f"invalid grammar: {reason}")
    return ptr


class Grammar:
    """One grammar's parse state. Check a token with `allows` before `accept`: llama.cpp aborts the process when
    asked to accept a token its grammar forbids, so `accept` refuses such a token instead of passing it on."""

    def __init__(self, vocab_ptr: object, n_vocab: int, gbnf: str, root: str = "root", *, _ptr: object = None) -> None:
        self.vocab_ptr = vocab_ptr
        self.n_vocab = n_vocab
        self.gbnf = gbnf
        self.root = root
        self._ptr = _ptr if _ptr is not None else _compile(vocab_ptr, gbnf, root)
        self._all = np.zeros(n_vocab, dtype=_TOKEN_DATA)
        self._all["id"] = np.arange(n_vocab, dtype=np.int32)
        self._one = np.zeros(1, dtype=_TOKEN_DATA)

    def _apply(self, buf: np.ndarray) -> np.ndarray:
        """Run the C grammar filter over the candidates in `buf` (logits reset to 0); True where allowed."""
        buf["logit"] = 0.0
        arr = L.llama_token_data_array(
            data=buf.ctypes.data_as(L.llama_token_data_p), size=buf.shape[0], selected=-1, sorted=False
        )
        L.llama_sampler_apply(self._ptr, ctypes.byref(arr))
        return np.isfinite(buf["logit"])

    def allows(self, token: int) -> bool:
        """Whether the grammar admits `token` next (one candidate: microseconds)."""
        if not 0 <= token < self.n_vocab:
            return False
        self._one["id"][0] = token
        return bool(self._apply(self._one)[0])

    def allowed(self, tokens: np.ndarray) -> np.ndarray:
        """A boolean mask over `tokens` (token ids): which the grammar admits next."""
        buf = np.zeros(tokens.shape[0], dtype=_TOKEN_DATA)
        buf["id"] = tokens
        return self._apply(buf)

    def mask(self) -> np.ndarray:
        """A boolean mask over the whole vocabulary (llama.cpp's filter in C over every token)."""
        return self._apply(self._all)

    def accept(self, token: int) -> None:
        """Advance the grammar by `token`; raises GrammarError (never reaches llama.cpp) for a forbidden one."""
        if not self.allows(token):
            raise GrammarError(f"internal: the grammar does not admit token {token}")
        L.llama_sampler_accept(self._ptr, token)

    def clone(self) -> Grammar:
        ptr = L.llama_sampler_clone(self._ptr)
        if not ptr:
            raise GrammarError("internal: could not clone the grammar state")
        return Grammar(self.vocab_ptr, self.n_vocab, self.gbnf, self.root, _ptr=ptr)

    def rewind_to(self, saved: Grammar) -> None:
        """Take the parse state of `saved` (a clone made earlier), which is used up: undoes what was accepted since."""
        self.close()
        self._ptr, saved._ptr = saved._ptr, None

    def close(self) -> None:
        if getattr(self, "_ptr", None):
            L.llama_sampler_free(self._ptr)
            self._ptr = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass
