"""A heavy draft source (a target load option, state beside the target's memory, its own default depth, a reason it
cannot run on a model) is still one class plus one registration line: toy ones, registered here, run end to end
through a real session's conversation cache, the command line's flags and a refused request."""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from app.cli import build_parser
from app.engine.config import EngineConfig
from app.engine.generate_cli import spec_from_args
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest, GenerationSummary, InvalidRequest
from app.runtime.llama import Model
from app.runtime.sampling import SamplingParams
from app.speculative import registry
from app.speculative.settings import SpecSettings
from app.speculative.sources import SourceEnv
from tests.speculative.test_registry import RepeatSource


class StatefulRepeat(RepeatSource):
    """The toy repeat source with state that must come back with the target's checkpoints (as the MTP head's
    context does): it saves how many tokens the target held, and records what a restore hands back."""

    name: ClassVar[str] = "stateful"
    label: ClassVar[str] = "Repeat, with state"
    default_n_max: ClassVar[int] = 2
    load_flags: ClassVar[tuple[str, ...]] = ("load_mtp",)  # a target load option it needs (the one ModelParams has)
    cache_attachment: ClassVar[bool] = True

    def __init__(self) -> None:
        self.restores: list[tuple[int, bytes | None]] = []

    @classmethod
    def create(cls, env: SourceEnv) -> StatefulRepeat:
        return cls()

    def checkpoint_state(self, tokens: Sequence[int]) -> bytes | None:
        return struct.pack("<I", len(tokens))

    def restored(self, tokens: Sequence[int], state: bytes | None) -> None:
        self.restores.append((len(tokens), state))


class NeverHere(RepeatSource):
    """A source that cannot run on any model, and says why."""

    name: ClassVar[str] = "never"

    @classmethod
    def create(cls, env: SourceEnv) -> None:
        return None

    @classmethod
    def unavailable_reason(cls, model: Model) -> str | None:
        return f"{model.path.name} has no toy head"


@pytest.fixture(scope="module")
def registered() -> Iterator[None]:
    registry.register(StatefulRepeat)  # the one registration line each (a real source puts it in registry.py)
    registry.register(NeverHere)
    yield
    registry.unregister(NeverHere.name)
    registry.unregister(StatefulRepeat.name)


def _chat(session: Session, messages: list[dict[str, str]], spec: SpecSettings) -> GenerationSummary:
    req = GenerationRequest(
        messages=tuple(messages), max_tokens=12, sampling=SamplingParams(temperature=0.0), speculative=spec
    )
    return [e for e in session.generate(req) if isinstance(e, DoneEvent)][0].summary


def test_its_state_comes_back_with_the_targets_checkpoint(registered: None, smollm2_path: Path) -> None:
    # --mtp off keeps the MTP head's load option off; the toy source's own declaration still turns it on.
    s = Session(EngineConfig(model=str(smollm2_path), n_ctx=1024, n_batch=128, mtp="off"))
    try:
        assert s.model.params.load_mtp
        source = s.sources[StatefulRepeat.name]
        assert isinstance(source, StatefulRepeat)
        spec = registry.from_intent(StatefulRepeat.name)
        assert spec == SpecSettings(StatefulRepeat.name, 2)  # its own default depth
        first = [{"role": "user", "content": "Name three colours."}]
        a1 = _chat(s, first, spec)
        assert a1.timings.draft_n > 0  # it drafted
        _chat(s, [{"role": "user", "content": "Write a haiku about rain on a tin roof."}], spec)
        assert source.restores == []
        follow = [*first, {"role": "assistant", "content": a1.text}, {"role": "user", "content": "And animals?"}]
        a2 = _chat(s, follow, spec)
        assert a2.timings.cache_n >= a1.prompt_tokens  # the first chat's checkpoint came back ...
        assert source.restores, "the cache did not hand the source its state back"
        held, state = source.restores[-1]
        assert state == struct.pack("<I", held)  # ... with the state saved beside it, for the same tokens
        # A source that cannot run here says why, where a request asks for it.
        assert s.missing[NeverHere.name] == f"{smollm2_path.name} has no toy head"
        with pytest.raises(InvalidRequest, match="has no toy head"):
            _chat(s, first, SpecSettings(NeverHere.name, 2))
    finally:
        s.close()


def test_the_command_line_takes_it_by_name_with_its_default_depth(registered: None) -> None:
    args = build_parser().parse_args(["generate", "--model", "m.gguf", "--prompt", "hi", "--source", "stateful"])
    assert spec_from_args(args) == SpecSettings("stateful", 2)
    args = build_parser().parse_args(["generate", "--model", "m.gguf", "--prompt", "hi", "--mtp"])
    assert spec_from_args(args) == SpecSettings("mtp", 3)  # the MTP head declares 3, as HTTP and the app now draft
