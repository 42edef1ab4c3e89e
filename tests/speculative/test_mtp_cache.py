"""The MTP source after a conversation-cache restore (RAM and disk): it drafts, stays exact, and its head matches a
fresh prefill; a checkpoint saved without MTP state still loads and says why the head drafts nothing on it."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from app.engine.session import Session
from app.engine.types import GenerationRequest, GenerationSummary
from app.speculative.exactness import compare
from app.speculative.mtp import MtpSource, pack_state, unpack_state
from app.speculative.settings import PLAIN, SpecSettings
from tests.engine.test_cache import TINY_A, TINY_B
from tests.speculative.test_mtp import TINY, TinyMtp, _config, _fresh_logits, _next_logits, _run, _write_pair

MTP = SpecSettings(source="mtp", n_max=3)
FOLLOW = TINY_A + " yes no"  # shares TINY_A's tokens: its prefix comes back from TINY_A's checkpoint
CANNOT_DRAFT = "the MTP head cannot draft on it"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyMtp:
    return _write_pair(tmp_path_factory.mktemp("tiny-mtp-cache"), **TINY)


def _follow_up(session: Session) -> GenerationSummary:
    """FOLLOW after its prefix was saved (TINY_A) and the context was taken over (TINY_B): a restore."""
    restores = session.cache.store.stats.restores
    out = _run(session, FOLLOW, MTP, n=24)
    assert session.cache.store.stats.restores == restores + 1
    assert out.timings.cache_n >= len(session.format_prompt(GenerationRequest(prompt=TINY_A, max_tokens=1)))
    return out


def _assert_exact_and_head_consistent(session: Session, path: Path, out: GenerationSummary) -> None:
    """Greedy output equals plain decoding (near-tie rule), and the MTP head's next logits equal a fresh prefill's:
    a restored MTP context with the wrong row or positions would move them by tenths (see test_mtp's rollback)."""
    history = session.format_prompt(GenerationRequest(prompt=FOLLOW, max_tokens=1)) + list(out.tokens)
    target, head = _next_logits(session, history)
    fresh_target, fresh_head = _fresh_logits(path, history)
    np.testing.assert_allclose(target, fresh_target, atol=1e-2)
    np.testing.assert_allclose(head, fresh_head, atol=1e-2)
    plain = _run(session, FOLLOW, PLAIN, n=24, cache_prompt=False)
    verdict = compare(plain.tokens, plain.margins, out.tokens)
    assert verdict.acceptable and len(out.tokens) == len(plain.tokens), verdict.describe()


def test_mtp_drafts_after_a_ram_restore_and_stays_exact(tiny: TinyMtp) -> None:
    s = Session(_config(tiny.mtp))
    try:
        _run(s, TINY_A, MTP, n=24)
        _run(s, TINY_B, MTP, n=24)  # another conversation: TINY_A's state is stashed, its rows overwritten
        target = [e for e in s.cache.store.entries if e.owner == "target"]
        assert target and all(unpack_state(e.extra, s.sources["mtp"].n_embd) for e in target)  # type: ignore[attr-defined]
        out = _follow_up(s)
        assert out.timings.draft_n > 0 and out.per_source["mtp"]["drafted"] == out.timings.draft_n
        _assert_exact_and_head_consistent(s, tiny.mtp, out)
        # The same turns where the cache keeps no MTP state (the code before the attachment): nothing drafted.
        s.cache.target.attachment = None
        s.cache.store.entries.clear()
        _run(s, TINY_A, MTP, n=24)
        _run(s, TINY_B, MTP, n=24)
        assert _follow_up(s).timings.draft_n == 0
    finally:
        s.close()


def test_mtp_drafts_after_a_disk_restore_and_stays_exact(tiny: TinyMtp, tmp_path: Path) -> None:
    folder = tmp_path / "prompt-cache"
    s = Session(_config(tiny.mtp, cache_dir=str(folder)))
    try:
        _run(s, TINY_A, MTP, n=24)
    finally:
        s.close()  # persists the states, each with its MTP part beside it
    items = json.loads(next(folder.glob("*/index.json")).read_text())["entries"]
    assert items and all(item["extra"]["size"] > 0 for item in items)
    reopened = Session(_config(tiny.mtp, cache_dir=str(folder)))
    try:
        out = _follow_up(reopened)
        assert out.timings.draft_n > 0
        _assert_exact_and_head_consistent(reopened, tiny.mtp, out)
    finally:
        reopened.close()


def _assert_loads_but_cannot_draft(path: Path, folder: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A restore of a checkpoint without (readable) MTP state: no crash, the prefix is reused, the output is exact,
    the log says why nothing was drafted, and a request that prefills again drafts as before."""
    s = Session(_config(path, cache_dir=str(folder)))
    try:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="app.speculative.mtp"):
            out = _follow_up(s)
        assert out.timings.draft_n == 0
        assert CANNOT_DRAFT in caplog.text
        assert "conversation cache" in out.per_source["mtp"]["idle_reason"]  # the response says why, not only the log
        plain = _run(s, FOLLOW, PLAIN, n=24, cache_prompt=False)
        verdict = compare(plain.tokens, plain.margins, out.tokens)
        assert verdict.acceptable, verdict.describe()
        again = _run(s, FOLLOW, MTP, n=24, cache_prompt=False)
        assert again.timings.draft_n > 0
        assert "idle_reason" not in again.per_source["mtp"]
    finally:
        s.close()


def test_checkpoints_without_mtp_state_load_and_say_why(
    tiny: TinyMtp, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Written with MTP off (the same file; the target's state has the same layout either way).
    off = tmp_path / "written-with-mtp-off"
    s = Session(_config(tiny.mtp, cache_dir=str(off), mtp="off"))
    try:
        _run(s, TINY_A, PLAIN, n=24)
    finally:
        s.close()
    assert all("extra" not in item for item in json.loads(next(off.glob("*/index.json")).read_text())["entries"])
    _assert_loads_but_cannot_draft(tiny.mtp, off, caplog)

    # An older folder (no "extra" key) and a damaged MTP part (the checksum fails): the target states still load.
    for case in ("old-format", "damaged"):
        folder = tmp_path / case
        s = Session(_config(tiny.mtp, cache_dir=str(folder)))
        try:
            _run(s, TINY_A, MTP, n=24)
        finally:
            s.close()
        index_path = next(folder.glob("*/index.json"))
        index = json.loads(index_path.read_text())
        for item in index["entries"]:
            extra = index_path.parent / item["extra"]["file"]
            if case == "old-format":
                del item["extra"]
                extra.unlink()
            else:
                extra.write_bytes(b"\0" * extra.stat().st_size)
        index_path.write_text(json.dumps(index))
        _assert_loads_but_cannot_draft(tiny.mtp, folder, caplog)


def test_mtp_state_format_refuses_foreign_bytes() -> None:
    row = np.arange(8, dtype=np.float32)
    blob = pack_state(row, b"llama state")
    got = unpack_state(blob, 8)
    assert got is not None and np.array_equal(got[0], row) and got[1] == b"llama state"
    assert unpack_state(blob, 16) is None  # another width (another model)
    assert unpack_state(b"XXXXXX" + blob[6:], 8) is None  # not ours
    assert unpack_state(blob[:20], 8) is None  # cut short


def test_a_restore_with_unreadable_mtp_state_says_why(tiny: TinyMtp, caplog: pytest.LogCaptureFixture) -> None:
    s = Session(_config(tiny.mtp))
    try:
        _run(s, TINY_A, MTP, n=24)
        _run(s, TINY_B, MTP, n=24)
        for e in s.cache.store.entries:  # a checkpoint whose MTP part llama.cpp refuses (e.g. another build)
            e.extra = pack_state(np.zeros(s.sources["mtp"].n_embd, np.float32), b"\0" * 64)  # type: ignore[attr-defined]
        with caplog.at_level(logging.WARNING, logger="app.speculative.mtp"):
            out = _follow_up(s)
        assert out.timings.draft_n == 0 and CANNOT_DRAFT in caplog.text
        assert isinstance(s.sources["mtp"], MtpSource)
        assert _run(s, FOLLOW, MTP, n=24, cache_prompt=False).timings.draft_n > 0
    finally:
        s.close()
