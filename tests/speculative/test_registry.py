"""A new draft source is one class plus one registration line: a toy source, registered here, runs end to end."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import httpx
import numpy as np
import pytest

from app.calibration.runner import candidates
from app.engine.config import EngineConfig
from app.engine.types import GenerationRequest, StepEvent
from app.engine.worker import Engine
from app.runtime.sampling import SamplingParams
from app.server.runner import EndpointServer
from app.server.schemas import ChatCompletionRequest
from app.speculative import registry
from app.speculative.exactness import compare
from app.speculative.settings import PLAIN, SpecSettings
from app.speculative.sources import Draft, SourceEnv


class RepeatSource:
    """Toy source: proposes the last token again, n_max times (right only where the text repeats a token)."""

    name: ClassVar[str] = "repeat"
    label: ClassVar[str] = "Repeat the last token"
    needs_draft_model: ClassVar[bool] = False
    cheap_peek: ClassVar[bool] = False

    @classmethod
    def create(cls, env: SourceEnv) -> RepeatSource:
        return cls()

    @classmethod
    def calibration_grid(cls, mode: str) -> tuple[SpecSettings, ...]:
        return (SpecSettings(cls.name, 2),)

    def propose(
        self,
        history: Sequence[int],
        n_max: int,
        n_min: int,
        p_min: float,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        tokens = [history[-1]] * n_max if history and n_max >= max(n_min, 1) else []
        return Draft(self.name, tokens, [1.0] * len(tokens), [None] * len(tokens))

    def rollback(self, n_committed: int) -> None:
        """Stateless."""

    def reset(self) -> None:
        """Stateless."""

    def close(self) -> None:
        """Nothing allocated."""


@pytest.fixture(scope="module")
def repeat_registered() -> Iterator[None]:
    registry.register(RepeatSource)  # the one registration line (a real source puts it in registry.py)
    yield
    registry.unregister(RepeatSource.name)


@pytest.fixture(scope="module")
def engine(repeat_registered: None, smollm2_path: Path) -> Iterator[Engine]:
    steps: list[StepEvent] = []
    eng = Engine(
        EngineConfig(model=str(smollm2_path), n_ctx=1024, n_threads=1),
        on_event=lambda ev: steps.append(ev) if isinstance(ev, StepEvent) else None,
    ).wait_ready(120)
    eng.steps = steps  # type: ignore[attr-defined]
    yield eng
    eng.close()


def _request(spec: SpecSettings, margins: bool = False) -> GenerationRequest:
    return GenerationRequest(
        prompt="Count: one one one one two two two two three three three",
        max_tokens=32,
        sampling=SamplingParams(temperature=0.0),
        speculative=spec,
        collect_margins=margins,
        cache_prompt=False,
    )


def test_the_engine_drafts_with_a_registered_source(engine: Engine) -> None:
    plain = engine.generate(_request(PLAIN, margins=True))
    engine.steps.clear()  # type: ignore[attr-defined]
    toy = engine.generate(_request(SpecSettings("repeat", 4)))
    steps = engine.steps  # type: ignore[attr-defined]
    assert "repeat" in {s.source for s in steps} and sum(s.drafted for s in steps) > 0
    assert toy.settings.source == "repeat" and "repeat" in toy.per_source
    # Verification keeps greedy output exact (up to the project's near-tie rule) whatever a source proposes.
    assert compare(plain.tokens, plain.margins, toy.tokens).acceptable
    assert engine.call(lambda runtime: runtime.capabilities.sources) == ("lookup", "repeat")  # no draft model


def test_the_pool_and_the_calibration_grid_include_it(engine: Engine) -> None:
    engine.steps.clear()  # type: ignore[attr-defined]
    pooled = engine.generate(_request(SpecSettings("pool", 4)))  # no draft model: the toy source makes a pool
    assert "repeat" in {s.source for s in engine.steps}  # type: ignore[attr-defined]
    assert pooled.finish_reason in ("stop", "length")
    assert SpecSettings("repeat", 2) in candidates(("lookup", "repeat"), "quick")
    assert SpecSettings("pool", 16, cost_stop=True) in candidates(("lookup", "repeat"), "quick")


def test_the_http_api_accepts_and_documents_it(engine: Engine) -> None:
    srv = EndpointServer(engine, "toy", port=0)
    srv.start()
    try:
        with httpx.Client(base_url=srv.url, timeout=60) as http:
            body = {
                "model": "toy",
                "messages": [{"role": "user", "content": "Say one one one."}],
                "max_tokens": 8,
                "temperature": 0,
                "speculative": {"source": "repeat", "n_max": 3},
            }
            r = http.post("/v1/chat/completions", json=body)
            assert r.status_code == 200, r.text
            assert r.json()["dynamic_draft"]["selected"]["source"] == "repeat"
            bad = http.post("/v1/chat/completions", json=body | {"speculative": {"source": "magic"}})
            known = ", ".join(registry.choices())  # the built-in sources (MTP included), the toy, none and pool
            assert "repeat" in known and bad.status_code == 400 and known in bad.json()["error"]["message"]
    finally:
        srv.stop()
    schema = ChatCompletionRequest.model_json_schema()["$defs"]["SpeculativeOptions"]["properties"]["source"]
    assert schema["enum"] == [*registry.choices(), None] and "repeat" in schema["enum"]


def test_the_gui_lists_it(repeat_registered: None) -> None:
    from app.gui.chat_request import spec_modes

    assert spec_modes()["repeat"] == "Repeat the last token"
