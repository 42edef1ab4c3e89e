"""Fill-in-the-middle prompts, laid out and trimmed as llama-server's /infill lays them out."""

from __future__ import annotations

from app.engine.types import Infill, InvalidRequest
from app.runtime.llama import Vocab

# The batch llama-server's trimming rule is written against: its default -b. Ours (often 512) would cut the
# prefix to 384 tokens where llama-server keeps 1,536. The other files get the window less that batch: with a
# 2,048-token window, 2 tokens of them, as in llama-server.
TRIM_BATCH = 2048


def infill_tokens(vocab: Vocab, infill: Infill, n_ctx: int, n_batch: int = TRIM_BATCH) -> list[int]:
    """[BOS] [FIM_REP project, FIM_SEP file, text ...] [FIM_SEP filename] FIM_PRE prefix middle FIM_SUF suffix FIM_MID.

    The repository-level pattern of Qwen2.5-Coder's report (arXiv 2409.12186), as llama-server writes it: other
    files first, each after a separator and its name (models without separators get a plain snippet marker), then
    the cursor's file. With `infill.trim`, trimmed as llama-server trims so an editor's request fits: the prefix
    keeps its last 3/4 of a batch, the suffix its first quarter less the middle, and the other files the context
    the batch leaves (their latest text); without, all of it (and a prompt too long is refused as any other). The
    code's own text is never read as control tokens; the middle's is, as llama-server reads it. Two differences:
    without other files the prompt is the plain FIM_PRE .. FIM_MID form (the one editor plugins write out, where
    llama-server still adds the repository header), and the BOS, where the model adds one, comes first
    (llama-server puts the other files before it).
    """
    fim = vocab.fim
    if fim is None:
        raise InvalidRequest("this model has no fill-in-the-middle tokens (FIM prefix, suffix and middle)")
    extra: list[int] = []
    if infill.extra and fim.rep >= 0:
        extra += [fim.rep, *vocab.tokenize("myproject\n", False, False)]
    for filename, text in infill.extra:
        if fim.sep >= 0:
            extra += [fim.sep, *vocab.tokenize(f"{filename}\n", False, False)]
        else:
            extra += vocab.tokenize("\n\n--- snippet ---\n\n", False, False)
        extra += vocab.tokenize(text, False, False)
    if infill.extra and fim.sep >= 0:
        extra += [fim.sep, *vocab.tokenize("filename\n", False, False)]
    prefix = vocab.tokenize(infill.prefix, False, False)
    suffix = vocab.tokenize(infill.suffix, False, False)
    middle = vocab.tokenize(infill.middle, False, True) if infill.middle else []
    if infill.trim:
        # Capped at the window, as llama.cpp caps a context's batch; llama-server's rule takes its -b uncapped, so
        # under a 2,048-token window it would keep a prefix longer than the window.
        n_batch = min(n_batch, n_ctx)
        prefix = prefix[len(prefix) - min(len(prefix), 3 * (n_batch // 4)) :]
        suffix = suffix[: min(len(suffix), max(0, n_batch // 4 - (2 + len(middle))))]
        n_extra = min(max(0, n_ctx - n_batch + 2), len(extra))  # llama-server's default n_predict (-1) in its rule
        extra = extra[len(extra) - n_extra :]
    head = [vocab.bos] if vocab.add_bos and vocab.bos >= 0 else []
    return [*head, *extra, fim.pre, *prefix, *middle, fim.suf, *suffix, fim.mid]
