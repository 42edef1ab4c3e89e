"""The pool remembers, through `dynadraft serve` and the `openai` client: warm starts, /metrics, restarts, damage.

SmolLM2-135M drafts for itself from a Q2_K copy: on this CPU a draft token costs about as much as a target token, so
the draft model is the losing arm, and a cold pool spends its warm-up pulls on it that a remembered pool does not.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai

from app.models.packaged import ensure_quantized
from app.policy.source_memory import MEMORY_FILE, WRITE_INTERVAL_S
from app.speculative.adaptive import WARMUP_PULLS
from tests.server.helpers import dynadraft_serve

CODE = "\n".join(f"def handler_{i}(request):\n    return respond(request, code={i})\n" for i in range(5))
COPY = [{"role": "user", "content": f"Repeat this code exactly:\n\n```python\n{CODE}```"}]
POOL = {"speculative": {"source": "pool", "n_max": 6}}
# copy_edit's two sub-classes (app.policy.edit_kind) on the same block: a near copy and an additive edit.
RENAME = [
    {
        "role": "user",
        "content": f"Rename `handler_0` to `first_handler` and return the full code:\n\n```python\n{CODE}```",
    }
]
DOCS = [
    {"role": "user", "content": f"Add a docstring to every function and return the full code:\n\n```python\n{CODE}```"}
]


@contextmanager
def _serve(model: Path) -> Iterator[tuple[openai.OpenAI, str]]:
    draft = ensure_quantized("smollm2-135m", "Q2_K")
    with dynadraft_serve("--model", str(model), "--draft", str(draft)) as (client, name, base):
        client.model = name  # type: ignore[attr-defined]  # the served model's name, for _chat
        yield client, base


_last_reply = [0.0]


def _chat(client: openai.OpenAI, extra: dict[str, Any] = POOL, messages: list[dict[str, str]] = COPY) -> dict[str, Any]:
    # The memory file is written at a request's end at most once per WRITE_INTERVAL_S: a request that ends sooner
    # after the last write leaves its learning for the next write (CI, on a quiet machine: a KeyError reading it).
    # Starting each request that long after the last reply makes every request's end a write the test can read.
    time.sleep(max(0.0, _last_reply[0] + WRITE_INTERVAL_S + 0.05 - time.monotonic()))
    resp = client.chat.completions.create(
        model=client.model, messages=messages, max_tokens=48, temperature=0, extra_body=extra
    )  # type: ignore[arg-type]
    _last_reply[0] = time.monotonic()
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
        # The cold pool tried the draft (its warm-up, cut short once the measured costs say it cannot pay here).
        assert 1 <= cold["memory"]["chosen"]["draft"] <= WARMUP_PULLS
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

    remembered = _remembered(home, "code")  # flushed at shutdown: every request that chose (or scored) a source counts
    chose = [cold["memory"]["chosen"], warm["memory"]["chosen"]]
    assert remembered["none"]["requests"] == sum(1 for c in chose if c.get("none"))
    assert remembered["draft"]["requests"] == sum(1 for c in chose if c.get("draft"))
    # Prompt lookup also learns on the steps it was only scored in the shadow (its proposal against the output).
    lookup_news = [m["chosen"].get("lookup") or m.get("scored", {}).get("lookup") for m in (cold["memory"], mem)]
    assert remembered["lookup"]["requests"] == sum(1 for n in lookup_news if n) + 1  # + the adaptive run
    with _serve(smollm2_path) as (client, _):
        restarted = _chat(client)
        assert restarted["memory"]["warm"] is True
        started = restarted["memory"]["sources"]
        assert started["draft"]["reward"] == remembered["draft"]["reward"]
        # Every source the file remembers from a pool (a reward) warm-starts, with its totals. Prompt lookup has one
        # only where a pool chose it: a loaded machine can make its probes not pay, leaving it shadow-scored only.
        assert set(started) == {name for name, arm in remembered.items() if arm["reward"] is not None}
        assert all(started[name]["requests"] == remembered[name]["requests"] for name in started)

    path = _memory_file(home)
    path.write_text('{"schema_version": 1, "pairs": {"x": {"code": {"draft": {"reward": "lots"}}}}}')
    with _serve(smollm2_path) as (client, _):
        damaged = _chat(client)
        assert damaged["memory"]["warm"] is False and "damaged" in damaged["memory"]["note"]
    assert len(list(path.parent.glob(f"{MEMORY_FILE}.damaged-*"))) == 1
    assert _remembered(home, "code")["draft"]["requests"] == 1  # a fresh memory, started from that request


def _metric(metrics: str, family: str, labels: str) -> float | None:
    found = re.search(rf"^dynadraft_source_{family}_total{{{labels}}} ([0-9.e+]+)$", metrics, re.M)
    return float(found.group(1)) if found else None


def test_a_subclass_learns_its_own_memory_and_starts_from_its_class(smollm2_path: Path, _isolated_home: Path) -> None:
    home = _isolated_home
    with _serve(smollm2_path) as (client, base):
        cold = _chat(client, messages=RENAME)
        assert cold["class"] == "copy_edit" and cold["subclass"] == "near_copy"
        assert cold["memory"]["subclass"] == "near_copy" and cold["memory"]["warm"] is False
        # Learnt under the sub-class's key and under its class's.
        near, whole = _remembered(home, "copy_edit/near_copy"), _remembered(home, "copy_edit")
        assert near == whole and near["none"]["requests"] == 1

        # additive has no memory yet: it starts from copy_edit's, and says so per source.
        add = _chat(client, messages=DOCS)
        assert add["subclass"] == "additive" and add["memory"]["warm"] is True
        assert {s["from"] for s in add["memory"]["sources"].values()} == {"copy_edit"}
        assert add["memory"]["sources"]["none"]["reward"] == whole["none"]["reward"]
        additive = _remembered(home, "copy_edit/additive")
        # A source the additive request chose (warm, the pool need not try every arm): learnt under both keys.
        # near_copy's own pool memory: the sources its cold pool chose (one it only shadow-scored has no reward).
        near_pooled = {name for name, arm in near.items() if arm["reward"] is not None}
        picked = [name for name in add["memory"]["chosen"] if name in near_pooled]
        assert picked, add["memory"]
        src = picked[0]
        assert additive[src]["requests"] == 1 and _remembered(home, "copy_edit")[src]["requests"] == 2

        # near_copy again: its own memory, not the class's (which the additive request has moved since), for every
        # source it has learnt; one only the additive request chose starts from the class's.
        again = _chat(client, messages=RENAME)
        used = again["memory"]["sources"]
        assert near_pooled <= set(used)
        assert {name: s["from"] for name, s in used.items()} == {
            name: "copy_edit/near_copy" if name in near_pooled else "copy_edit" for name in used
        }
        assert used[src]["reward"] == near[src]["reward"] != _remembered(home, "copy_edit")[src]["reward"]

        # A request without a sub-class keeps the class-only key and shape.
        code = _chat(client)
        assert code["class"] == "code" and code["subclass"] is None and code["memory"]["subclass"] is None

        metrics = httpx.get(base.removesuffix("/v1") + "/metrics").text
    # Prometheus: the sub-class is a label of its own on copy_edit's series; other classes' series are unchanged.
    for family in ("drafted_tokens", "accepted_tokens", "seconds"):
        for sub in ("near_copy", "additive"):
            assert _metric(metrics, family, f'source="[a-z]+",class="copy_edit",subclass="{sub}"') is not None
        assert _metric(metrics, family, 'source="[a-z]+",class="code"') is not None
    assert 'class="copy_edit"}' not in metrics  # every copy_edit request here had a sub-class
    assert not re.search(r'subclass="(?!near_copy"|additive")', metrics)
