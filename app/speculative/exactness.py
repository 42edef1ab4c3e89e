"""The greedy exactness criterion: speculative output equals plain decoding, or departs from it only at a near-tie.

llama.cpp's logits shift slightly with batch size (different kernels and reduction orders for a verify batch than
for a single token), so a greedy speculative run can legitimately pick the other token where plain decoding's top-2
logits were almost equal. Measured on the 1.5B target here, such divergences happened at margins of 0.22 and 0.09,
against a median margin of about 1.5. A verifier bug shows up as a divergence at an ordinary margin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# A divergence is excused only where plain decoding's top-1/top-2 logit gap was below this. Batch-size numerics move
# logits by a few hundredths to a few tenths; 0.5 is about a third of the median margin, so an excused divergence
# is still a genuinely close call, while a wrong-token bug (uniform over positions) would usually land above it.
NEAR_TIE_MARGIN = 0.5


@dataclass(frozen=True)
class Exactness:
    """Outcome of comparing a speculative run with plain decoding."""

    identical: bool
    acceptable: bool
    divergence_at: int | None = None
    margin: float | None = None

    def describe(self) -> str:
        if self.identical:
            return "identical"
        return f"diverged at token {self.divergence_at} where the plain top-2 margin was {self.margin}"


def first_divergence(a: Sequence[int], b: Sequence[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None


def compare(
    plain: Sequence[int], plain_margins: Sequence[float], spec: Sequence[int], bound: float = NEAR_TIE_MARGIN
) -> Exactness:
    """Identical on the common length, or first differing at a token where plain decoding was a near-tie."""
    i = first_divergence(plain, spec)
    if i is None:
        return Exactness(identical=True, acceptable=True)
    margin = plain_margins[i] if i < len(plain_margins) else None
    return Exactness(False, margin is not None and margin < bound, i, margin)
