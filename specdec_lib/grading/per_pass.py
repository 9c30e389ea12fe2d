"""Chapter 4's exercise, tokens per pass from acceptance per position: the answer in the
student's form, and its slips, each the answer with one rule changed.

``rates[i]`` is the chance that draft position i is accepted given that every draft
before it was. Draft i is kept only if drafts 0 .. i all are, so it adds
``rates[0] * ... * rates[i]`` tokens on average, and every round adds the target's own
token: ``1 + sum over i < k of prod(rates[: i + 1])``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from specdec_lib.analysis.theory import expected_tokens_per_pass_from_rates

from .report import Diagnosis as D


def per_pass_reference(rates: Sequence[float], k: int) -> float:
    """The library's answer: the kept-prefix rates, then 1 + their sum."""
    kept = list(math.prod(rates[: i + 1]) for i in range(k))
    return expected_tokens_per_pass_from_rates(kept, k)


def _per_pass(kept: Callable[[list[float], int], float], bonus: float = 1.0) -> Callable:
    """Tokens per pass if draft i were kept with probability ``kept(rates, i)``."""
    return lambda rates, k: bonus + sum(kept(list(rates), i) for i in range(k))


#: The slips, as ``(label, function, diagnosis)`` rows of :data:`~.mistakes.MISTAKES`.
PER_PASS_SLIPS = (
    ("no bonus token", _per_pass(lambda r, i: math.prod(r[: i + 1]), 0.0), D.NO_TARGET_TOKEN),
    ("adds the rates", _per_pass(lambda r, i: r[i]), D.ADDS_RATES),
    ("the first rate everywhere", _per_pass(lambda r, i: r[0] ** (i + 1)), D.FIRST_RATE_ONLY),
    ("one rate too few", _per_pass(lambda r, i: math.prod(r[:i])), D.ONE_RATE_TOO_FEW),
)
