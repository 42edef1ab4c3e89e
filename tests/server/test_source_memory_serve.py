"""The pool remembers, through `dynadraft serve` and the `openai` client: warm starts, /metrics, restarts, damage.

SmolLM2-135M drafts for itself from a Q2_K copy: on this CPU a draft token costs about as much as a target token, so
the draft model is the losing arm, and a cold pool spends its warm-up pulls on it that a remembered pool does not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai

from app.models.packaged import ensure_quantized
from app.policy.source_memory import MEMORY_FILE
from app.speculative.adaptive import WARMUP_PULLS
from tests.server.helpers import dynadraft_serve

CODE = "\n".join(f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(5))
COPY = [{"role": "user", "content": f"Repeat this code exactly:\n\n```python\n{CODE}```"}]
POOL = {"speculative": {"source": "pool", "n_max": 6}}


@contextmanager
def _serve(model: Path) -> Iterator[tuple[openai.OpenAI, str]]:
    draft = ensure_quantized("smollm2-135m", "Q2_K")
    with dynadraft_serve("--model", str(model), "--draft", str(draft)) as (client, name, base):
        client.model = name  # type: ignore[attr-defined]  # the served model's name, for _chat
        yield client, base


def _chat(client: openai.OpenAI, extra: dict[str, Any] = POOL) -> dict[str, Any]:
    resp = client.chat.completions.create(
        model=client.model, messages=COPY, max_tokens=48, temperature=0, extra_body=extra
    )  # type: ignore[arg-type]
    out = resp.model_dump()
    assert out["choices"][0]["message"]["content"]
    return out["per_source"]


def _memory_file(home: Path) -> Path:
    (path,) = (home / "calibration").glob(f"*/{MEMORY_FILE}")
    return path


def _remembered(home: Path, cls: str) -> dict[str, Any]:
    (pair,) = json.loads(_memory_file(home).read_text())["pairs"].values()
    return pair[cls]


def test_warm_start_survives_a_restart_and_a_damaged_file(smollm2_path: Path, _isolated_home: Path) -> None:
    home = _isolated_home
    with _serve(smollm2_path) as (client, base):
        cold = _chat(client)
        assert cold["class"] == "code" and cold["memory"]["warm"] is False and cold["memory"]["sources"] == {}
        assert cold["memory"]["chosen"]["draft"] >= WARMUP_PULLS  # the cold pool's warm-up on the losing arm
        after_one = _remembered(home, "code")
        assert after_one["draft"]["requests"] == 1 and after_one["draft"]["reward"] < after_one["none"]["reward"]

        warm = _chat(client)
        mem = warm["memory"]
        assert warm["class"] == "code" and mem["warm"] is True
        # The warm start is the file's memory (rounded alike), with pulls capped so exploration still happens.
        assert mem["sources"]["draft"]["reward"] == after_one["draft"]["reward"]
        assert mem["sources"]["draft"]["acceptance"] == after_one["draft"]["acceptance"]
        assert 0 < mem["sources"]["draft"]["pulls"] <= WARMUP_PULLS
        # Behaviour: no warm-up pulls wasted on the remembered loser.
        assert mem["chosen"].get("draft", 0) < cold["memory"]["chosen"]["draft"]

        # Adaptive length alone warm-starts its per-position acceptance from the same class's memory.
        adaptive = _chat(client, {"speculative": {"source": "lookup", "n_max": 6, "adaptive": True}})
        assert adaptive["memory"]["warm"] is True and adaptive["memory"]["sources"]["lookup"]["acceptance"]

        metrics = httpx.get(base.removesuffix("/v1") + "/metrics").text
        for family in ("drafted_tokens", "accepted_tokens", "seconds"):
            assert re.search(
                rf'^dynadraft_source_{family}_total{{source="draft",class="code"}} [0-9.e+]+$', metrics, re.M
            )
        drafted = re.search(
            r'^dynadraft_source_drafted_tokens_total{source="draft",class="code"} (\d+)$', metrics, re.M
        )
        assert drafted and int(drafted.group(1)) > 0

    remembered = _remembered(home, "code")  # flushed at shutdown: every request in which a source was chosen counts
    chose = [cold["memory"]["chosen"], warm["memory"]["chosen"]]
    assert remembered["none"]["requests"] == 2
    assert remembered["draft"]["requests"] == sum(1 for c in chose if c.get("draft"))
    assert remembered["lookup"]["requests"] == sum(1 for c in chose if c.get("lookup")) + 1  # + the adaptive run
    with _serve(smollm2_path) as (client, _):
        restarted = _chat(client)
        assert restarted["memory"]["warm"] is True
        assert restarted["memory"]["sources"]["draft"]["reward"] == remembered["draft"]["reward"]
        assert restarted["memory"]["sources"]["lookup"]["requests"] == remembered["lookup"]["requests"]

    path = _memory_file(home)
    path.write_text('{"schema_version": 1, "pairs": {"x": {"code": {"draft": {"reward": "lots"}}}}}')
    with _serve(smollm2_path) as (client, _):
        damaged = _chat(client)
        assert damaged["memory"]["warm"] is False and "damaged" in damaged["memory"]["note"]
    assert len(list(path.parent.glob(f"{MEMORY_FILE}.damaged-*"))) == 1
    assert _remembered(home, "code")["draft"]["requests"] == 1  # a fresh memory, started from that request
