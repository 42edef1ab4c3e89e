"""A chat longer than the context window: "drop_oldest" leaves out its oldest turns (system prompt kept, whole turns,
the newest kept) until prompt and reply fit, at a cut that holds while the chat still fits, so its next turns reuse
the cached window; "error" refuses it as llama-server does. On the real SmolLM2 Session."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.config import EngineConfig
from app.engine.history import RollingWindow
from app.engine.session import Session
from app.engine.types import ContextLengthExceeded, DoneEvent, GenerationRequest, GenerationSummary
from app.runtime.sampling import SamplingParams

N_CTX = 512
LONG = "The quick brown fox jumps over the lazy dog near the river bank. " * 12  # ~170 tokens


def _chat(turns: int, last: str = "And what colour is the fox?") -> tuple[dict[str, str], ...]:
    msgs = [{"role": "system", "content": "You are terse."}]
    for i in range(turns):
        msgs += [{"role": "user", "content": f"Turn {i}: {LONG}"}, {"role": "assistant", "content": f"Noted {i}."}]
    return (*msgs, {"role": "user", "content": last})


@pytest.fixture(scope="module")
def session(smollm2_path: Path) -> Iterator[Session]:
    s = Session(EngineConfig(model=str(smollm2_path), n_ctx=N_CTX, n_threads=1))
    yield s
    s.close()


def _request(messages: tuple[dict[str, str], ...], **kw: object) -> GenerationRequest:
    return GenerationRequest(messages=messages, max_tokens=32, sampling=SamplingParams(temperature=0.0), **kw)  # type: ignore[arg-type]


def _fewest(req: GenerationRequest, session: Session) -> tuple[GenerationRequest, list[int], str, int]:
    return RollingWindow(keep_share=1.0).fit(req, session.templated, N_CTX)


def test_the_oldest_turns_are_left_out_until_the_chat_fits(session: Session) -> None:
    req = _request(_chat(4), context_overflow="drop_oldest")
    assert len(session.format_prompt(req)) + 32 > N_CTX  # four long turns do not fit 512 tokens
    fitted, prompt, text, dropped = _fewest(req, session)
    assert fitted.messages is not None and dropped > 0 and dropped % 2 == 0  # whole user/assistant turns
    assert fitted.messages[0] == req.messages[0]  # type: ignore[index]  # the system prompt stays
    assert fitted.messages[1]["role"] == "user" and fitted.messages[-1] == req.messages[-1]  # type: ignore[index]
    assert fitted.messages[1:] == req.messages[1 + dropped :]  # type: ignore[index]  # the newest turns, in order
    assert len(prompt) + 32 <= N_CTX and prompt == session.format_prompt(fitted) and "Turn 3" in text
    # the fewest left out: one more turn would not have fit
    more = replace(req, messages=fitted.messages[:1] + req.messages[1 + dropped - 2 :])  # type: ignore[index]
    assert len(session.format_prompt(more)) + 32 > N_CTX
    session.window = RollingWindow(keep_share=1.0)
    events = list(session.generate(req))
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.summary.dropped_messages == dropped and done.summary.prompt_tokens == len(prompt)
    assert done.summary.to_dict()["dropped_messages"] == dropped


def _turn(
    session: Session, history: tuple[dict[str, str], ...], user: str
) -> tuple[tuple[dict[str, str], ...], GenerationSummary]:
    """One chat turn as the app sends it: (the history with the user's message and its reply, the reply's summary)."""
    messages = (*history, {"role": "user", "content": user})
    done = list(session.generate(_request(messages, context_overflow="drop_oldest")))[-1]
    assert isinstance(done, DoneEvent)
    return (*messages, {"role": "assistant", "content": done.summary.text}), done.summary


def test_a_cut_frees_half_the_room_and_holds_so_the_next_turns_reuse_the_cache(smollm2_path: Path) -> None:
    s = Session(EngineConfig(model=str(smollm2_path), n_ctx=N_CTX, n_threads=1))
    try:
        history: tuple[dict[str, str], ...] = ({"role": "system", "content": "You are terse."},)
        cuts: list[int] = []
        for i in range(9):
            history, summary = _turn(s, history, f"Part {i}: " + LONG[: 200 + 10 * i])
            dropped = summary.dropped_messages
            assert summary.prompt_tokens + 32 <= N_CTX
            if dropped and cuts and dropped == cuts[-1]:
                # the cut of the last turn: the prompt starts as the last one did, so what is prefilled is the new
                # turn (and the end of the last reply, as templated), not the window
                assert summary.timings.cache_n >= summary.prompt_tokens - 120
            elif dropped:
                assert summary.prompt_tokens <= (N_CTX - 32) / 2  # a new cut leaves half the room free
            cuts.append(dropped)
        assert cuts == sorted(cuts) and cuts[-1] > 0  # a cut only moves on
        assert sum(1 for a, b in zip(cuts, cuts[1:], strict=False) if a == b > 0) >= 2  # and it held for turns
        # A short follow-up keeps the cut; an edited old message is another chat, whose cut is made afresh.
        more = _request((*history, {"role": "user", "content": "More?"}), context_overflow="drop_oldest")
        assert s.window.fit(more, s.templated, N_CTX)[3] == cuts[-1]
        edited = (history[0], {"role": "user", "content": "Part 0 (edited)."}, *history[2:])
        req = _request((*edited, {"role": "user", "content": "More?"}), context_overflow="drop_oldest")
        fitted, prompt, _, dropped = s.window.fit(req, s.templated, N_CTX)
        assert dropped > 0 and len(prompt) <= (N_CTX - 32) / 2 and fitted.messages is not None
        assert fitted.messages[0] == history[0]
    finally:
        s.close()


def test_a_chat_that_fits_is_left_whole(session: Session) -> None:
    req = _request(_chat(1), context_overflow="drop_oldest")
    assert session.window.fit(req, session.templated, N_CTX)[3] == 0
    done = list(session.generate(req))[-1]
    assert isinstance(done, DoneEvent) and done.summary.dropped_messages == 0


def test_error_refuses_and_so_does_a_newest_turn_too_long_alone(session: Session) -> None:
    with pytest.raises(ContextLengthExceeded, match="exceeds the context window of 512"):
        list(session.generate(_request(_chat(4))))  # the default: as llama-server and the OpenAI API
    alone = _request(_chat(2, last=LONG * 3), context_overflow="drop_oldest")
    with pytest.raises(ContextLengthExceeded, match="exceeds the context window of 512"):
        list(session.generate(alone))


def test_a_long_chat_is_templated_a_few_times_not_once_per_turn(session: Session) -> None:
    calls = []

    def counted(r: GenerationRequest) -> tuple[list[int], str]:
        calls.append(r)
        return session.templated(r)

    req = _request(_chat(40), context_overflow="drop_oldest")
    fitted, prompt, _, dropped = RollingWindow(keep_share=1.0).fit(req, counted, N_CTX)
    assert len(prompt) + 32 <= N_CTX and dropped >= 76  # forty long turns: at most two fit beside the newest
    assert len(calls) <= 2 + 6  # the whole chat, the newest turn alone, then a bisection over 40 cuts
    assert fitted.messages is not None and fitted.messages[-1] == req.messages[-1]  # type: ignore[index]
