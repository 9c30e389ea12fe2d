"""The check of chapter 7's exercise: a distribution test, graded by its error rates.

A test is a measurement with two error rates, so the check measures them: it runs the
student's test on the correct rule (:func:`~specdec_lib.accept_sampled`) and on the
biased one (:func:`~specdec_lib.accept_sampled_biased`) at many seeds, and counts how
often each fails at the level ``alpha`` the student states. The correct rule's
failures must be consistent with ``alpha`` (a binomial tail below 1e-3 is not), and the
biased rule must be caught in at least :data:`MIN_CATCH` of the seeds.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

from specdec_lib.engine.verify import accept_sampled, accept_sampled_biased

from .harness import Abort, call_student, check_signature, run_check
from .report import Diagnosis, Report

SEEDS = 100  # per rule
MIN_CATCH = 0.8  # the power the test must show against the biased rule
TAIL_LIMIT = 1e-3  # the check's own false-alarm rate on a test whose level is alpha


def binomial_tail(failures: int, runs: int, alpha: float) -> float:
    """P(at least ``failures`` of ``runs``) when each fails with probability ``alpha``."""
    return sum(
        math.comb(runs, i) * alpha**i * (1 - alpha) ** (runs - i) for i in range(failures, runs + 1)
    )


def check_distribution_test(
    distribution_test: Callable, alpha: float = 0.05, seed: int = 0, timeout: float | None = 120.0
) -> Report:
    """Check ``distribution_test(rule, seed) -> float``, a test's p-value for "``rule`` emits
    the target's distribution", over ``SEEDS`` seeds per rule at level ``alpha``.

    ``rule`` has ``accept_sampled``'s signature; the test chooses where to run it, how
    many rounds and which statistic, and must draw every random number from ``seed``.
    """
    if not 0 < alpha <= 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5], got {alpha!r}")

    def body(name: str) -> Report:
        check_signature(distribution_test, name, f"{name}(rule, seed)")
        calls = [0]

        def counted(rule: Callable) -> Callable:
            def wrapped(*args: Any) -> Any:
                calls[0] += 1
                return rule(*args)

            return wrapped

        def p_values(rule: Callable, first: int) -> list[float]:
            out = []
            for s in range(first, first + SEEDS):
                value = call_student(distribution_test, name, counted(rule), s, during=f"seed {s}")
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise Abort(Diagnosis.WRONG_TYPE, f"Return the p-value, got {value!r:.60}.")
                if not 0 <= value <= 1:
                    raise Abort(Diagnosis.WRONG_TYPE, f"A p-value lies in [0, 1], got {value!r}.")
                out.append(float(value))
            return out

        correct = p_values(accept_sampled, 2 * SEEDS * seed)
        biased = p_values(accept_sampled_biased, 2 * SEEDS * seed + SEEDS)
        alarms, caught = sum(p < alpha for p in correct), sum(p < alpha for p in biased)
        tail = binomial_tail(alarms, SEEDS, alpha)
        evidence = {
            "alpha": alpha,
            "false alarms (correct rule failed)": f"{alarms}/{SEEDS}",
            "caught (biased rule failed)": f"{caught}/{SEEDS}",
            "P(this many false alarms | level alpha)": tail,
            "rule calls per test": calls[0] // (2 * SEEDS),
        }
        rates = f"At alpha = {alpha:g} it failed the correct rule at {alarms} of {SEEDS} seeds"
        rates += f" and caught the biased rule at {caught} of {SEEDS}."
        if len(set(correct)) == 1 and len(set(biased)) == 1:
            raise Abort(
                Diagnosis.IGNORES_SEED, f"Every seed gave p = {correct[0]:.3g}.", **evidence
            )
        if alarms > SEEDS / 2:
            raise Abort(Diagnosis.WRONG_NULL, rates, **evidence)
        if tail < TAIL_LIMIT:
            raise Abort(
                Diagnosis.FALSE_ALARMS, f"{rates} (P = {tail:.1g} at level alpha).", **evidence
            )
        if caught < MIN_CATCH * SEEDS:
            median = statistics.median(biased)
            wrong_tail = median > max(0.9, statistics.median(correct))
            if wrong_tail:
                rates += f" Its median p-value on the biased rule is {median:.3f}."
            raise Abort(
                Diagnosis.WRONG_TAIL if wrong_tail else Diagnosis.MISSES_BUG, rates, **evidence
            )
        return Report(
            "check_distribution_test",
            name,
            True,
            f"Correct: {rates} Both rates are what a test at this level, with power above "
            f"{MIN_CATCH:.0%}, shows.",
            None,
            evidence,
        )

    return run_check("check_distribution_test", distribution_test, body, seed, timeout)
