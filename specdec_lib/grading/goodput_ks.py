"""Chapter 10b's exercise, the goodput policy's draft length for each row of a server's
batch, in one module: the answer in the student's form, its slips (each the policy with
one rule changed), and the check.

``choose_ks(alphas, cost, max_k, draft_seconds=0.0) -> list[int]``: for each width w from
0 to ``max_k``, every row drafts w unless its own acceptance alpha makes a drafted token
worth less than its drafting time (the i-th drafted token is reached and accepted with
chance alpha^i, worth that many tokens of the round's time per row); a round of B rows
whose widest ask is w costs ``cost.predict(B, w)`` plus ``draft_seconds`` per drafted
token; a row drafting k emits 1 + alpha + ... + alpha^k tokens on average. The w with the
most expected tokens per second wins, the smallest on a tie. The reference is the
library's :func:`~specdec_lib.experiments.goodput_policy.goodput_ks`. The slips are the shortcuts
such a policy takes: the batch's mean acceptance for every row, a round priced as if the
batch were one row, speculation never turned off, the expected tokens off by one, the
drafting time left out.

A case is a batch of 1 to 48 rows (acceptances from 0 to 0.995: spread evenly, clustered,
or a mix of zeros, near-certain rows and others), a cost model (flat in k, steep in k,
compute-bound at a large batch, or the roofline of an 8B model on an A100), ``max_k`` from
1 to 8, and no drafting time or one that costs some rows their drafts. Each slip parts
from the truth on several cases at every seed. A case whose best width wins by less than
a millionth of its rate, or whose row is within a millionth of paying for a draft, is
drawn again: a correct solution that adds up the same numbers in another order must not
fail on rounding. The one tie kept is exact whatever the order: rows that accept nothing,
on a cost flat in k, where every width emits one token per row and the smallest, w = 0,
wins.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from specdec_lib.analysis.costs import RooflineStepCost, StepCostFit
from specdec_lib.experiments.goodput_policy import GoodputK, goodput_ks

from .answers import ExactCheck
from .mistakes import register
from .report import Diagnosis as D
from .sandbox import Abort, as_int, call_student, forbidden

# --- the answer, and its slips ---------------------------------------------------------


def _goodput_reference(alphas: Sequence[float], cost, max_k: int, draft_seconds: float = 0.0):
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


#: The slips: ``(label, function, diagnosis)``, registered below.
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

register("check_goodput_ks", _goodput_reference, *GOODPUT_SLIPS)


# --- the check -------------------------------------------------------------------------

# The batch sizes a profiled cost is given at, and its largest k.
_BATCHES = (1, 2, 4, 8, 16, 32, 48)
_TOP_K = 8
# A case closer than this (relatively) to a tie or to a draft's break-even is drawn again.
_MARGIN = 1e-6

_Case = tuple[tuple[float, ...], Any, int, float, str]


def _profiled(ks: tuple[int, ...], seconds) -> StepCostFit:
    """A cost profiled at :data:`_BATCHES` for each k in ``ks``: ``seconds(batch, k)``."""
    points = tuple(tuple((b, seconds(b, k)) for b in _BATCHES) for k in ks)
    return StepCostFit(ks, points, 0.0, 0.0)


def _cost(rng: random.Random) -> tuple[Any, str]:
    """A cost model and its name: flat in k, steep in k, compute-bound once B (1 + k)
    passes a knee, or a roofline."""
    base, per_row = rng.uniform(2e-3, 10e-3), rng.uniform(0.02e-3, 0.3e-3)
    kind = rng.choice(("flat", "steep", "compute-bound", "roofline"))
    if kind == "flat":
        cost = _profiled((0, _TOP_K), lambda b, k: base + per_row * b)
        return cost, "flat in k"
    if kind == "steep":
        slope = rng.uniform(0.15, 0.6)
        cost = _profiled((0, 1, 2, 4, 8), lambda b, k: (base + per_row * b) * (1 + slope * k))
        return cost, f"steep in k ({1 + slope:.2f}x at k = 1)"
    if kind == "compute-bound":
        knee = rng.uniform(24, 160)

        def seconds(b: int, k: int) -> float:
            return max(base + per_row * b, base / knee * b * (1 + k))

        cost = _profiled(tuple(range(_TOP_K + 1)), seconds)
        return cost, f"compute-bound once B (1 + k) passes {knee:.0f}"
    context, flops = rng.choice((512, 2048, 8192)), rng.choice((312e12, 150e12, 80e12))
    cost = RooflineStepCost(context=context, flops=flops)
    return cost, f"RooflineStepCost(context={context}, flops={flops:.3g})"


def _alphas(rng: random.Random, batch: int) -> tuple[float, ...]:
    """Acceptances from 0 to 0.995 (three decimals): uniform, clustered, or mixed."""
    mode = rng.choice(("uniform", "clustered", "mixed"))
    centre = rng.random()
    out = []
    for _ in range(batch):
        if mode == "uniform":
            a = rng.random()
        elif mode == "clustered":
            a = rng.gauss(centre, 0.08)
        else:
            a = rng.choice((0.0, rng.uniform(0.9, 0.995), rng.random()))
        out.append(round(min(max(a, 0.0), 0.995), 3))
    return tuple(out)


def _plans(case: _Case) -> list[tuple[tuple[int, ...], float, float]]:
    """For each width: the rows' draft lengths, the round's expected tokens per second,
    and how close (relatively) any row came to its break-even for a draft."""
    alphas, cost, max_k, draft_seconds, _ = case
    batch, out = len(alphas), []
    for width in range(max_k + 1):
        seconds = cost.predict(batch, width)
        ks, closest = [], float("inf")
        for a in alphas:
            worth = [a**i * seconds / batch for i in range(1, width + 1)]
            if draft_seconds > 0:
                closest = min([closest, *(abs(w / draft_seconds - 1) for w in worth)])
            ks.append(next((i for i, w in enumerate(worth) if w < draft_seconds), width))
        tokens = sum(sum(a**i for i in range(k + 1)) for a, k in zip(alphas, ks, strict=True))
        out.append((tuple(ks), tokens / (seconds + draft_seconds * sum(ks)), closest))
    return out


def _clear(case: _Case) -> bool:
    """Whether the best draft lengths win by a clear margin, and no row is near break-even."""
    plans = _plans(case)
    best, rate, _ = max(plans, key=lambda p: p[1])
    others = [r for ks, r, _ in plans if ks != best]
    near_tie = bool(others) and max(others) > rate * (1 - _MARGIN)
    return not near_tie and min(p[2] for p in plans) > _MARGIN


def _cases(seed: int) -> list[_Case]:
    """The exact tie, then 80 random cases, smallest batch first (the first wrong one shown
    is then the smallest)."""
    rng = random.Random(f"goodput/{seed}")
    flat = _profiled((0, _TOP_K), lambda b, k: 4e-3 + 0.1e-3 * b)
    cases: list[_Case] = [((0.0, 0.0, 0.0), flat, 4, 0.0, "flat in k")]
    drawn: list[_Case] = []
    while len(drawn) < 80:
        draw = rng.random()  # one row a tenth of the time, 2 to 8 rows three tenths
        batch = 1 if draw < 0.1 else rng.randint(2, 8) if draw < 0.4 else rng.randint(9, 48)
        alphas, (cost, label), max_k = _alphas(rng, batch), _cost(rng), rng.randint(1, _TOP_K)
        draft_seconds = 0.0
        if rng.random() < 0.6:  # a share of a row's part of the plain round
            share = rng.uniform(0.03, 1.0) * cost.predict(batch, 0) / batch
            draft_seconds = float(f"{share:.3g}")
        case = (alphas, cost, max_k, draft_seconds, label)
        if _clear(case):
            drawn.append(case)
    return cases + sorted(drawn, key=lambda c: len(c[0]))


def _answer(fn: Any, case: _Case) -> tuple[int, ...]:
    alphas, cost, max_k, draft_seconds, _ = case
    got = call_student(fn, "choose_ks", list(alphas), cost, max_k, draft_seconds)
    if isinstance(got, torch.Tensor | np.ndarray) and got.ndim == 1:
        got = got.tolist()
    if not isinstance(got, list | tuple) or len(got) != len(alphas):
        what = f"Return a list of {len(alphas)} ints, one draft length per row; got {got!r:.80}."
        raise Abort(D.WRONG_TYPE, what)
    return tuple(as_int(k, "each draft length") for k in got)


def _describe(case: _Case) -> str:
    alphas, cost, max_k, draft_seconds, label = case
    batch = len(alphas)
    ms = ", ".join(f"{1e3 * cost.predict(batch, w):.4g}" for w in range(max_k + 1))
    return (
        f"alphas = {list(alphas)} ({batch} row{'s' * (batch > 1)}), max_k = {max_k}, "
        f"draft_seconds = {draft_seconds:.3g} ({1e3 * draft_seconds:.3g} ms), cost {label}: "
        f"cost.predict({batch}, w) for w = 0..{max_k} = [{ms}] ms"
    )


def _show(ks: tuple[int, ...]) -> str:
    """Draft lengths as a list; a long one with runs of three or more as ``[k] * n + ...``."""
    runs = [(k, len(list(group))) for k, group in itertools.groupby(ks)]
    if len(ks) <= 8 or all(n < 3 for _, n in runs):
        return repr(list(ks))
    return " + ".join(f"[{k}] * {n}" if n >= 3 else repr([k] * n) for k, n in runs)


check_goodput_ks = ExactCheck(
    "check_goodput_ks",
    _cases,
    _answer,
    _describe,
    """Check ``choose_ks(alphas, cost, max_k, draft_seconds=0.0) -> list[int]`` against the
    library's ``goodput_ks`` on 81 batches of 1 to 48 rows: acceptances from 0 to 0.995,
    costs flat or steep in k, compute-bound at a large batch or a roofline, with and
    without drafting time.""",
    forbidden(goodput_ks, GoodputK),
    _show,
)
