"""The reasoning budget (llama-server's reasoning_budget_tokens): the <think> block ends after N tokens with the
forced message and closing tag, the same under every draft source, through a real Session on SmolLM2 under a
reasoning template that opens the block in the prompt (as Qwen3-style templates do)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.external import ExternalSession
from app.engine.reasoning_budget import ReasoningBudget, build_budget
from app.engine.session import Session
from app.engine.types import DoneEvent, EngineError, GenerationRequest, GenerationSummary
from app.runtime.sampling import SamplingParams
from app.speculative.settings import SpecSettings
from tests.server.test_agents_serve import THINK_SHAPE, THINK_TEMPLATE

ASK = ({"role": "user", "content": "Is the sea blue? Explain why."},)


def test_the_tags_are_found_across_tokens_and_a_block_that_ends_by_itself_is_not_forced() -> None:
    b = build_budget(3, "", b"<|im_start|>assistant\n", lambda text: [1, 2])
    assert b is not None and not b.thinking
    assert b.admit([b"<th", b"ink>", b" a", b" b"]) == 4 and b.thinking and b.used == 2
    assert b.admit([b"</think>", b"answer", b" more"]) == 3 and b.done and not b.was_forced
    assert build_budget(-1, "", b"", lambda text: []) is None  # -1: no limit


def test_a_spent_budget_cuts_a_step_and_never_splits_a_character() -> None:
    b = ReasoningBudget(2, (7, 8), thinking=True)
    assert b.admit([b" a", b"\xe2\x82", b"\xac", b" b"]) == 3  # the euro sign's last byte comes before the end
    assert b.due() and b.force() == (7, 8) and b.report() == {"budget_tokens": 2, "reasoning_tokens": 3, "forced": True}


@pytest.fixture(scope="module")
def session(smollm2_path: Path, smollm2_q2k_path: Path) -> Iterator[Session]:
    cfg = EngineConfig(model=str(smollm2_path), draft=str(smollm2_q2k_path), n_ctx=1024, chat_template=THINK_TEMPLATE)
    s = Session(cfg)
    yield s
    s.close()


def _run(s: Session, budget: int | None, spec: SpecSettings | None = None, **kw: object) -> GenerationSummary:
    req = GenerationRequest(
        messages=ASK,
        max_tokens=40,
        sampling=SamplingParams(temperature=0.0),
        speculative=spec,
        reasoning_budget=budget,
        **kw,  # type: ignore[arg-type]
    )
    return [e for e in s.generate(req) if isinstance(e, DoneEvent)][0].summary


def test_the_block_ends_after_the_budget_with_the_message_and_the_closing_tag(session: Session) -> None:
    free = _run(session, None)
    assert free.reasoning is None and "</think>" not in free.text  # SmolLM2 never closes the block by itself
    vocab = session.model.vocab
    outs = {}
    for spec in (SpecSettings("none", 0), SpecSettings("draft", 4), SpecSettings("lookup", 4), SpecSettings("pool", 8)):
        out = _run(session, 6, spec, reasoning_budget_message=" Time is up.")
        assert out.reasoning == {"budget_tokens": 6, "reasoning_tokens": 6, "forced": True}
        thought, _, answer = out.text.partition(" Time is up.\n</think>\n\n")
        assert answer, out.text
        assert len(out.tokens) > 6 + len(vocab.tokenize(" Time is up.\n</think>\n\n", False))  # it went on after it
        assert free.text.startswith(thought) and len(vocab.tokenize(thought, False)) in (5, 6, 7)  # 6 tokens' text
        outs[spec.source] = out.text
    assert len(set(outs.values())) == 1, outs  # drafted steps cut at the budget as plain decoding is

    zero = _run(session, 0)
    assert zero.text.startswith("\n</think>\n\n") and zero.reasoning["reasoning_tokens"] == 0  # type: ignore[index]


def test_a_grammar_that_refuses_the_forced_end_leaves_the_block_to_end_by_itself(session: Session) -> None:
    fits = _run(session, 6, grammar=THINK_SHAPE)  # the shape's closing tag is the forced one
    assert fits.reasoning and fits.reasoning["forced"] and "\n</think>\n\n" in fits.text
    refuses = _run(session, 2, grammar='root ::= [a-z ]{4,30} "."')
    assert refuses.reasoning and not refuses.reasoning["forced"] and "grammar" in refuses.reasoning["note"]
    assert "</think>" not in refuses.text


COUNT = "one two three four five six seven eight nine ten eleven twelve"


@pytest.mark.parametrize("spec", [SpecSettings("none", 0), SpecSettings("lookup", 8), SpecSettings("draft", 4)])
def test_a_budget_cut_inside_a_drafted_step_keeps_the_grammar_on_the_committed_tokens(
    session: Session, spec: SpecSettings
) -> None:
    """The grammar follows every token a step's verify accepts; a budget spent inside that step keeps fewer of them
    (here the grammar refuses the forced end, so the block goes on by itself). The grammar must then stand where the
    committed text ends: a grammar of one fixed sentence gives that sentence whole, whatever the step cut."""
    req = GenerationRequest(
        messages=({"role": "user", "content": f"Count in words: {COUNT}."},),
        max_tokens=40,
        sampling=SamplingParams(temperature=0.0),
        speculative=spec,
        reasoning_budget=2,
        grammar=f'root ::= "{COUNT}."',
    )
    out = [e for e in session.generate(req) if isinstance(e, DoneEvent)][0].summary
    assert out.reasoning is not None and not out.reasoning["forced"]  # refused by the grammar: nothing forced
    assert out.text == f"{COUNT}.", (spec.label(), out.text)
    if spec.source == "lookup":
        assert out.timings.draft_n_accepted > 2  # drafted steps did run past the budget's point


def test_the_engine_default_applies_when_a_request_gives_none(smollm2_path: Path) -> None:
    s = Session(EngineConfig(model=str(smollm2_path), n_ctx=1024, chat_template=THINK_TEMPLATE, reasoning_budget=3))
    try:
        assert _run(s, None).reasoning == {"budget_tokens": 3, "reasoning_tokens": 3, "forced": True}
        assert _run(s, -1).reasoning is None  # the request's own "no limit" wins
    finally:
        s.close()


def test_an_external_runtime_refuses_a_budget_before_starting_its_server(smollm2_path: Path) -> None:
    cfg = EngineConfig(model=str(smollm2_path), server_binary="/nonexistent/llama-server", reasoning_budget=8)
    with pytest.raises(EngineError, match="reasoning budget needs the bundled runtime"):
        ExternalSession(cfg)
