"""Fill-in-the-middle layouts on Qwen2.5-Coder's real vocabulary: the plain form, the repository-level form with
other files, and llama-server's trimming; a model without FIM tokens is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.infill import TRIM_BATCH, infill_tokens
from app.engine.types import Infill, InvalidRequest
from app.runtime.llama import Model, ModelParams, Vocab


@pytest.fixture(scope="module")
def coder(qwen_pair: tuple[Path, Path]) -> Iterator[Vocab]:
    model = Model(str(qwen_pair[1]), ModelParams())
    yield model.vocab
    model.close()


def test_plain_and_repository_level_layouts(coder: Vocab) -> None:
    fim = coder.fim
    assert fim is not None and min(fim.rep, fim.sep) >= 0  # Qwen2.5-Coder has all five
    tok = lambda t: coder.tokenize(t, False, False)  # noqa: E731
    assert infill_tokens(coder, Infill("def f():", "\n"), 4096) == [
        fim.pre,
        *tok("def f():"),
        fim.suf,
        *tok("\n"),
        fim.mid,
    ]
    got = infill_tokens(coder, Infill("x = ", "\n", extra=(("util.py", "def g(): pass\n"),), middle="g"), 4096)
    want = [fim.rep, *tok("myproject\n"), fim.sep, *tok("util.py\n"), *tok("def g(): pass\n"), fim.sep]
    want += [*tok("filename\n"), fim.pre, *tok("x = "), *coder.tokenize("g", False, True), fim.suf, *tok("\n"), fim.mid]
    assert got == want
    # the code's own text is never read as control tokens
    assert infill_tokens(coder, Infill("<|fim_middle|>", ""), 4096).count(fim.mid) == 1


def test_trimming_as_llama_server_trims(coder: Vocab) -> None:
    fim = coder.fim
    assert fim is not None
    long = "value = compute(value) + 1\n" * 400  # ~3,600 tokens each way
    n_prefix, n_suffix = len(coder.tokenize(long, False, False)), len(coder.tokenize(long, False, False))
    assert n_prefix > TRIM_BATCH
    whole = infill_tokens(coder, Infill(long, long), 16384)
    assert len(whole) == n_prefix + n_suffix + 3  # untrimmed (the /v1/completions suffix form)
    files = tuple((f"f{i}.py", long) for i in range(3))
    trimmed = infill_tokens(coder, Infill(long, long, extra=files, trim=True), 4096)
    pre, suf = trimmed.index(fim.pre), trimmed.index(fim.suf)
    assert suf - pre - 1 == 3 * TRIM_BATCH // 4  # the prefix's last 1,536 tokens
    assert len(trimmed) - suf - 2 == TRIM_BATCH // 4 - 2  # the suffix's first 510
    assert pre == 4096 - TRIM_BATCH + 2  # the other files' latest tokens, the room the batch leaves
    assert trimmed[pre - 1] != fim.rep and coder.detokenize(trimmed[pre - 3 : pre]).endswith("filename\n")


def test_a_model_without_fim_tokens_is_refused(smollm2_path: Path) -> None:
    model = Model(str(smollm2_path), ModelParams())
    try:
        assert model.vocab.fim is None
        with pytest.raises(InvalidRequest, match="no fill-in-the-middle tokens"):
            infill_tokens(model.vocab, Infill("a", "b"), 2048)
    finally:
        model.close()
