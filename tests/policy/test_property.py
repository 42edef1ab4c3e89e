"""Randomized invariants over 500 seeded tables: never slower than best static beyond noise, never unsafe."""

from __future__ import annotations

import random

from app.policy import DraftCaps, DynamicDraftPolicy, FrontierRow, best_static, new_table
from app.policy.frontier import noise_margin
from app.speculative.settings import PLAIN, SpecSettings
from tests.policy.helpers import FP, WIDE

CANDIDATES = [PLAIN] + [SpecSettings(n_max=n, p_min=p) for n in (1, 2, 4, 8) for p in (0.0, 0.25)]


def random_table(rng: random.Random):
    n_ranges = rng.randint(1, 6)
    cuts = sorted(rng.sample(range(1, 200_000), n_ranges))
    lo = rng.choice([0, rng.randint(0, 500)])
    ranges = []
    for c in cuts:
        hi = max(lo + 1, c)
        ranges.append((lo, hi))
        lo = hi + (rng.randint(1, 300) if rng.random() < 0.2 else 0)  # occasional gaps
    settings = rng.sample(CANDIDATES, rng.randint(1, len(CANDIDATES)))
    rows = []
    for lo, hi in ranges:
        for s in settings:
            if rng.random() < 0.1:
                continue  # not measured here
            tps = rng.uniform(5, 150)
            safe = rng.random() > 0.15
            rows.append(FrontierRow(lo, hi, s, tps, rng.choice([0.0, rng.uniform(0, 10)]), 3, safe))
    if not rows:
        rows.append(FrontierRow(ranges[0][0], ranges[0][1], PLAIN, 10.0, 0.0, 3, True))
    return new_table(FP, rows), ranges


def baseline(rows: dict[SpecSettings, FrontierRow], static_row: FrontierRow) -> FrontierRow:
    """The range's baseline: plain where its safe row is at least as fast as the static row, else static."""
    plain = rows.get(PLAIN)
    return plain if plain is not None and plain.safe and plain.median_tps >= static_row.median_tps else static_row


def test_random_tables_respect_invariants() -> None:
    rng = random.Random(20260621)
    for _ in range(500):
        table, _ranges = random_table(rng)
        policy = DynamicDraftPolicy(table, FP)
        static = best_static(table)
        caps = rng.choice([WIDE, DraftCaps(rng.randint(0, 8), rng.random() < 0.5)])
        for lo, hi in table.ranges:
            rows = {r.setting: r for r in table.rows_in((lo, hi))}
            for n in (lo, (lo + hi) // 2, hi - 1):
                selected, rec = policy.decide(n, None, WIDE)
                assert rec.reason in ("table_row", "fallback_static", "fallback_plain") and rec.applied
                row = rows.get(selected)
                if row is None or not row.safe:
                    # Only when nothing here is safe and no static setting exists: plain decoding, the last resort.
                    assert selected == PLAIN and static is None and not any(r.safe for r in rows.values())
                    continue
                assert row.safe, "picked an unsafe row"
                if static is not None:
                    base = baseline(rows, rows[static.setting])
                    assert row.median_tps >= rows[static.setting].median_tps  # never slower than static, measured
                    assert row.median_tps >= base.median_tps  # nor than plain where plain is the baseline
                    if selected != base.setting:
                        assert row.median_tps - base.median_tps > noise_margin(row, base)
                # Capped: always within caps, still a safe measured row (or plain).
                c_sel, c_rec = policy.decide(n, None, caps)
                assert caps.allows(c_sel)
                assert c_sel == PLAIN or (c_sel in rows and rows[c_sel].safe)
                assert c_rec.capped == (c_sel != selected)
        # Beyond the largest range: the best static setting (or plain if none).
        top = table.ranges[-1][1]
        assert policy.decide(top + 10, None, WIDE)[0] == (static.setting if static else PLAIN)


def test_random_class_frontiers_respect_the_same_invariants() -> None:
    from app.policy.content_class import CONTENT_CLASSES

    rng = random.Random(20261201)
    for _ in range(300):
        table, ranges = random_table(rng)
        rows = list(table.rows)
        for cls in rng.sample(CONTENT_CLASSES, rng.randint(1, 4)):
            for lo, hi in rng.sample(ranges, rng.randint(1, len(ranges))):  # fewer ranges than context-only
                for s in rng.sample(CANDIDATES, rng.randint(1, len(CANDIDATES))):
                    spread = rng.choice([0.0, rng.uniform(0, 10)])
                    rows.append(FrontierRow(lo, hi, s, rng.uniform(5, 150), spread, 3, rng.random() > 0.15, None, cls))
        table = new_table(FP, rows)
        policy = DynamicDraftPolicy(table, FP)
        static = best_static(table)
        for cls in CONTENT_CLASSES:
            own = table.class_ranges.get(cls, ())
            for lo, hi in table.ranges:
                for n in (lo, hi - 1):
                    selected, rec = policy.decide(n, None, WIDE, cls)
                    mine = next(((a, b) for a, b in own if a <= n < b), None)
                    if mine is None:  # no evidence for the class here: exactly the context-only decision
                        assert rec.class_basis == "class_fallback"
                        assert selected == policy.decide(n, None, WIDE)[0]
                        continue
                    assert rec.class_basis == "class_row" and (rec.ctx_lo, rec.ctx_hi) == mine
                    by = {r.setting: r for r in table.rows_in(mine, cls)}
                    row = by.get(selected)
                    if row is None or not row.safe:
                        assert selected == PLAIN
                        continue
                    s_row = by.get(static.setting) if static is not None else None
                    if s_row is not None and s_row.safe:
                        base = baseline(by, s_row)
                        assert row.median_tps >= s_row.median_tps and row.median_tps >= base.median_tps
                        if selected != base.setting:
                            assert row.median_tps - base.median_tps > noise_margin(row, base)
