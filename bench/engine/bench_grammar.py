"""Grammar cost: llama.cpp's grammar mask per verify row against a row's decode, on the 1.5B target (152k vocab).

Run: python -m bench.engine.bench_grammar [--max-tokens N] [--threads N]
Prints, measured side by side in one run: one single-token decode of the target; a full-vocabulary mask at three
grammar states; and, in real JSON-schema generations (greedy and T=0.8, plain and with the 0.5B draft), the time
spent in the grammar per verify row (tiered checks: the full mask only when no likely token is admitted) as a
fraction of the decode time per row. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from app.engine.config import EngineConfig
from app.engine.session import Session
from app.engine.types import DoneEvent, GenerationRequest
from app.models.packaged import speculative_pair
from app.runtime import grammar as grammar_mod
from app.runtime.grammar import Grammar
from app.runtime.sampling import SamplingParams
from app.runtime.structured import json_schema_grammar
from app.speculative.settings import PLAIN, SpecSettings

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "skills": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}},
    },
    "required": ["name", "age", "skills", "address"],
}
PROMPT = "Invent a software engineer and describe them as JSON: name, age, skills and address."


class Meter:
    """Wall time inside the grammar wrapper's calls into llama.cpp (apply = masks and checks, accept)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0
        self.full = 0  # masks over the whole vocabulary

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(grammar: Grammar, buf: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(grammar, buf)
            finally:
                self.seconds += time.perf_counter() - t0
                self.calls += 1
                self.full += int(buf.shape[0] == grammar.n_vocab)

        return timed


def decode_ms(s: Session, reps: int = 8) -> float:
    """One single-token decode of the target after a short prompt (the cost a verify row is compared with)."""
    ids = s.model.vocab.tokenize("Hello, my name is", add_special=True)
    s.ctx.clear()
    s.ctx.prefill(ids)
    t0 = time.perf_counter()
    for i in range(reps):
        s.ctx.decode([ids[-1 - (i % 3)]])
    out = (time.perf_counter() - t0) / reps * 1000.0
    s.ctx.clear()
    return out


def full_mask_ms(s: Session, gbnf: str) -> dict[str, float]:
    vocab = s.model.vocab
    out = {}
    for label, text in (("start", ""), ("in a string", '{"name": "Ad'), ("in a number", '{"name": "Ada", "age": 3')):
        g = Grammar(vocab.ptr, vocab.n_vocab, gbnf)
        for t in vocab.tokenize(text, add_special=False, parse_special=False) if text else []:
            g.accept(t)
        t0 = time.perf_counter()
        for _ in range(5):
            g.mask()
        out[label] = (time.perf_counter() - t0) / 5 * 1000.0
        g.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    target, draft = speculative_pair()
    s = Session(EngineConfig(model=str(target), draft=str(draft), n_ctx=2048, n_threads=args.threads))
    gbnf = json_schema_grammar(SCHEMA)
    print(f"target {target.name}, vocab {s.model.vocab.n_vocab}, {args.threads} threads")
    one = decode_ms(s)
    print(f"single-token decode of the target: {one:.1f} ms")
    for label, ms in full_mask_ms(s, gbnf).items():
        print(f"full-vocabulary mask, {label}: {ms:.1f} ms ({ms / one:.2f}x a decode)")

    meter = Meter()
    grammar_mod.Grammar._apply = meter.wrap(grammar_mod.Grammar._apply)  # type: ignore[method-assign]
    for temp in (0.0, 0.8):
        for spec in (PLAIN, SpecSettings("draft", 4), SpecSettings("lookup", 8)):
            meter.seconds, meter.calls, meter.full = 0.0, 0, 0
            d0 = s.ctx.decode_s
            req = GenerationRequest(
                messages=({"role": "user", "content": PROMPT},),
                max_tokens=args.max_tokens,
                sampling=SamplingParams(temperature=temp, seed=3),
                speculative=spec,
                grammar=gbnf,
                cache_prompt=False,
            )
            summary = next(e.summary for e in s.generate(req) if isinstance(e, DoneEvent))
            rows = summary.steps + 1 + summary.timings.draft_n  # every verify batch row, plus the prefill's last
            dec = (s.ctx.decode_s - d0) * 1000.0 - summary.timings.prompt_ms
            ok = "valid" if _valid(summary.text) else "cut"
            print(
                f"T={temp} {spec.source:>6}: {len(summary.tokens)} tokens ({ok} JSON), {rows} rows, grammar "
                f"{meter.seconds * 1000 / rows:.2f} ms/row ({meter.calls / rows:.1f} calls/row) vs decode "
                f"{dec / rows:.1f} ms/row: {meter.seconds * 1000 / max(dec, 1e-9) * 100:.1f}% of the decode, "
                f"{meter.seconds * 1000 / rows / one * 100:.1f}% of a single-token decode; {meter.full} full masks"
            )
    s.close()


def _valid(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


if __name__ == "__main__":
    main()
