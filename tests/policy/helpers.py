"""Builders for the Dynamic Draft policy tests: fingerprints, seed-shaped tables, caps."""

from __future__ import annotations

from app.policy import DraftCaps, Fingerprint, FrontierRow, FrontierTable, new_table
from app.policy.table import ranges_from_points
from app.speculative.settings import PLAIN, SpecSettings

N2 = SpecSettings(n_max=2, p_min=0.0)
N4 = SpecSettings(n_max=4, p_min=0.0)
N4P = SpecSettings(n_max=4, p_min=0.25)
N8 = SpecSettings(n_max=8, p_min=0.0)
LOOKUP = SpecSettings(source="lookup", n_max=4)

FP = Fingerprint(
    target_sha256="a" * 64,
    draft_name="qwen-0.5b",
    draft_sha256="b" * 64,
    backend="cpu",
    device="AMD Ryzen",
    llama_build="b1234",
    n_ctx=262144,
    n_gpu_layers=0,
    n_threads=2,
    flash_attn="off",
)
WIDE = DraftCaps(n_max=64, draft_loaded=True)

SEED_POINTS = [3946, 65536, 131072, 200704, 262144]
# tok/s per setting per point, shaped after the seed: n4,p0.25 wins near 4k, n4,p0.0 at 64k, n2,p0.0 ties after.
SEED_TPS = {
    PLAIN: [60.0, 45.0, 40.0, 38.0, 30.0],
    N2: [120.80, 74.85, 54.61, 49.89, 33.51],
    N4P: [141.77, 80.0, 50.0, 45.0, 29.0],
    N4: [130.0, 87.94, 46.0, 42.0, 28.0],
}


def make_table(
    tps: dict[SpecSettings, list[float]],
    points: list[int],
    spread: float = 1.0,
    unsafe: set[tuple[int, SpecSettings]] | None = None,
    upper: int | None = None,
    fingerprint: Fingerprint = FP,
) -> FrontierTable:
    """A table with one row per (point, setting); `unsafe` marks (point index, setting) rows unsafe."""
    ranges = ranges_from_points(points, upper=upper)
    rows = [
        FrontierRow(
            ctx_lo=lo,
            ctx_hi=hi,
            setting=s,
            median_tps=v[i],
            spread_tps=spread,
            repeats=3,
            safe=(i, s) not in (unsafe or set()),
            prompt_tokens=points[i],
        )
        for s, v in tps.items()
        for i, (lo, hi) in enumerate(ranges)
    ]
    return new_table(fingerprint, rows)
