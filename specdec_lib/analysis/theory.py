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
:func:`kept_prefix_rates` and :func:`expected_tokens_per_pass_from_rates` replace the one
α by a rate per draft position, read off a run's counts: the model without independence.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specdec_lib.checks import check_int
from specdec_lib.engine.generate import SpeculationStats


def _check_alpha(alpha: float) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 <= alpha <= 1:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    return float(alpha)


def _check_k(k: int, name: str = "k", minimum: int = 0) -> int:
    return check_int(name, k, minimum)


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
    lookup: float = 0.0,
    k_min: int = 1,
) -> int:
    """The k in k_min..k_max with the largest predicted speed-up (the smallest k on ties).

    ``verify_cost`` is a number, or a function of k when the verification pass
    gets dearer with its length; ``lookup`` is charged once per round.
    """
    _check_k(k_min, "k_min", minimum=1)
    check_int("k_max", k_max, k_min)
    cost = verify_cost if callable(verify_cost) else (lambda k: float(verify_cost))
    ks = range(k_min, k_max + 1)
    return max(ks, key=lambda k: (expected_speedup(alpha, k, c, cost(k), lookup), -k))


@dataclass(frozen=True)
class CostAwareK:
    """Adaptive draft length chosen by the cost model: each round, the k in
    ``[min_k, max_k]`` that maximises predicted tokens per round over the round's cost,
    E(k) / (k·c + lookup + v_k), from the acceptance this request has shown so far.

    The +2 / -1 schedule (:class:`~specdec_lib.engine.generate.AdaptiveK`) knows nothing
    of costs: it walks towards long drafts a step at a time, which a short request never
    finishes, and it treats a cheap n-gram lookup and a dear draft model alike. This
    policy asks the cost model instead. It does not assume one α: acceptance is
    correlated along a draft (a drafter that is copying keeps copying), so E(k) is built
    from the acceptance at each draft position given the earlier ones accepted (as
    :func:`conditional_acceptance` measures it), E(k) = 1 + Σ_{i<=k} Π_{j<=i} a_j. Each a_j
    is shrunk by one pseudo-observation towards a_{j-1} (a_1 towards the pooled α̂ of
    :func:`estimate_alpha`), so a position not yet reached borrows the acceptance of the
    last one reached: a drafter accepted in full at k = 4 is tried at longer k, though
    never beyond twice the last k. Older rounds weigh ``decay`` times less per round (a
    request that moves from copied to new text is followed); ``prior`` is the
    (accepted, tested) pseudo-count α̂ starts from. ``verify_cost(k)`` is the cost of a
    (k+1)-position pass in single-position passes, measured, e.g.
    ``fit_pass_cost(...).ratio(k + 1)``.
    """

    c: float
    verify_cost: Callable[[int], float]
    lookup: float = 0.0
    min_k: int = 1
    max_k: int = 16
    decay: float = 0.9
    prior: tuple[float, float] = (1.0, 2.0)

    def __post_init__(self) -> None:
        best_k(0.5, self.c, self.max_k, self.verify_cost, self.lookup, self.min_k)  # validates
        if not 0 < self.decay <= 1:
            raise ValueError(f"decay must lie in (0, 1], got {self.decay!r}")
        accepted, tested = self.prior
        if not 0 <= accepted <= tested or tested <= 0:
            raise ValueError(
                f"prior must be (accepted, tested) with 0 <= accepted <= tested and tested > 0, "
                f"got {self.prior!r}"
            )

    def position_acceptance(self, rounds: Sequence[tuple[int, int]]) -> list[float]:
        """a_1..a_max_k: acceptance at each draft position given the earlier ones accepted,
        from ``(proposed, accepted)`` rounds, the newest weighing most."""
        reached = [0.0] * self.max_k
        passed = [0.0] * self.max_k
        accepted, tested = self.prior
        weight = 1.0
        for m, n in reversed(rounds):
            if m == 0:
                continue  # no proposal: no evidence about acceptance
            for i in range(min(n + 1, m, self.max_k)):
                reached[i] += weight
                passed[i] += weight * (i < n)
            accepted += weight * n
            tested += weight * min(n + 1, m)
            weight *= self.decay
        rates, previous = [], accepted / tested
        for p, r in zip(passed, reached, strict=True):
            previous = (p + previous) / (r + 1.0)
            rates.append(previous)
        return rates

    def next_k(self, k: int, rounds: Sequence[tuple[int, int]]) -> int:
        """The k the cost model predicts fastest for the acceptance seen so far."""
        expected, survive, best, best_speed = 1.0, 1.0, self.min_k, -1.0
        for j, a in enumerate(self.position_acceptance(rounds), start=1):
            survive *= a
            expected += survive
            if j >= self.min_k:
                speed = expected / (j * self.c + self.lookup + self.verify_cost(j))
                if speed > best_speed:
                    best, best_speed = j, speed
        return min(best, max(self.min_k, 2 * k))  # extrapolate at most to twice the last k


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


def kept_prefix_rates(
    position_proposed: Sequence[int], position_accepted: Sequence[int]
) -> list[float]:
    """r_i = P(drafts 0..i all kept | the draft reached position i), from a run's counts
    (:class:`~specdec_lib.engine.generate.SpeculationStats`' ``position_proposed`` and
    ``position_accepted``; a position is accepted only if every earlier one was).

    Under the independence model r_i = α^(i+1). A drafter whose surviving drafts keep
    surviving (one that is copying a span) has r_i above that; one that loses its way
    after a first lucky token has r_i below it. nan where nothing was drafted.
    """
    if len(position_proposed) != len(position_accepted):
        raise ValueError("position_proposed and position_accepted must have the same length")
    if any(not 0 <= a <= p for a, p in zip(position_accepted, position_proposed, strict=True)):
        raise ValueError("position_accepted must lie between 0 and position_proposed")
    pairs = zip(position_proposed, position_accepted, strict=True)
    return [a / p if p else float("nan") for p, a in pairs]


def expected_tokens_per_pass_from_rates(rates: Sequence[float], k: int) -> float:
    """1 + r_0 + r_1 + ... + r_(k−1): tokens per target pass when every round drafts k
    tokens and the first i+1 are all kept with probability r_i (:func:`kept_prefix_rates`).
    With r_i = α^(i+1) this is :func:`expected_tokens_per_pass`."""
    k = _check_k(k)
    if len(rates) < k:
        raise ValueError(f"rates must hold at least k={k} entries, got {len(rates)}")
    if any(not 0 <= r <= 1 for r in rates[:k]):
        raise ValueError("rates must lie in [0, 1]")
    return 1.0 + float(sum(rates[:k]))
