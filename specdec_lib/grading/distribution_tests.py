"""Chapter 7's exercise, a distribution test of the residual rule, in one module: the answer
in the student's form, its slips, and the check.

``distribution_test(rule, seed) -> float`` is a p-value for "``rule`` (with
``accept_sampled``'s signature) emits the target's distribution"; the student chooses
where to test, how many rounds and which statistic, and draws from ``seed``. The check
grades it as chapter 7 grades the chi-square: it runs it on the correct rule and on the
biased one (resampling from p on rejection) at 100 seeds each and counts both errors at
the student's level ``alpha``. It fails a test that failed the correct rule more often
than a test of level alpha does with probability 1e-3, and one that caught the biased
rule at fewer than 80 of the 100 seeds.

The reference tests the chapter's situation (a vocabulary of 8 at temperature 0.5, a
one-hot drafter proposing the favourite token d, p(d) = 0.47) with 60 rounds and a
one-sided z-test on d's frequency, which the bug raises. Each slip is the reference with
one choice changed, the ways a first test goes wrong: too few rounds (no power), a peek at
every prefix (far more false alarms than alpha), a null without the temperature (the
correct rule fails), one seed for every run, the wrong tail.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

import torch

from specdec_lib.analysis.hypothesis import first_tokens, z_score
from specdec_lib.engine.drafters import one_hot_probs
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.verify import accept_sampled, accept_sampled_biased

from .mistakes import register
from .report import Diagnosis as D
from .report import Report
from .sandbox import Abort, call_student, run_check

# --- the answer, and its slips ---------------------------------------------------------

# The distribution test's situation: a vocabulary of 8 at temperature 0.5, a one-hot
# drafter proposing the favourite token d, p(d) = 0.47.
_WEIGHTS = torch.tensor([0.0, 6, 4, 3, 3, 2, 1, 1], dtype=torch.float64)
_LOGITS = torch.where(_WEIGHTS > 0, _WEIGHTS.log(), torch.full_like(_WEIGHTS, -1e4))
_PARAMS = SamplingParams(temperature=0.5)
_DRAFTED = int(process_logits(_LOGITS, _PARAMS).argmax())


def _dist(n=60, p=None, tail=1, looks=(60,), seed=None) -> Callable:
    """A one-sided z-test of the drafted token after ``n`` rounds, the least p over ``looks``."""

    def distribution_test(rule, seed_):
        p_d = float(process_logits(_LOGITS, _PARAMS)[_DRAFTED]) if p is None else p
        q = one_hot_probs([_DRAFTED], 8)[0]
        tokens = first_tokens(rule, _LOGITS, q, _PARAMS, n, seed_ if seed is None else seed)
        z = [tail * z_score(int((tokens[:m] == _DRAFTED).sum()), m, p_d) for m in looks]
        return min(0.5 * math.erfc(v / math.sqrt(2)) for v in z)

    return distribution_test


#: Correct: 60 rounds, a one-sided z-test on the drafted token (the bug raises its frequency).
dist_reference = _dist()

register(
    "check_distribution_test",
    dist_reference,
    ("too few rounds", _dist(n=15, looks=(15,)), D.MISSES_BUG),
    ("peeks at every prefix", _dist(n=200, looks=range(15, 201)), D.FALSE_ALARMS),
    ("untempered target", _dist(p=float(torch.softmax(_LOGITS, -1)[_DRAFTED])), D.WRONG_NULL),
    ("ignores the seed", _dist(seed=0), D.IGNORES_SEED),
    ("wrong tail", _dist(tail=-1), D.WRONG_TAIL),
)


# --- the check -------------------------------------------------------------------------

_SEEDS = 100  # per rule
_MIN_CATCH = 0.8  # the power the test must show against the biased rule
_TAIL_LIMIT = 1e-3  # the check's own false-alarm rate on a test whose level is alpha


def binomial_tail(failures: int, runs: int, alpha: float) -> float:
    """P(at least ``failures`` of ``runs``) when each fails with probability ``alpha``."""
    terms = (math.comb(runs, i) * alpha**i * (1 - alpha) ** (runs - i) for i in range(runs + 1))
    return sum(t for i, t in enumerate(terms) if i >= failures)


def check_distribution_test(
    distribution_test: Callable, alpha: float = 0.05, seed: int = 0, timeout: float | None = 120.0
) -> Report:
    """Check ``distribution_test(rule, seed) -> float``, a p-value for "``rule`` (with
    ``accept_sampled``'s signature) emits the target's distribution", at level ``alpha``:
    the test chooses where, how many rounds and which statistic, and draws from ``seed``."""
    if not 0 < alpha <= 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5], got {alpha!r}")

    def body(name: str) -> Report:
        calls: list[int] = []

        def p_values(rule: Callable, first: int) -> list[float]:
            out = []
            for s in range(first, first + _SEEDS):
                counted = lambda *args: (calls.append(1), rule(*args))[1]  # noqa: E731
                out.append(call_student(distribution_test, name, counted, s, during=f"seed {s}"))
                if isinstance(out[-1], bool) or not isinstance(out[-1], int | float):
                    raise Abort(D.WRONG_TYPE, f"Return a p-value, got {out[-1]!r:.60}.")
                if not 0 <= out[-1] <= 1:
                    raise Abort(D.WRONG_TYPE, f"A p-value lies in [0, 1], got {out[-1]!r}.")
            return out

        correct = p_values(accept_sampled, 2 * _SEEDS * seed)
        biased = p_values(accept_sampled_biased, 2 * _SEEDS * seed + _SEEDS)
        alarms, caught = sum(p < alpha for p in correct), sum(p < alpha for p in biased)
        tail = binomial_tail(alarms, _SEEDS, alpha)
        evidence = {
            "alpha": alpha,
            "false alarms (correct rule failed)": f"{alarms}/{_SEEDS}",
            "caught (biased rule failed)": f"{caught}/{_SEEDS}",
            "P(this many false alarms | level alpha)": tail,
            "rule calls per test": len(calls) // (2 * _SEEDS),
        }
        rates = f"At alpha = {alpha:g} it failed the correct rule at {alarms} of {_SEEDS} seeds"
        rates += f" and caught the biased rule at {caught} of {_SEEDS}."
        if len(set(correct)) == 1 and len(set(biased)) == 1:
            raise Abort(D.IGNORES_SEED, f"Every seed gave p = {correct[0]:.3g}.", **evidence)
        if alarms > _SEEDS / 2:
            raise Abort(D.WRONG_NULL, rates, **evidence)
        if tail < _TAIL_LIMIT:
            raise Abort(D.FALSE_ALARMS, f"{rates} (P = {tail:.1g} at level alpha).", **evidence)
        if caught < _MIN_CATCH * _SEEDS:
            median = statistics.median(biased)
            wrong_tail = median > max(0.9, statistics.median(correct))
            rates += f" Its median p-value on the biased rule is {median:.3f}."
            raise Abort(D.WRONG_TAIL if wrong_tail else D.MISSES_BUG, rates, **evidence)
        passed = f"Correct: {rates} Both rates are what a test at this level, with power above "
        passed += f"{_MIN_CATCH:.0%}, shows."
        return Report("check_distribution_test", name, True, passed, None, evidence)

    return run_check("check_distribution_test", distribution_test, body, seed, timeout)
