"""The textbook model of speculative decoding, to set beside what was measured.

Leviathan et al. (2023) model each drafted token as accepted independently with
the same probability α. A round that drafts k tokens then emits

    E(α, k) = 1 + α + α² + ... + α^k = (1 − α^(k+1)) / (1 − α)

tokens per target pass on average (k+1 when α = 1). If a draft pass costs c
target passes and a verification pass over k+1 positions costs ``verify_cost``
target passes (1 in the paper; a little more on a real machine), the wall-time
speed-up over plain decoding is

    S(α, k, c) = E(α, k) / (k·c + verify_cost).

Real drafters break the model in two ways this module makes measurable. The
acceptance of position i is not independent of position i−1 (a prompt-lookup
drafter that is copying keeps copying; one that is lost stays lost), and a
drafter does not always propose k tokens (the n-gram drafter proposes nothing
without a match). :func:`estimate_alpha` fits α from a run's round log,
:func:`conditional_acceptance` shows acceptance per draft position given that
every earlier position was accepted (flat if independence holds), and
:func:`expected_tokens_per_pass_given_lengths` applies the model to the proposal
lengths that actually occurred, so the two failures can be told apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from specdec_lib.engine.generate import SpeculationStats


def _check_alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 <= alpha <= 1:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    return float(alpha)


def _check_k(k: int, name: str = "k", minimum: int = 0) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {k!r}")
    return k


def expected_tokens_per_pass(alpha: float, k: int) -> float:
    """E(α, k) = (1 − α^(k+1)) / (1 − α): tokens per target pass when each of k drafts
    is accepted independently with probability α. Between 1 (α = 0) and k+1 (α = 1)."""
    alpha, k = _check_alpha(alpha), _check_k(k)
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def expected_speedup(
    alpha: float, k: int, c: float, verify_cost: float = 1.0, lookup: float = 0.0
) -> float:
    """Wall-time speed-up over plain decoding: E(α, k) / (k·c + lookup + verify_cost).

    Each cost is charged as it is incurred, in single-position target passes: ``c`` per
    draft-model pass (k of them a round), ``lookup`` once per round (an n-gram drafter's
    search; its ``c`` is 0), ``verify_cost`` for the (k+1)-position verification pass.
    """
    for name, value in (("c", c), ("lookup", lookup)):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if not math.isfinite(verify_cost) or verify_cost <= 0:
        raise ValueError(f"verify_cost must be a finite number > 0, got {verify_cost!r}")
    return expected_tokens_per_pass(alpha, k) / (k * c + lookup + verify_cost)


def best_k(
    alpha: float,
    c: float,
    k_max: int = 16,
    verify_cost: float | Callable[[int], float] = 1.0,
) -> int:
    """The k in 1..k_max with the largest predicted speed-up (the smallest k on ties).

    ``verify_cost`` is a number, or a function of k when the verification pass
    gets dearer with its length.
    """
    _check_k(k_max, "k_max", minimum=1)
    cost = verify_cost if callable(verify_cost) else (lambda k: float(verify_cost))
    speedups = [expected_speedup(alpha, k, c, cost(k)) for k in range(1, k_max + 1)]
    return 1 + max(range(k_max), key=lambda i: (speedups[i], -i))


def estimate_alpha(stats: SpeculationStats) -> float:
    """Maximum-likelihood α under the independence model, from a run's round log.

    A round that proposed m tokens and accepted n tested n+1 of them (n successes
    then one failure) if n < m, and m of them (all successes) if n = m; positions
    after the first rejection were never tested and must not count as failures.
    So α̂ = Σ n / Σ min(n+1, m). (``stats.acceptance_rate``, accepted / proposed,
    counts the untested positions as rejections and understates α.)
    """
    tested = sum(min(r.n_accepted + 1, len(r.proposed)) for r in stats.log)
    if tested == 0:
        return float("nan")
    return sum(r.n_accepted for r in stats.log) / tested


def conditional_acceptance(stats: SpeculationStats) -> list[float]:
    """P(position i accepted | positions 0..i−1 accepted and position i proposed).

    Under independence every entry equals α. Rising entries mean acceptance is
    positively correlated along a proposal (the drafter is either on track or
    not); nan where position i was never reached.
    """
    longest = max((len(r.proposed) for r in stats.log), default=0)
    reached = [0] * longest
    passed = [0] * longest
    for r in stats.log:
        for i in range(min(r.n_accepted + 1, len(r.proposed))):
            reached[i] += 1
            passed[i] += int(i < r.n_accepted)
    return [p / n if n else float("nan") for p, n in zip(passed, reached, strict=True)]


def expected_tokens_per_pass_given_lengths(alpha: float, lengths: Sequence[int]) -> float:
    """Mean of E(α, m) over the proposal lengths m that actually occurred, one per round.

    This keeps the independence model but drops its other assumption, that every
    round drafts the full k tokens.
    """
    if not lengths:
        raise ValueError("lengths must hold at least one proposal length")
    return sum(expected_tokens_per_pass(alpha, _check_k(m, "lengths")) for m in lengths) / len(
        lengths
    )
