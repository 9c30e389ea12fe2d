"""Chapter 10b's exercise, the goodput policy's draft lengths: the answer in the student's
form, and its slips, each the policy with one rule changed.

``choose_ks(alphas, cost, max_k, draft_seconds=0.0) -> list[int]``: for each width w from
0 to ``max_k``, every row drafts w unless its own acceptance alpha makes a drafted token
worth less than its drafting time (the i-th drafted token is reached and accepted with
chance alpha^i, worth that many tokens of the round's time per row); a round of B rows
whose widest ask is w costs ``cost.predict(B, w)`` plus ``draft_seconds`` per drafted
token; a row drafting k emits 1 + alpha + ... + alpha^k tokens on average. The w with the
most expected tokens per second wins, the smallest on a tie. The reference is the
library's :func:`~specdec_lib.analysis.goodput.goodput_ks`.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence

from specdec_lib.analysis.goodput import goodput_ks

from .report import Diagnosis as D


def goodput_reference(alphas: Sequence[float], cost, max_k: int, draft_seconds: float = 0.0):
    """The library's answer."""
    return goodput_ks(list(alphas), cost, max_k, draft_seconds)


def _expected(alpha: float, k: int) -> float:
    """1 + alpha + ... + alpha^k, summed as the library sums it."""
    return list(itertools.accumulate(alpha**i for i in range(k + 1)))[-1]


def _drafts(alpha: float, width: int, token_seconds: float, draft_seconds: float) -> int:
    """How many of ``width`` positions pay their drafting: the i-th drafted token, reached
    and accepted with chance alpha^i, is worth alpha^i tokens of ``token_seconds``."""
    k = 0
    while k < width and alpha ** (k + 1) * token_seconds >= draft_seconds:
        k += 1
    return k


def _goodput_as(
    planned_with: Callable[[list[float]], list[float]] = lambda alphas: alphas,
    counted_with: Callable[[list[float]], list[float]] = lambda alphas: alphas,
    price: Callable = lambda cost, batch, width: cost.predict(batch, width),
    tokens: Callable[[float, int], float] = _expected,
    first_width: int = 0,
    drafting_in_time: bool = True,
    drafting_in_plan: bool = True,
) -> Callable:
    """The policy with one rule changed: the rows' drafts planned with the acceptances
    ``planned_with(alphas)``, their tokens counted with ``counted_with(alphas)``; a round
    priced ``price(cost, B, w)``; a row drafting k worth ``tokens(alpha, k)``; widths from
    ``first_width``; the drafting time left out of the round's time, or out of the rows'
    plans (every row then drafts the width)."""

    def choose_ks(alphas, cost, max_k, draft_seconds=0.0):
        own = [float(a) for a in alphas]
        planned, counted = planned_with(own), counted_with(own)
        batch = len(own)
        best, best_rate = [0] * batch, -math.inf
        for width in range(first_width, max_k + 1):
            seconds = price(cost, batch, width)
            drafting = draft_seconds if drafting_in_plan else 0.0
            ks = [_drafts(a, width, seconds / batch, drafting) for a in planned]
            time = seconds + (draft_seconds * sum(ks) if drafting_in_time else 0.0)
            rate = sum(tokens(a, k) for a, k in zip(counted, ks, strict=True)) / time
            if rate > best_rate:
                best, best_rate = ks, rate
        return best

    return choose_ks


def _batch_mean(alphas: list[float]) -> list[float]:
    return [statistics.fmean(alphas)] * len(alphas)


#: The slips, as ``(label, function, diagnosis)`` rows of :data:`~.mistakes.MISTAKES`.
GOODPUT_SLIPS = (
    ("batch mean", _goodput_as(planned_with=_batch_mean), D.BATCH_MEAN),
    (
        "batch mean, counted too",
        _goodput_as(planned_with=_batch_mean, counted_with=_batch_mean),
        D.BATCH_MEAN,
    ),
    (
        "blind to load: one row's time",
        _goodput_as(price=lambda cost, batch, width: cost.predict(1, width)),
        D.BLIND_TO_LOAD,
    ),
    (
        "blind to load: B times one row's time",
        _goodput_as(price=lambda cost, batch, width: batch * cost.predict(1, width)),
        D.BLIND_TO_LOAD,
    ),
    ("never off", _goodput_as(first_width=1), D.NEVER_OFF),
    (
        "off by one: no last term",
        _goodput_as(tokens=lambda a, k: _expected(a, k) - a**k),
        D.TOKENS_OFF_BY_ONE,
    ),
    (
        "off by one: no target token",
        _goodput_as(tokens=lambda a, k: _expected(a, k) - 1),
        D.TOKENS_OFF_BY_ONE,
    ),
    ("ignores drafting", _goodput_as(drafting_in_time=False), D.IGNORES_DRAFTING),
    (
        "ignores drafting: plans without it too",
        _goodput_as(drafting_in_time=False, drafting_in_plan=False),
        D.IGNORES_DRAFTING,
    ),
)
