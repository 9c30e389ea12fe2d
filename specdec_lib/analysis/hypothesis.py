"""Sampled output distributions of a verification rule, and the tests on them.

A correctness claim about speculative *sampling* is a claim about a distribution.
:mod:`specdec_lib.analysis.exact_distributions` computes it exactly, by enumerating the
real function's random draws; this module checks the function the way a user meets it,
by seeded sampling, compared with the target by a z-score on one token or a chi-square
over the whole vocabulary. It can fail, which is the point: the same test must pass the correct
rule and fail the biased one (:func:`error_rates`), at the rates it claims.

One convention everywhere, the graders included: cells expected fewer than
:data:`MIN_EXPECTED` times are pooled, and no z-score or chi-square term is ever
computed on a cell expected less often than that. The chi-square's p-value is
Monte-Carlo: the statistic is compared with :data:`NULL_SIMULATIONS` statistics of
samples drawn from the target itself (multinomial over the pooled cells), because
the textbook chi-square tail, with cells expected only 5 to 10 times, is too small
at alpha = 1e-3 (measured: 1.1 to 1.3 times alpha). Its power is predicted from a
noncentral chi-square matched to the statistic's exact mean and variance and to the
shape of its normal approximation under the alternative (:mod:`specdec_lib.analysis.power`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specdec_lib.analysis.exact_distributions import Rule
from specdec_lib.checks import check_int
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.verify import accept_sampled, accept_sampled_biased

#: Significance level of :func:`distribution_test`. At 1e-3 a correct rule fails
#: about once in a thousand runs, so "passes at least 99% of 200 seeds" is a bar
#: it clears with room to spare (expected false alarms: 0.2 in 200).
ALPHA = 1e-3

#: Cells whose expected count is below this are pooled before the chi-square test, and
#: :func:`z_score` refuses a cell expected fewer times (or whose complement is).
MIN_EXPECTED = 5.0

#: Null statistics behind each Monte-Carlo p-value, (1 + #{null >= observed}) / (B + 1).
#: One reference set serves every test of a size, so its noise sets the level: alpha to
#: within about 10% at B = 100,000 (:func:`conditional_false_alarm_rate`). Tests with many
#: cells use fewer, never under :data:`MIN_NULL_SIMULATIONS`, at most :data:`_NULL_BUDGET`
#: cell draws per set.
NULL_SIMULATIONS = 100_000
MIN_NULL_SIMULATIONS = 10_000
_NULL_BUDGET = 30_000_000


def null_simulations(n_cells: int) -> int:
    """B for a test over ``n_cells`` pooled cells."""
    return max(MIN_NULL_SIMULATIONS, min(NULL_SIMULATIONS, _NULL_BUDGET // max(n_cells, 1)))


#: Seed of the null samples (with the sample size and the number of cells).
_NULL_SEED = 20_231


#: The rule the test must pass and the one it must fail.
_RULES = (accept_sampled, accept_sampled_biased)

# --- seeded sampling -------------------------------------------------------------------


def first_tokens(
    rule: Rule,
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    params: SamplingParams,
    n: int,
    seed: int,
    drawn_from: torch.Tensor | None = None,
) -> np.ndarray:
    """The first emitted token of ``n`` seeded rounds of ``rule``, in order (int64 array).

    Each round draws the proposal x from ``drawn_from`` (default ``draft_probs``),
    then calls ``rule(logits, draft_probs[None], [x], params, generator)`` exactly as
    :func:`~specdec_lib.engine.generate.speculative_generate` does for a one-token draft,
    and records ``emitted[0]``. The target's logits are the same every round (one
    fixed context), so the tokens are draws from one distribution. ``logits``
    repeats ``target_logits`` for the bonus row, which the first token never reads.
    Rounds draw from one generator in turn, so the first m tokens of a longer run
    are exactly the run of m: a power curve can be read off prefixes.
    """
    check_int("n", n)
    logits = torch.as_tensor(target_logits).detach()
    if logits.dim() != 1:
        raise ValueError(f"target_logits must have shape (V,), got {tuple(logits.shape)}")
    rows = logits.unsqueeze(0).repeat(2, 1)  # (k+1, V) with k = 1
    q = torch.as_tensor(draft_probs).detach().to(torch.float64).reshape(1, -1)  # (1, V)
    drawn = q[0] if drawn_from is None else torch.as_tensor(drawn_from).to(torch.float64)
    generator = torch.Generator().manual_seed(seed)
    cdf = drawn.cumsum(0)  # the proposal by inversion: one uniform, no O(V) draw per round
    last = int(torch.nonzero(drawn > 0).max())
    tokens = np.empty(n, dtype=np.int64)
    for i in range(n):
        u = float(torch.rand((), generator=generator, dtype=torch.float64)) * float(cdf[-1])
        x = min(int(torch.searchsorted(cdf, u, right=True)), last)
        tokens[i] = rule(rows, q, [x], params, generator)[0][0]
    return tokens


# --- one probability: standard error and z-score --------------------------------------


def standard_error(p: float, n: int) -> float:
    """sqrt(p(1 - p)/n): the spread of a frequency over n independent draws of probability p."""
    if not 0 <= p <= 1:
        raise ValueError(f"p must lie in [0, 1], got {p!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    return math.sqrt(p * (1 - p) / n)


def z_score(count: int, n: int, p: float) -> float:
    """How many standard errors the frequency count/n lies from the probability p.

    Refused (``ValueError``) unless the cell and its complement are each expected at
    least :data:`MIN_EXPECTED` times: below that the frequency is too far from normal for
    a z-score to mean what its size suggests."""
    se = standard_error(p, n)
    if min(n * p, n * (1 - p)) < MIN_EXPECTED:
        raise ValueError(
            f"n * p and n * (1 - p) must both be >= {MIN_EXPECTED} for a z-score, "
            f"got n = {n}, p = {p!r}"
        )
    if se == 0:
        raise ValueError(f"p must lie strictly inside (0, 1) for a z-score, got {p!r}")
    return (count / n - p) / se


def expected_z(p_null: float, p_alt: float, n: int) -> float:
    """The z-score a rule that really emits with probability ``p_alt`` produces on average
    against ``p_null`` after ``n`` draws: it grows like sqrt(n)."""
    return (p_alt - p_null) / standard_error(p_null, n)


# --- the whole distribution: chi-square ----------------------------------------------


@dataclass(frozen=True)
class ChiSquareResult:
    """Pearson's chi-square of observed counts against expected probabilities.

    ``p_value`` is the Monte-Carlo one the test uses; ``asymptotic_p_value`` the
    textbook chi-square tail on ``dof`` degrees of freedom, kept for comparison."""

    statistic: float
    dof: int
    p_value: float
    n: int
    n_bins: int
    asymptotic_p_value: float


def pooled_bins(probs: torch.Tensor, n: int, min_expected: float = MIN_EXPECTED) -> np.ndarray:
    """Bin index per token, so that every bin is expected at least ``min_expected`` times.

    Tokens expected that often keep a bin of their own. The rest, taken from the
    most to the least likely, fill shared bins one after another until each holds
    ``min_expected``; a last bin left short joins the one before it. Tokens with
    probability 0 get bin -1: they must never be observed. The bins depend only on
    ``probs`` and ``n``, never on the counts, so pooling cannot bias the test.
    """
    pr = np.ascontiguousarray(torch.as_tensor(probs, dtype=torch.float64).numpy())
    return _pooled_bins_cached(pr.tobytes(), n, min_expected).copy()


@functools.lru_cache(maxsize=256)
def _pooled_bins_cached(probs: bytes, n: int, min_expected: float) -> np.ndarray:
    e = np.frombuffer(probs, dtype=np.float64) * n
    bins = np.full(e.shape, -1, dtype=np.int64)
    order = np.argsort(-e, kind="stable")
    order = order[e[order] > 0]
    next_bin, filling = 0, 0.0
    for token in order:
        if e[token] >= min_expected:
            bins[token] = next_bin
            next_bin += 1
            continue
        bins[token] = next_bin
        filling += e[token]
        if filling >= min_expected:
            next_bin, filling = next_bin + 1, 0.0
    if 0 < filling and next_bin > 0:  # a short last bin joins the previous one
        bins[bins == next_bin] = next_bin - 1
    return bins


def pooled_probabilities(probs: torch.Tensor, bins: np.ndarray) -> np.ndarray:
    """Probability (n_bins,) of each pooled bin (tokens of bin -1 left out)."""
    pr = np.asarray(torch.as_tensor(probs, dtype=torch.float64))
    keep = bins >= 0
    return np.bincount(bins[keep], weights=pr[keep], minlength=int(bins.max()) + 1)


def _statistic(observed: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Pearson's sum over the last axis of (observed - expected)^2 / expected."""
    return ((observed - expected) ** 2 / expected).sum(-1)


def _null_statistics(cell_probs: np.ndarray, n: int) -> np.ndarray:
    """Sorted chi-square statistics of :func:`null_simulations` samples of size ``n`` drawn
    from the null itself (multinomial over the pooled cells): the reference distribution of the
    Monte-Carlo p-value. Seeded by (n, number of cells), so every test is reproducible;
    cached, so a sweep over seeds draws them once per sample size."""
    b = np.asarray(cell_probs, dtype=np.float64)
    return _null_statistics_cached(b.tobytes(), n, null_simulations(len(b))).copy()


@functools.lru_cache(maxsize=64)
def _null_statistics_cached(cells: bytes, n: int, simulations: int) -> np.ndarray:
    b = np.frombuffer(cells, dtype=np.float64)
    b = b / b.sum()
    return np.sort(
        _sampled_statistics(np.random.default_rng([_NULL_SEED, n, len(b)]), b, n, simulations)
    )


def _sampled_statistics(
    rng: np.random.Generator, cells: np.ndarray, n: int, count: int
) -> np.ndarray:
    """Statistics (count,) of ``count`` samples of size ``n`` drawn over ``cells``."""
    chunk = max(1, 4_000_000 // len(cells))  # at most ~32 MB of counts at a time
    sizes = [min(chunk, count - i) for i in range(0, count, chunk)]
    return np.concatenate([_statistic(rng.multinomial(n, cells, size=k), n * cells) for k in sizes])


#: Relative tolerance under which two statistics count as equal: the statistic takes few
#: distinct values when cells are small, and rounding must not break a tie in its favour.
_TIE_TOLERANCE = 1e-9


def _monte_carlo_p_value(statistic: np.ndarray, null: np.ndarray) -> np.ndarray:
    """(1 + #{null >= statistic}) / (B + 1) for sorted null statistics, elementwise: with a
    fresh reference set, <= alpha with probability at most alpha, for any number of
    cells. Ties (within :data:`_TIE_TOLERANCE`) count as at least as large."""
    threshold = statistic - _TIE_TOLERANCE * np.abs(statistic)
    at_least = len(null) - np.searchsorted(null, threshold, side="left")
    return (1 + at_least) / (len(null) + 1)


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> ChiSquareResult:
    """Chi-square test of ``counts`` (V,) against ``probs`` (V,), sparse cells pooled,
    Monte-Carlo p-value (:func:`_null_statistics`).

    A token observed where ``probs`` is 0 makes the statistic infinite (p-value 0):
    an impossible token was emitted. Degrees of freedom: number of bins - 1.
    """
    from scipy.stats import chi2

    c = np.asarray(torch.as_tensor(counts), dtype=np.float64)
    pr = np.asarray(torch.as_tensor(probs, dtype=torch.float64))
    if c.shape != pr.shape or c.ndim != 1:
        raise ValueError(f"counts and probs must both have shape (V,), got {c.shape}, {pr.shape}")
    n = int(c.sum())
    if n < 1:
        raise ValueError("counts must contain at least one observation")
    bins = pooled_bins(torch.from_numpy(pr), n)
    n_bins = int(bins.max()) + 1
    if c[bins < 0].sum() > 0:
        return ChiSquareResult(math.inf, max(n_bins - 1, 1), 0.0, n, n_bins, 0.0)
    dof = n_bins - 1
    if dof < 1:
        raise ValueError("probs put (nearly) all mass on one bin: nothing for a chi-square to test")
    observed = np.bincount(bins[bins >= 0], weights=c[bins >= 0], minlength=n_bins)
    cells = pooled_probabilities(torch.from_numpy(pr), bins)
    cells = cells / cells.sum()  # exactly as the null samples are drawn and scored
    statistic = float(_statistic(observed, n * cells))
    p_value = float(_monte_carlo_p_value(np.asarray(statistic), _null_statistics(cells, n)))
    return ChiSquareResult(statistic, dof, p_value, n, n_bins, float(chi2.sf(statistic, dof)))


def conditional_false_alarm_rate(
    p_null: torch.Tensor, n: int, runs: int, seed: int, alpha: float = ALPHA
) -> float:
    """Share of ``runs`` fresh samples of size ``n`` from ``p_null`` (V,) that
    :func:`chi_square` fails at ``alpha``. It reuses one seeded reference set per (n,
    cells), so every test of a size shares one threshold and this rate is the null's mass
    beyond that set's (1 - alpha) quantile: alpha give or take sqrt(alpha (1 - alpha) / B)."""
    check_int("n", n)
    check_int("runs", runs)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    cells = pooled_probabilities(p_null, pooled_bins(p_null, n))
    cells = cells / cells.sum()  # exactly as chi_square scores them
    fresh = _sampled_statistics(np.random.default_rng([seed, n, len(cells)]), cells, n, runs)
    return float((_monte_carlo_p_value(fresh, _null_statistics(cells, n)) < alpha).mean())


def critical_value(p_null: torch.Tensor, n: int, alpha: float = ALPHA) -> float:
    """The statistic :func:`chi_square` must exceed for a p-value <= ``alpha`` after ``n``
    draws: the null statistic with floor(alpha (B + 1)) - 1 others above it."""
    cells = pooled_probabilities(p_null, pooled_bins(p_null, n))
    null = _null_statistics(cells / cells.sum(), n)
    above = math.floor(alpha * (len(null) + 1) + 1e-9) - 1
    if above < 0:
        raise ValueError(f"alpha must be >= 1/(B + 1) = {1 / (len(null) + 1):.1e}, got {alpha!r}")
    return float(null[len(null) - 1 - above])


# --- the distribution test, and testing it ---------------------------------------------


@dataclass(frozen=True)
class DistributionTest:
    """One run of the distribution test: did the sample look like the target?"""

    passed: bool
    alpha: float
    chi_square: ChiSquareResult
    counts: torch.Tensor  # (V,) the tested counts, for z-scores of single tokens


def distribution_test(
    counts: torch.Tensor, target_probs: torch.Tensor, alpha: float = ALPHA
) -> DistributionTest:
    """Pass iff the chi-square p-value of ``counts`` against ``target_probs`` is >= ``alpha``."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    result = chi_square(counts, target_probs)
    return DistributionTest(result.p_value >= alpha, alpha, result, torch.as_tensor(counts))


@dataclass(frozen=True)
class ErrorRates:
    """How often the distribution test is wrong, over many seeds.

    ``false_alarm_rate``: fraction of seeds where the correct rule *failed*.
    ``miss_rate``: fraction of seeds where the biased rule *passed*.
    ``tests_correct`` / ``tests_biased``: the result per seed, p-value and counts included.
    """

    n_seeds: int
    n_samples: int
    alpha: float
    false_alarm_rate: float
    miss_rate: float
    tests_correct: list[DistributionTest]
    tests_biased: list[DistributionTest]


def run_distribution_tests(
    rule: Rule,
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    params: SamplingParams,
    n_samples: int | Sequence[int],
    seeds: Iterable[int],
    alpha: float = ALPHA,
) -> dict[int, list[DistributionTest]]:
    """The distribution test on ``rule``'s first token, once per seed, at each sample size.

    ``n_samples`` may be a list: each seed draws the largest size once and tests
    its prefixes, so a whole power curve costs no more than its last point. Returns
    ``{n: [test per seed]}``. The target is ``process_logits(target_logits, params)``.
    """
    sizes = sorted({n_samples} if isinstance(n_samples, int) else set(n_samples))
    p = process_logits(torch.as_tensor(target_logits), params)
    out: dict[int, list[DistributionTest]] = {n: [] for n in sizes}
    for seed in seeds:
        tokens = first_tokens(rule, target_logits, draft_probs, params, sizes[-1], seed)
        for n in sizes:
            counts = torch.from_numpy(np.bincount(tokens[:n], minlength=p.shape[-1]))
            out[n].append(distribution_test(counts, p, alpha))
    return out


def error_rates(
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    params: SamplingParams,
    n_samples: int,
    seeds: Iterable[int],
) -> ErrorRates:
    """Run the distribution test on the correct rule and on the biased one
    (:func:`~specdec_lib.engine.verify.accept_sampled_biased`) for every seed; report how
    often it errs.

    A test worth trusting has a false-alarm rate near :data:`ALPHA` and a miss rate near
    0 at the chosen ``n_samples``. If the miss rate is high, the test is blind at
    that size, and a pass of the correct rule means nothing.
    """
    seeds = list(seeds)
    args = (target_logits, draft_probs, params, n_samples, seeds)
    good, bad = (run_distribution_tests(rule, *args)[n_samples] for rule in _RULES)
    return ErrorRates(
        n_seeds=len(seeds),
        n_samples=n_samples,
        alpha=ALPHA,
        false_alarm_rate=sum(not t.passed for t in good) / len(seeds),
        miss_rate=sum(t.passed for t in bad) / len(seeds),
        tests_correct=good,
        tests_biased=bad,
    )
