"""Benchmark DynamicDraftPolicy.decide() on a 64-row table with class rows (median/p90 time per call), and the
content-class detector's cost apart from the lookup, on templated prompts up to 32k tokens; prints, asserts nothing."""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time
from bisect import bisect_right
from collections.abc import Callable
from functools import partial

from app.policy import DraftCaps, DynamicDraftPolicy, Fingerprint, FrontierRow, new_table
from app.policy.table import ranges_from_points
from app.speculative.settings import PLAIN, SpecSettings

SETTINGS = [
    PLAIN,
    SpecSettings(n_max=2),
    SpecSettings(n_max=2, p_min=0.25),
    SpecSettings(n_max=4),
    SpecSettings(n_max=4, p_min=0.25),
    SpecSettings(n_max=6),
    SpecSettings(n_max=8),
    SpecSettings(source="lookup", n_max=4),
]
POINTS = [512, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
FP = Fingerprint("a" * 64, "draft", "b" * 64, "cpu", "bench", "b0", 131072, 0, 2, False)
BATCH = 50  # calls per timed batch, so perf_counter_ns overhead is amortised
BATCHES = 1000


def build_policy() -> DynamicDraftPolicy:
    rng = random.Random(7)
    rows = [
        FrontierRow(lo, hi, s, rng.uniform(10, 150), rng.uniform(0, 4), 5, rng.random() > 0.05)
        for lo, hi in ranges_from_points(POINTS, upper=POINTS[-1] + 1)
        for s in SETTINGS
    ]
    rows = [r if r.setting != PLAIN else FrontierRow(r.ctx_lo, r.ctx_hi, PLAIN, 40.0, 1.0, 5, True) for r in rows]
    assert len(rows) == 64
    # Class frontiers at the two shortest ranges (as a calibration measures them: the same ranges, fewer).
    for cls in ("code", "copy_edit", "near_copy"):
        for lo, hi in ranges_from_points(POINTS, upper=POINTS[-1] + 1)[:2]:
            rows += [FrontierRow(lo, hi, s, rng.uniform(10, 150), rng.uniform(0, 4), 5, True, content_class=cls)
                     for s in SETTINGS]  # fmt: skip
    table = new_table(FP, rows)
    return DynamicDraftPolicy(table, FP, default=SETTINGS[1])


def templated(n_tokens: int) -> tuple[str, str]:
    """(templated prompt, last user turn) of about n_tokens (~4 characters a token): a code file plus an edit."""
    from app.calibration.classes import class_corpus

    block = class_corpus("code")
    user = (block * (n_tokens * 4 // len(block) + 1))[: n_tokens * 4] + "\n\nRename `sku` to `code`, return the file."
    return (
        f"<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n",
        user,
    )


def per_call_ns(fn: Callable[[], object]) -> tuple[float, float]:
    """Median and p90 over batches of the mean ns per call."""
    for _ in range(2000):
        fn()
    samples = []
    gc.disable()
    try:
        for _ in range(BATCHES):
            t0 = time.perf_counter_ns()
            for _ in range(BATCH):
                fn()
            samples.append((time.perf_counter_ns() - t0) / BATCH)
    finally:
        gc.enable()
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * len(samples))]


def _floor(bounds: list[int], settings: tuple[int, ...], n: int) -> int:
    return settings[bisect_right(bounds, n)]


def main() -> None:
    policy = build_policy()
    caps = DraftCaps(n_max=8, draft_loaded=True)
    bounds = policy._bounds  # the same sorted bounds decide() bisects; for the floor measurement only
    settings = tuple(range(len(bounds) + 1))
    override = SpecSettings(n_max=3)
    print(f"python {sys.version.split()[0]}; 64-row table, {len(POINTS)} ranges x {len(SETTINGS)} settings")
    print(f"{'prompt':>7} {'case':<34} {'median us':>10} {'p90 us':>8} {'x floor':>8}")
    for n in (100, 3000, 70000, 200000):
        floor = partial(_floor, bounds, settings, n)
        floor_med, _ = per_call_ns(floor)
        cases: list[tuple[str, Callable[[], object]]] = [
            ("bare bisect + index (floor)", floor),
            ("select() core lookup, no record", partial(policy.select, n, caps)),
            ("decide() with record", partial(policy.decide, n, None, caps)),
            ("decide() override path", partial(policy.decide, n, override, caps)),
        ]
        for name, fn in cases:
            med, p90 = per_call_ns(fn)
            print(f"{n:>7} {name:<34} {med / 1000:>10.3f} {p90 / 1000:>8.3f} {med / floor_med:>8.1f}")
        internal = sorted(policy.decide(n, None, caps)[1].decision_us for _ in range(20000))
        reason = policy.decide(n, None, caps)[1].reason
        print(
            f"{n:>7} {'record.decision_us (self-timed)':<34} {statistics.median(internal):>10.3f} "
            f"{internal[int(0.9 * len(internal))]:>8.3f} {'':>8}  reason={reason}"
        )
    dec, _ = per_call_ns(partial(policy.decide, 3000, None, caps))
    sel, _ = per_call_ns(partial(policy.select, 3000, caps))
    print(f"ratio decide()/select() at 3000 tokens: {dec / sel:.2f}; decide() median vs 1 us target: {dec / 1000:.2f}x")
    print("\nwith a content class (the class step is one dict read in the same precomputed plan):")
    for n in (100, 3000):
        for cls in ("copy_edit", "chat"):
            med, p90 = per_call_ns(partial(policy.decide, n, None, caps, cls))
            rec = policy.decide(n, None, caps, cls)[1]
            print(f"{n:>7} {'decide(' + cls + ')':<34} {med / 1000:>10.3f} {p90 / 1000:>8.3f} {'':>8}  "
                  f"{rec.class_basis}")  # fmt: skip
        for sub in ("near_copy", "additive"):  # additive has no rows here: copy_edit's decide
            med, p90 = per_call_ns(partial(policy.decide, n, None, caps, "copy_edit", None, sub))
            rec = policy.decide(n, None, caps, "copy_edit", None, sub)[1]
            print(f"{n:>7} {'decide(copy_edit/' + sub + ')':<34} {med / 1000:>10.3f} {p90 / 1000:>8.3f} {'':>8}  "
                  f"{rec.class_basis}")  # fmt: skip
    from app.policy.content_class import classify

    print("\ncontent-class detector (app.policy.content_class.classify), apart from the lookup:")
    print(f"{'prompt':>7} {'chars':>8} {'class':<10} {'cue':<18} {'median us':>10} {'p90 us':>8}")
    for n in (100, 4096, 32768):
        text, user = templated(n)
        got = classify(text, user)
        med, p90 = per_call_ns(partial(classify, text, user))
        print(f"{n:>7} {len(text):>8} {got[0]:<10} {got[1]:<18} {med / 1000:>10.3f} {p90 / 1000:>8.3f}")
    snippet = "```python\ndef sum_prices(items):\n    tmp = 0\n    for item in items:\n        tmp += item.price\n"
    snippet += "    return tmp\n```"
    for label, ask in (
        ("short", "Tell me about the history of tea in a few paragraphs."),
        ("s-edit", "Rename `tmp` to `total` and return the whole function.\n\n" + snippet),  # short copy-edit
        ("s-code", "Write a function that does the same for dictionaries and return the complete code:\n" + snippet),
    ):
        chat = f"<|im_start|>user\n{ask}<|im_end|>\n<|im_start|>assistant\n"
        med, p90 = per_call_ns(partial(classify, chat, ask))
        got = classify(chat, ask)
        print(f"{label:>7} {len(chat):>8} {got[0]:<10} {got[1]:<18} {med / 1000:>10.3f} {p90 / 1000:>8.3f}")
    from app.policy.edit_kind import classify_request, edit_kind

    print("\ncopy_edit's sub-class (app.policy.edit_kind): edit_kind alone, and classify_request (class + sub-class,")
    print("what a request pays):")
    print(f"{'prompt':>7} {'chars':>8} {'sub-class':<10} {'cue':<20} {'edit_kind us':>12} {'p90':>7} "
          f"{'request us':>10} {'p90':>7}")  # fmt: skip
    cases = [(str(n), *templated(n)) for n in (100, 4096, 32768)]
    for label, ask in (
        ("s-edit", "Rename `tmp` to `total` and return the whole function.\n\n" + snippet),
        ("s-add", "Add a docstring and type hints to this function and return the whole function.\n\n" + snippet),
    ):
        cases.append((label, f"<|im_start|>user\n{ask}<|im_end|>\n<|im_start|>assistant\n", ask))
    for label, text, ask in cases:
        sub, cue = edit_kind(ask)
        med, p90 = per_call_ns(partial(edit_kind, ask))
        rmed, rp90 = per_call_ns(partial(classify_request, text, ask))
        print(f"{label:>7} {len(text):>8} {sub or '-':<10} {cue or '-':<20} {med / 1000:>12.3f} {p90 / 1000:>7.3f} "
              f"{rmed / 1000:>10.3f} {rp90 / 1000:>7.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
