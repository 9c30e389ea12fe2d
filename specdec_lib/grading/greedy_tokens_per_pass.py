"""Chapter 4's exercise, tokens per pass from acceptance per position, in one module: the
answer in the student's form, its slips (each the answer with one rule changed), and the
check.

``tokens_per_pass(rates, k) -> float``: ``rates[i]`` is the chance that draft position i
is accepted given that every draft before it was. Draft i is kept only if drafts 0 .. i
all are, so it adds ``rates[0] * ... * rates[i]`` tokens on average, and every round adds
the target's own token: ``1 + sum over i < k of prod(rates[: i + 1])``. The slips are the
ways that sum goes wrong: the target's token left out, the rates added instead of
multiplied, the first position's rate used at every position, one rate too few in each
product. The cases are 40 random rates (zeros and ones among them), k = 1 to 10, sometimes
with more rates than k; the answers are compared to nine decimals.
"""

from __future__ import annotations

import inspect
import math
import random
from collections.abc import Callable, Sequence

from specdec_lib.analysis import theory
from specdec_lib.analysis.theory import expected_tokens_per_pass_from_rates

from .answers import ExactCheck
from .mistakes import register
from .report import Diagnosis as D
from .sandbox import as_number, call_student, forbidden

# --- the answer, and its slips ---------------------------------------------------------


def _per_pass_reference(rates: Sequence[float], k: int) -> float:
    """The library's answer: the kept-prefix rates, then 1 + their sum."""
    kept = list(math.prod(rates[: i + 1]) for i in range(k))
    return expected_tokens_per_pass_from_rates(kept, k)


def _per_pass(kept: Callable[[list[float], int], float], bonus: float = 1.0) -> Callable:
    """Tokens per pass if draft i were kept with probability ``kept(rates, i)``."""
    return lambda rates, k: bonus + sum(kept(list(rates), i) for i in range(k))


#: The slips: ``(label, function, diagnosis)``, registered below.
_SLIPS = (
    ("no bonus token", _per_pass(lambda r, i: math.prod(r[: i + 1]), 0.0), D.NO_TARGET_TOKEN),
    ("adds the rates", _per_pass(lambda r, i: r[i]), D.ADDS_RATES),
    ("the first rate everywhere", _per_pass(lambda r, i: r[0] ** (i + 1)), D.FIRST_RATE_ONLY),
    ("one rate too few", _per_pass(lambda r, i: math.prod(r[:i])), D.ONE_RATE_TOO_FEW),
)

register("check_tokens_per_pass", _per_pass_reference, *_SLIPS)


# --- the check -------------------------------------------------------------------------


def _rate_cases(seed: int) -> list[tuple[tuple[float, ...], int]]:
    """40 random acceptance rates per position (zeros and ones among them), k = 1 to 10,
    sometimes with more rates than k."""
    rng = random.Random(f"rates/{seed}")
    cases = [((1.0,) * 6, 6), ((0.0, 1.0, 1.0), 3), ((0.5,), 1)]
    for _ in range(37):
        k = rng.randint(1, 10)
        rates = tuple(rng.choice([0.0, 1.0, round(rng.random(), 3)]) for _ in range(k))
        cases.append((rates + tuple(round(rng.random(), 3) for _ in range(rng.randint(0, 2))), k))
    return cases


check_tokens_per_pass = ExactCheck(
    "check_tokens_per_pass",
    _rate_cases,
    lambda fn, c: as_number(
        call_student(fn, "tokens_per_pass", list(c[0]), c[1]), "tokens_per_pass"
    ),
    lambda c: f"rates = {list(c[0])}, k = {c[1]}",
    """Check ``tokens_per_pass(rates, k) -> float``: expected tokens per target pass when
    draft position i is accepted at ``rates[i]`` given the drafts before it, against the
    library's theory on 40 random cases (to nine decimals).""",
    forbidden(  # the exercise says: no theory function of the library's
        *(
            f
            for name, f in vars(theory).items()
            if inspect.isfunction(f) and f.__module__ == theory.__name__ and name[0] != "_"
        )
    ),
)
