"""Server counters and their Prometheus text rendering (thread-safe: engine pump threads and the event loop write)."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from collections.abc import Mapping

from app.engine.types import EngineError, GenerationSummary
from app.policy.content_class import class_key

ClassKey = tuple[str, str, str]  # (source, class, sub-class or "")

_CACHE_COUNTERS = {
    "hits": "Requests that reused cached prompt tokens (live memory or a restored state).",
    "misses": "Requests that prefilled the whole prompt.",
    "restores": "Saved states restored into a context.",
    "evictions": "Saved states dropped to stay within the byte budget.",
    "cached_tokens": "Prompt tokens not prefilled thanks to the cache.",
}


Family = tuple[str, str, str, list[tuple[str, float]]]  # name, type, help, (labels, value) samples


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """What /metrics reports: HTTP statuses, generations, tokens, speeds, per-source drafting and DD decisions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.http_requests: Counter[str] = Counter()  # by status code
        self.generations: Counter[str] = Counter()  # by finish reason
        self.engine_errors: Counter[str] = Counter()  # by error code
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.predicted_ms = 0.0
        self.last_tps = 0.0
        self.drafted: Counter[str] = Counter()  # by source
        self.accepted: Counter[str] = Counter()
        self.dd_decisions: Counter[str] = Counter()  # by decision reason
        # By (source, content class, sub-class or ""): what the source memory learns from, as counters Prometheus
        # can rate(). The sub-class is a label of its own, set only on copy_edit's near_copy / additive series (a
        # fixed set: class_key), so a class's series without one are what they were and sum(by class) still adds up.
        self.class_drafted: Counter[ClassKey] = Counter()
        self.class_accepted: Counter[ClassKey] = Counter()
        self.class_seconds: defaultdict[ClassKey, float] = defaultdict(float)
        self.prompt_cache: dict[str, int] = {}  # the engine's conversation-cache totals after the latest request

    @property
    def request_count(self) -> int:
        with self._lock:
            return sum(self.http_requests.values())

    def observe_http(self, status: int) -> None:
        with self._lock:
            self.http_requests[str(status)] += 1

    def observe_summary(self, summary: GenerationSummary) -> None:
        t = summary.timings
        with self._lock:
            self.generations[summary.finish_reason] += 1
            self.prompt_tokens += summary.prompt_tokens
            self.completion_tokens += t.predicted_n
            self.predicted_ms += t.predicted_ms
            if t.predicted_n > 0:
                self.last_tps = t.predicted_per_second
            for source, stats in summary.per_source.items():
                self.drafted[source] += int(stats.get("drafted", 0))
                self.accepted[source] += int(stats.get("accepted", 0))
                cls = summary.content_class or "unknown"
                fine = class_key(cls, summary.content_subclass)
                key = (source, cls, fine[len(cls) + 1 :])
                self.class_drafted[key] += int(stats.get("drafted", 0))
                self.class_accepted[key] += int(stats.get("accepted", 0))
                ms = float(stats.get("draft_ms", 0.0)) + float(stats.get("verify_ms", 0.0))
                self.class_seconds[key] += ms / 1000.0
            if summary.cache is not None:
                self.prompt_cache = dict(summary.cache)
            if summary.dynamic_draft is not None:
                self.dd_decisions[str(summary.dynamic_draft.get("reason", "unknown"))] += 1

    def observe_cancelled_before_start(self) -> None:
        with self._lock:
            self.generations["cancelled"] += 1

    def observe_error(self, err: EngineError) -> None:
        with self._lock:
            self.engine_errors[err.code] += 1

    def render(self, queue_depth: int) -> str:
        """Prometheus text exposition format (version 0.0.4)."""
        with self._lock:
            families = [*self._request_families(queue_depth), *self._draft_families(), *self._cache_families()]
        return _exposition(families)

    def _request_families(self, queue_depth: int) -> list[Family]:
        avg = self.completion_tokens / self.predicted_ms * 1000.0 if self.predicted_ms > 0 else 0.0
        return [
            ("dynadraft_http_requests_total", "counter", "HTTP requests answered, by status.",
             _by("status", self.http_requests)),
            ("dynadraft_queue_depth", "gauge", "Engine jobs running or waiting.", [("", queue_depth)]),
            ("dynadraft_generations_total", "counter", "Finished generations, by finish reason.",
             _by("finish_reason", self.generations)),
            ("dynadraft_engine_errors_total", "counter", "Generations the engine refused or failed, by code.",
             _by("code", self.engine_errors)),
            ("dynadraft_prompt_tokens_total", "counter", "Prompt tokens of finished generations.",
             [("", self.prompt_tokens)]),
            ("dynadraft_tokens_generated_total", "counter", "Tokens generated.", [("", self.completion_tokens)]),
            ("dynadraft_last_tokens_per_second", "gauge", "Generation speed of the last request.",
             [("", float(self.last_tps))]),
            ("dynadraft_avg_tokens_per_second", "gauge", "Tokens generated / generation time, since start.",
             [("", float(round(avg, 3)))]),
        ]  # fmt: skip

    def _draft_families(self) -> list[Family]:
        by_class = "by draft source and content class (and copy_edit's sub-class)"
        return [
            ("dynadraft_draft_tokens_total", "counter", "Drafted tokens, by draft source.",
             _by("source", self.drafted)),
            ("dynadraft_draft_accepted_total", "counter", "Accepted drafted tokens, by draft source.",
             _by("source", self.accepted)),
            ("dynadraft_source_drafted_tokens_total", "counter", f"Drafted tokens, {by_class}.",
             _by_class(self.class_drafted)),
            ("dynadraft_source_accepted_tokens_total", "counter", f"Accepted drafted tokens, {by_class}.",
             _by_class(self.class_accepted)),
            ("dynadraft_source_seconds_total", "counter",
             "Drafting plus verifying time of the steps each source was chosen for, by source, class, sub-class.",
             _by_class(self.class_seconds)),
            ("dynadraft_dd_decisions_total", "counter", "Dynamic Draft decisions, by reason.",
             _by("reason", self.dd_decisions)),
        ]  # fmt: skip

    def _cache_families(self) -> list[Family]:
        cache = self.prompt_cache
        out: list[Family] = [
            (f"dynadraft_prompt_cache_{key}_total", "counter", help_, [("", cache.get(key, 0))])
            for key, help_ in _CACHE_COUNTERS.items()
        ]
        held: list[tuple[str, float]] = [("", cache.get("bytes", 0))]
        budget: list[tuple[str, float]] = [("", cache.get("budget", 0))]
        out.append(("dynadraft_prompt_cache_bytes", "gauge", "Bytes of saved states held.", held))
        out.append(
            (
                "dynadraft_prompt_cache_budget_bytes",
                "gauge",
                "The conversation cache's byte budget (--cache-ram).",
                budget,
            )
        )
        return out


def _exposition(families: list[Family]) -> str:
    out: list[str] = []
    for name, kind, help_, samples in families:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            out.append(f"{name}{labels} {value:g}" if isinstance(value, float) else f"{name}{labels} {value}")
    return "\n".join(out) + "\n"


def _by(label: str, counter: Counter[str]) -> list[tuple[str, float]]:
    return [(f'{{{label}="{_escape(k)}"}}', v) for k, v in sorted(counter.items())]


def _by_class(counter: Mapping[ClassKey, float]) -> list[tuple[str, float]]:
    return [
        (f'{{source="{_escape(s)}",class="{_escape(c)}"' + (f',subclass="{u}"}}' if u else "}"), v)
        for (s, c, u), v in sorted(counter.items())
    ]
