"""The MTP draft source on a tiny random Qwen3.5 (hybrid) with one NextN block, through the real llama.cpp.

The model comes from tests/engine/tiny_gguf.py twice, with the same seed: once plain, once with the MTP block
appended (the trunk's weights are identical). The head is given a bigram bias read off the plain model's own greedy
output on two prompts, so its drafts are partly accepted and partly rejected (a random head would almost never be
right): every request rolls back after rejections, with accepted tokens before them. On the other prompts the
bigram knows little, so drafts are mostly rejected.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from app.engine.config import EngineConfig
from app.engine.request_policy import choose_settings
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary, InvalidRequest
from app.runtime.llama import LlamaError
from app.runtime.sampling import SamplingParams, distribution
from app.speculative.exactness import compare
from app.speculative.mtp import MtpSource
from app.speculative.settings import PLAIN, SpecSettings
from tests.engine.tiny_gguf import write_tiny_qwen35

GREEDY = SamplingParams(temperature=0.0)
TINY = {"seed": 9, "mix": 0.3, "out_std": 2.0}  # the hybrid rollback tests' model (tests/engine/test_recurrent.py)
BIGRAM_PROMPTS = ("hello world the cat", "one two three four five")
PROMPTS = (*BIGRAM_PROMPTS, "copy paste data list", "the dog ran to a red mat")


@dataclass(frozen=True)
class TinyMtp:
    plain: Path  # the same trunk without the NextN block
    mtp: Path


def _config(path: Path, **kw: object) -> EngineConfig:
    # One thread: these decodes take microseconds; spinning worker threads would only fight other work.
    return EngineConfig(model=str(path), n_ctx=512, n_batch=64, n_threads=1, **kw)  # type: ignore[arg-type]


def _run(session: Session, prompt: str, spec: SpecSettings | None, n: int = 48, **kw: object) -> GenerationSummary:
    kw.setdefault("sampling", GREEDY)
    req = GenerationRequest(prompt=prompt, max_tokens=n, speculative=spec, collect_margins=True, **kw)  # type: ignore[arg-type]
    done = [ev for ev in session.generate(req) if isinstance(ev, DoneEvent)]
    return done[0].summary


def _write_pair(folder: Path, mtp_next_scale: float = 1.0, **tiny: float) -> TinyMtp:
    plain = write_tiny_qwen35(folder / "tiny-qwen35.gguf", **tiny)  # type: ignore[arg-type]
    s = Session(_config(plain))
    pairs: Counter[tuple[int, int]] = Counter()
    for prompt in BIGRAM_PROMPTS:
        toks = s.format_prompt(GenerationRequest(prompt=prompt, max_tokens=1)) + list(_run(s, prompt, PLAIN).tokens)
        pairs.update(zip(toks, toks[1:], strict=False))
    s.close()
    bigram: dict[int, int] = {}
    for (a, b), _ in pairs.most_common():
        bigram.setdefault(a, b)
    mtp = write_tiny_qwen35(
        folder / "tiny-qwen35-mtp.gguf",
        mtp=True,
        mtp_next=bigram,
        mtp_next_scale=mtp_next_scale,
        **tiny,  # type: ignore[arg-type]
    )
    return TinyMtp(plain, mtp)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyMtp:
    return _write_pair(tmp_path_factory.mktemp("tiny-mtp"), **TINY)


@pytest.fixture(scope="module")
def session(tiny: TinyMtp) -> Iterator[Session]:
    s = Session(_config(tiny.mtp))
    yield s
    s.close()


def test_the_tiny_file_carries_one_nextn_layer_that_llama_cpp_loads(tiny: TinyMtp, session: Session) -> None:
    assert session.model.meta("general.architecture") == "qwen35"
    assert session.model.n_layer_nextn == 1 and session.model.is_recurrent  # hybrid: checkpoint rollback
    assert "mtp" not in session.missing and isinstance(session.sources["mtp"], MtpSource)
    assert "mtp" not in session.caps.missing and not session.caps.draft_loaded
    plain = Session(_config(tiny.plain))
    try:
        assert plain.model.n_layer_nextn == 0 and "mtp" not in plain.sources
        assert "no MTP (NextN) layers" in plain.missing["mtp"] and "mtp" in plain.caps.missing
        with pytest.raises(InvalidRequest, match="needs the model's own head: .*no MTP"):
            _run(plain, "hello", SpecSettings(source="mtp", n_max=2))
    finally:
        plain.close()
    with pytest.raises(LlamaError, match="--mtp: .*no MTP"):
        Session(_config(tiny.plain, mtp="on"))
    off = Session(_config(tiny.mtp, mtp="off"))
    try:
        assert "mtp" not in off.sources and "loaded without its MTP layers" in off.missing["mtp"]
    finally:
        off.close()


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_greedy_mtp_matches_plain_decoding_at_every_depth(session: Session, depth: int) -> None:
    drafted = accepted = rejected_steps = 0
    for prompt in PROMPTS:
        plain = _run(session, prompt, PLAIN)
        spec = _run(session, prompt, SpecSettings(source="mtp", n_max=depth))
        verdict = compare(plain.tokens, plain.margins, spec.tokens)
        assert verdict.acceptable, f"{prompt!r} depth {depth}: {verdict.describe()}"
        assert len(spec.tokens) == len(plain.tokens)
        t = spec.timings
        drafted, accepted = drafted + t.draft_n, accepted + t.draft_n_accepted
        rejected_steps += t.draft_n > t.draft_n_accepted
        assert spec.steps < len(spec.tokens) or t.draft_n_accepted == 0  # accepted drafts save target steps
        assert spec.per_source["mtp"]["drafted"] == t.draft_n  # telemetry counts the source by name
    assert 0 < accepted < drafted and rejected_steps  # partly accepted, partly rolled back


def test_a_confidence_stop_alone_pays_for_the_softmax(session: Session) -> None:
    """p_min 0 drafts the argmax without a softmax (NaN confidence); any p_min > 0 computes it; same tokens."""
    src = session.sources["mtp"]
    assert isinstance(src, MtpSource)
    history = session.model.vocab.tokenize(PROMPTS[0], add_special=True)
    session.ctx.clear()  # the session's last request left its tokens
    src.rollback(0)
    session.ctx.prefill(history[:-1])
    try:
        free = src.propose(history, 4, 0, 0.0, GREEDY, np.random.default_rng(0))
        src.rollback(len(history) - 1)
        stopped = src.propose(history, 4, 0, 1e-12, GREEDY, np.random.default_rng(0))
        src.rollback(len(history) - 1)
    finally:
        session.ctx.clear()
    assert len(free.tokens) == 4 and free.tokens == stopped.tokens
    assert all(np.isnan(c) for c in free.confidence)
    assert all(0.0 < c <= 1.0 for c in stopped.confidence)


def test_a_kernel_warm_up_between_requests_changes_nothing(session: Session) -> None:
    """Session.warm_up (calibration on a GPU: every verify batch size once) decodes on the target and forgets it:
    the next request prefills afresh, and the hybrid memory and the MTP head are as if it never ran."""
    spec = SpecSettings(source="mtp", n_max=3)
    before = _run(session, PROMPTS[1], spec)
    session.warm_up(9)
    assert session.ctx.tokens == []
    after = _run(session, PROMPTS[1], spec)
    assert after.tokens == before.tokens
    assert (after.timings.draft_n, after.timings.draft_n_accepted) == (
        before.timings.draft_n,
        before.timings.draft_n_accepted,
    )
    assert after.timings.draft_n > 0


def _next_logits(session: Session, history: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The target's and the MTP head's logits after `history` (target KV = history[:-1], as between steps)."""
    src = session.sources["mtp"]
    assert isinstance(src, MtpSource)
    draft = src.propose(history, 1, 0, 0.0, GREEDY, np.random.default_rng(0))
    assert len(draft.tokens) == 1
    mtp_logits = src.mtp.logits(-1).copy()
    src.rollback(len(history) - 1)
    session.ctx.decode([history[-1]])
    return session.ctx.logits(-1).copy(), mtp_logits


def _fresh_logits(path: Path, history: list[int]) -> tuple[np.ndarray, np.ndarray]:
    fresh = Session(_config(path))
    try:
        fresh.ctx.prefill(history[:-1])
        return _next_logits(fresh, history)
    finally:
        fresh.close()


def test_rollback_leaves_target_and_mtp_consistent(tiny: TinyMtp, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Session(_config(tiny.mtp))
    try:
        prompt = PROMPTS[2]
        out = _run(s, prompt, SpecSettings(source="mtp", n_max=4))
        assert 0 < out.timings.draft_n_accepted < out.timings.draft_n  # rollbacks after partial acceptance
        history = s.format_prompt(GenerationRequest(prompt=prompt, max_tokens=1)) + list(out.tokens)
        assert s.ctx.tokens == history[:-1]
        target, head = _next_logits(s, history)
    finally:
        s.close()
    fresh_target, fresh_head = _fresh_logits(tiny.mtp, history)
    # Batch-size numerics: a fresh prefill runs other kernels than step-by-step decoding (seen: 1.5e-3 on logits of
    # about 20); a wrong pairing or a stale position moves them by tenths or more (below).
    np.testing.assert_allclose(target, fresh_target, atol=1e-2)
    np.testing.assert_allclose(head, fresh_head, atol=1e-2)

    # The same check catches an MTP context that keeps its draft steps' positions, where accepted tokens sit paired
    # with the head's own hidden state instead of the target's: a rollback that forgets which positions it paired.
    monkeypatch.setattr(MtpSource, "rollback", lambda self, n: setattr(self, "_n_paired", 1 << 30))
    broken = Session(_config(tiny.mtp))
    try:
        out = _run(broken, prompt, SpecSettings(source="mtp", n_max=4))
        _, head = _next_logits(broken, history)
    finally:
        broken.close()
    assert np.abs(head - fresh_head).max() > 0.1, np.abs(head - fresh_head).max()


def test_sampling_law_is_preserved_with_the_heads_q(tmp_path: Path) -> None:
    """At T > 0 the token after a fixed prefix follows the target's own p, drafted from the head's different q."""
    # Smaller logit gaps and a weak bigram: p and q overlap without being equal, so drafts are accepted sometimes
    # and rejected sometimes (the checked law needs both the acceptance and the residual draw to be right).
    pair = _write_pair(tmp_path, mtp_next_scale=0.2, seed=9, mix=0.3, out_std=0.5)
    session = Session(_config(pair.mtp))
    params = SamplingParams(temperature=1.0, top_k=6)
    prompt = BIGRAM_PROMPTS[0]
    tokens = session.format_prompt(GenerationRequest(prompt=prompt, max_tokens=1))
    ctx = session.ctx
    ctx.clear()
    ctx.prefill(tokens)
    p1 = distribution(ctx.logits(-1), params, tokens)
    first = int(np.argmax(p1))
    ctx.decode([first])
    p2 = distribution(ctx.logits(-1), params, [*tokens, first])
    src = session.sources["mtp"]
    assert isinstance(src, MtpSource)
    src.propose([*tokens, first], 1, 0, 0.0, GREEDY, np.random.default_rng(0))
    q2 = distribution(src.mtp.logits(-1), params)
    assert 0.1 < 0.5 * np.abs(p2 - q2).sum() < 0.9  # the head's q differs from the target's p, and overlaps it
    # Runs whose first token is `first`: their second token is the verdict on a depth-1 MTP draft drawn from q2
    # (rejection sampling against p2), so it must follow p2.
    n = 800
    counts: Counter[int] = Counter()
    accepted = 0
    for seed in range(n):
        out = _run(
            session,
            prompt,
            SpecSettings(source="mtp", n_max=1),
            n=3,  # the second step may draft one token only when a third is still wanted
            sampling=SamplingParams(temperature=1.0, top_k=6, seed=seed),
        )
        assert out.timings.draft_n >= 1
        if out.tokens[0] == first:
            counts[out.tokens[1]] += 1
            accepted += out.timings.draft_n_accepted > 0
    session.close()
    m = sum(counts.values())
    assert m > 300 and 0 < accepted < m
    freq = np.array([counts.get(i, 0) for i in range(len(p2))]) / m
    tv = 0.5 * np.abs(freq - p2).sum()
    assert tv < 4.0 / np.sqrt(m), (tv, m)  # 6 outcomes: noise TV ~ 1/sqrt(m)
    assert 0.5 * np.abs(q2 - p2).sum() > 4.0 / np.sqrt(m)  # a verifier that emitted q's draw would fail it


def test_refusal_and_override_checks() -> None:
    from app.policy.dynamic import DraftCaps, DynamicDraftPolicy

    policy = DynamicDraftPolicy(None, None, default=PLAIN)
    spec = SpecSettings(source="mtp", n_max=3)
    no_mtp = DraftCaps(8, False, frozenset({"mtp"}))
    with pytest.raises(InvalidRequest, match="GGUF has none"):
        choose_settings(policy, no_mtp, 10, spec, {"lookup"}, {"mtp": "the GGUF has none"})
    chosen, _ = choose_settings(policy, DraftCaps(8, False), 10, spec, {"lookup", "mtp"})
    assert chosen == spec
    pool = SpecSettings(source="pool", n_max=3)
    assert choose_settings(policy, DraftCaps(8, False), 10, pool, {"lookup", "mtp"})[0] == pool  # MTP-only pool
    with pytest.raises(InvalidRequest, match="needs a draft model"):
        choose_settings(policy, no_mtp, 10, pool, {"lookup"}, {"mtp": "none"})
    assert no_mtp.clamp(spec) == PLAIN and DraftCaps(8, False).clamp(spec) == spec


def test_pool_and_adaptive_run_the_mtp_arm(session: Session) -> None:
    plain = _run(session, PROMPTS[0], PLAIN)
    pool = _run(session, PROMPTS[0], SpecSettings(source="pool", n_max=4))
    adaptive = _run(session, PROMPTS[0], SpecSettings(source="mtp", n_max=4, adaptive=True))
    for out in (pool, adaptive):
        assert compare(plain.tokens, plain.margins, out.tokens).acceptable
    assert pool.per_source.get("mtp", {}).get("steps", 0) > 0  # the pool chose the MTP arm (no second model)
    assert adaptive.timings.draft_n_accepted > 0


def _generate_cli(path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "app", "generate", "--model", str(path), "--raw", "--prompt", PROMPTS[0]]
    cmd += ["--max-tokens", "32", "--temperature", "0", "--threads", "1", "--json", *flags]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_generate_mtp_cli(tiny: TinyMtp) -> None:
    plain = _generate_cli(tiny.mtp, "--no-spec")
    mtp = _generate_cli(tiny.mtp, "--mtp", "--spec-n-max", "3")
    assert plain.returncode == 0 and mtp.returncode == 0, mtp.stderr
    a, b = json.loads(plain.stdout), json.loads(mtp.stdout)
    assert b["speculative"]["source"] == "mtp" and b["speculative"]["n_max"] == 3
    assert b["timings"]["draft_n"] > 0 and b["timings"]["draft_n_accepted"] > 0
    assert compare(a["tokens"], [1.0] * len(a["tokens"]), b["tokens"]).identical
    refused = _generate_cli(tiny.plain, "--mtp")
    assert refused.returncode != 0 and "no MTP (NextN) layers" in refused.stderr


@pytest.fixture(scope="module")
def endpoint(tiny: TinyMtp) -> Iterator[str]:
    from app.engine.worker import Engine
    from app.server.runner import EndpointServer

    engine = Engine(_config(tiny.mtp)).wait_ready(60)
    server = EndpointServer(engine, "tiny-mtp", port=0)
    server.start()
    yield server.url
    server.stop()
    engine.close()


def test_openai_client_drafts_with_mtp_and_prometheus_counts_it(endpoint: str) -> None:
    import httpx
    import openai

    client = openai.OpenAI(base_url=f"{endpoint}/v1", api_key="x", max_retries=0, timeout=60)
    try:
        kw = {"model": "tiny-mtp", "prompt": PROMPTS[0], "max_tokens": 32, "temperature": 0}
        plain = client.completions.create(**kw, extra_body={"speculative": {"source": "none"}})  # type: ignore[call-overload]
        mtp = client.completions.create(**kw, extra_body={"speculative": {"source": "mtp", "n_max": 3}})  # type: ignore[call-overload]
        assert mtp.choices[0].text == plain.choices[0].text
        extra = mtp.model_extra or {}
        assert extra["timings"]["draft_n"] > 0 and extra["timings"]["draft_n_accepted"] > 0
        assert extra["dynamic_draft"]["selected"]["source"] == "mtp"
        # A depth alone names no source: the loaded head is the one (no draft model here), at that depth.
        depth = client.completions.create(**kw, extra_body={"speculative": {"n_max": 2}})  # type: ignore[call-overload]
        assert (depth.model_extra or {})["dynamic_draft"]["selected"] == SpecSettings("mtp", n_max=2).to_dict()
    finally:
        client.close()
    metrics = httpx.get(f"{endpoint}/metrics", timeout=30).text
    assert 'source="mtp"' in metrics


def test_source_mtp_on_a_gguf_without_mtp_layers_is_a_400(tiny: TinyMtp) -> None:
    import openai

    from app.engine.worker import Engine
    from app.server.runner import EndpointServer

    engine = Engine(_config(tiny.plain)).wait_ready(60)
    server = EndpointServer(engine, "tiny", port=0)
    server.start()
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=60)
    try:
        with pytest.raises(openai.BadRequestError, match="needs the model.s own head: tiny-qwen35.gguf has no MTP"):
            client.completions.create(
                model="tiny", prompt="hello", max_tokens=4, extra_body={"speculative": {"source": "mtp"}}
            )
        ok = client.completions.create(model="tiny", prompt="hello", max_tokens=4)  # the engine lives on
        assert ok.choices[0].text is not None
    finally:
        client.close()
        server.stop()
        engine.close()


def test_catalog_reads_mtp_layers_from_a_local_header(tiny: TinyMtp, tmp_path: Path) -> None:
    """`dynadraft models --catalog` says what the catalog claims for Qwen3.6, and what the header says once local."""
    import shutil

    def rows() -> dict[str, str]:
        out = subprocess.run(
            [sys.executable, "-m", "app", "models", "--catalog", "--json", "--models-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return {r["id"]: r["mtp"] for r in json.loads(out.stdout)}

    before = rows()
    assert before["qwen3.6-35b-a3b-iq3_s"].startswith("unverified")
    assert before["qwen3.6-35b-a3b-rocmfp4-strix"].startswith("unverified: the file name says MTP")
    folder = tmp_path / "unsloth" / "Qwen3.6-35B-A3B-GGUF"  # where `dynadraft pull` puts that build
    folder.mkdir(parents=True)
    shutil.copy(tiny.mtp, folder / "Qwen3.6-35B-A3B-UD-IQ3_S.gguf")  # stands in for the real file's header
    assert rows()["qwen3.6-35b-a3b-iq3_s"] == "yes: 1 MTP layer(s) (GGUF header)"
    shutil.copy(tiny.plain, folder / "Qwen3.6-35B-A3B-UD-IQ3_S.gguf")
    assert rows()["qwen3.6-35b-a3b-iq3_s"] == "no (GGUF header)"


def test_quick_calibration_measures_mtp_rows_and_dd_applies_them(tiny: TinyMtp) -> None:
    from app.calibration.runner import Plan, candidates, run_calibration

    s = Session(_config(tiny.mtp))
    try:
        grid = candidates(s.sources, "quick")
        labels = [g.label() for g in grid]
        assert {"mtp n2,p0", "mtp n4,p0.25", "mtp n4,p0", "mtp n6,p0 adaptive", "pool n16,p0,cost"} <= set(labels)
        result = run_calibration(s, Plan(contexts=(64, 160), candidates=grid, gen_tokens=12, repeats=1, budget_s=None))
        measured = {r.setting.label() for rng in result.table.ranges for r in result.table.rows_in(rng)}
        assert "mtp n4,p0" in measured
        out = _run(s, PROMPTS[0], None, n=8)  # DD now decides from the table, MTP rows included
        assert out.dynamic_draft is not None and out.dynamic_draft["reason"] in (
            "table_row",
            "fallback_static",
            "fallback_plain",
            "fallback_held_out",
        )
    finally:
        s.close()


def test_token_for_token_with_llama_server_draft_mtp(tiny: TinyMtp, session: Session, llama_server_binary: str) -> None:
    """llama.cpp's own MTP driver (`llama-server --spec-type draft-mtp`, built from the same pinned source) on the
    same file and prompt tokens, greedy: the same tokens, and the same numbers of drafted and accepted tokens."""
    from app.runtime.llama_server import ExternalServer, ServerSpec

    n_max, n_predict = 3, 32
    flags = ("--spec-type", "draft-mtp", "--spec-draft-n-max", str(n_max), "--spec-draft-p-min", "0")
    spec = ServerSpec(
        binary=llama_server_binary, model=str(tiny.mtp), n_ctx=512, n_batch=64, n_threads=1, extra_args=flags
    )
    with ExternalServer(spec) as server:
        for prompt in PROMPTS:
            tokens = session.format_prompt(GenerationRequest(prompt=prompt, max_tokens=1))
            body = {"prompt": tokens, "n_predict": n_predict, "temperature": 0, "cache_prompt": False}
            status, theirs = server.request("POST", "/completion", {**body, "return_tokens": True})
            assert status == 200, theirs
            ours = _run(session, prompt, SpecSettings(source="mtp", n_max=n_max), n=n_predict)
            plain = _run(session, prompt, PLAIN, n=n_predict)
            verdict = compare(plain.tokens, plain.margins, theirs["tokens"])
            assert verdict.acceptable, f"llama-server vs plain on {prompt!r}: {verdict.describe()}"
            assert list(ours.tokens) == theirs["tokens"], prompt
            assert theirs["timings"]["draft_n"] > 0
            # The same pairing of tokens with hidden states as llama.cpp's driver: the same drafts, so the same counts.
            t = ours.timings
            assert (t.draft_n, t.draft_n_accepted) == (
                theirs["timings"]["draft_n"],
                theirs["timings"]["draft_n_accepted"],
            )


def test_without_a_table_the_mtp_head_drafts_by_default(tiny: TinyMtp, tmp_path: Path) -> None:
    """A model with an MTP head and no calibration drafts with its head, adaptive up to the head's default depth, and
    the decision record says why; the same trunk without the head decodes plain and says that."""
    fresh = tmp_path / "never-calibrated.gguf"  # a path no calibration (the quick one above included) has a table for
    fresh.write_bytes(tiny.mtp.read_bytes())
    s = Session(_config(fresh))
    try:
        out = _run(s, PROMPTS[0], None, n=32)
        plain = _run(s, PROMPTS[0], PLAIN, n=32)
    finally:
        s.close()
    dd = out.dynamic_draft
    assert dd is not None and dd["reason"] == "no_table" and dd["default_basis"] == "mtp default"
    assert out.settings == SpecSettings(source="mtp", n_max=3, adaptive=True)
    assert out.timings.draft_n > 0 and out.timings.draft_n_accepted > 0
    assert compare(plain.tokens, plain.margins, out.tokens).acceptable
    without = Session(_config(tiny.plain))
    try:
        base = _run(without, PROMPTS[0], None, n=4)
    finally:
        without.close()
    assert base.settings.is_plain and base.dynamic_draft is not None
    assert base.dynamic_draft["default_basis"] == "plain default"


def test_a_depth_without_a_source_means_the_mtp_head(tiny: TinyMtp) -> None:
    """`--spec-n-max 2` names no source: on a model whose head is loaded (and no draft model) that is the head."""
    out = _generate_cli(tiny.mtp, "--spec-n-max", "2")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["speculative"]["source"] == "mtp" and summary["speculative"]["n_max"] == 2
    assert summary["dynamic_draft"]["reason"] == "override" and summary["dynamic_draft"]["default_basis"] is None
