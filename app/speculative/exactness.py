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
        if self.margin is None and self.divergence_at is not None:
            return f"differs at token {self.divergence_at} (length or finish reason) with no near-tie there"
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


def compare_outputs(
    plain: Sequence[int],
    plain_margins: Sequence[float],
    plain_finish: str,
    spec: Sequence[int],
    spec_finish: str,
    bound: float = NEAR_TIE_MARGIN,
) -> Exactness:
    """The whole output: tokens, length and finish reason equal, or a first divergence at a near-tie.

    A run that ends early (a wrong end-of-generation token) or runs on past plain decoding's end diverges where the
    shorter one stopped; it is excused only if plain decoding's choice there was a near-tie (plain_margins[i] is the
    margin of the row that chose token i, or the end token when i == len(plain)). Same tokens with another finish
    reason (a stop string matched differently, say) is a real difference.
    """
    i = first_divergence(plain, spec)
    if i is None:
        if len(plain) == len(spec):
            same = plain_finish == spec_finish
            return Exactness(identical=same, acceptable=same, divergence_at=None if same else len(plain))
        i = min(len(plain), len(spec))
    margin = plain_margins[i] if i < len(plain_margins) else None
    return Exactness(False, margin is not None and margin < bound, i, margin)
