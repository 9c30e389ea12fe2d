"""Sampled output distributions of a verification rule, and the tests on them.

A correctness claim about speculative *sampling* is a claim about a distribution.
:mod:`specdec_lib.analysis.exact` proves the formula by enumeration; this module checks
the code: seeded sampling of the real functions
:func:`~specdec_lib.engine.verify.accept_sampled` and
:func:`~specdec_lib.engine.verify.accept_sampled_biased`, compared with the target by a
z-score on one token or a chi-square over the whole vocabulary (sparse bins pooled, one
convention everywhere, the graders included). It can fail, which is the point: the same
test must pass the correct rule and fail the biased one (:func:`error_rates`).

scipy is imported inside the few functions that need it (chi-square tails and
the non-central chi-square power), so the enumeration helpers need only torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specdec_lib.analysis.exact import Rule
from specdec_lib.checks import check_int
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.verify import (
    accept_sampled,
    accept_sampled_biased,
)

#: Significance level of :func:`distribution_test`. At 1e-3 a correct rule fails
#: about once in a thousand runs, so "passes at least 99% of 200 seeds" is a bar
#: it clears with room to spare (expected false alarms: 0.2 in 200).
ALPHA = 1e-3

#: Bins whose expected count is below this are pooled before the chi-square test,
#: where the chi-square approximation to the statistic's distribution is poor.
MIN_EXPECTED = 5.0


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
    """
    check_int("n", n)
    logits = torch.as_tensor(target_logits).detach()
    if logits.dim() != 1:
        raise ValueError(f"target_logits must have shape (V,), got {tuple(logits.shape)}")
    rows = logits.unsqueeze(0).repeat(2, 1)  # (k+1, V) with k = 1
    q = torch.as_tensor(draft_probs).detach().to(torch.float64).reshape(1, -1)  # (1, V)
    drawn = q[0] if drawn_from is None else torch.as_tensor(drawn_from).to(torch.float64)
    generator = torch.Generator().manual_seed(seed)
    proposals = torch.multinomial(drawn, n, replacement=True, generator=generator).tolist()
    return np.array([rule(rows, q, [x], params, generator)[0][0] for x in proposals])


def sample_first_tokens(
    rule: Rule,
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    params: SamplingParams,
    n: int,
    seed: int,
    drawn_from: torch.Tensor | None = None,
) -> torch.Tensor:
    """Counts (V,) of the first emitted token over ``n`` seeded rounds (:func:`first_tokens`)."""
    tokens = first_tokens(rule, target_logits, draft_probs, params, n, seed, drawn_from)
    return torch.from_numpy(
        np.bincount(tokens, minlength=int(torch.as_tensor(target_logits).shape[-1]))
    )


# --- one probability: standard error and z-score --------------------------------------


def standard_error(p: float, n: int) -> float:
    """sqrt(p(1 - p)/n): the spread of a frequency over n independent draws of probability p."""
    if not 0 <= p <= 1:
        raise ValueError(f"p must lie in [0, 1], got {p!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    return math.sqrt(p * (1 - p) / n)


def z_score(count: int, n: int, p: float) -> float:
    """How many standard errors the frequency count/n lies from the probability p."""
    se = standard_error(p, n)
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
    """Pearson's chi-square of observed counts against expected probabilities."""

    statistic: float
    dof: int
    p_value: float
    n: int
    n_bins: int


def pooled_bins(probs: torch.Tensor, n: int, min_expected: float = MIN_EXPECTED) -> np.ndarray:
    """Bin index per token, so that every bin is expected at least ``min_expected`` times.

    Tokens expected that often keep a bin of their own. The rest, taken from the
    most to the least likely, fill shared bins one after another until each holds
    ``min_expected``; a last bin left short joins the one before it. Tokens with
    probability 0 get bin -1: they must never be observed. The bins depend only on
    ``probs`` and ``n``, never on the counts, so pooling cannot bias the test.
    """
    e = np.asarray(torch.as_tensor(probs, dtype=torch.float64)) * n
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


def chi_square(
    counts: torch.Tensor, probs: torch.Tensor, min_expected: float = MIN_EXPECTED
) -> ChiSquareResult:
    """Chi-square test of ``counts`` (V,) against ``probs`` (V,), with sparse bins pooled.

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
    bins = pooled_bins(torch.from_numpy(pr), n, min_expected)
    n_bins = int(bins.max()) + 1
    if c[bins < 0].sum() > 0:
        return ChiSquareResult(math.inf, max(n_bins - 1, 1), 0.0, n, n_bins)
    observed = np.bincount(bins[bins >= 0], weights=c[bins >= 0], minlength=n_bins)
    expected = np.bincount(bins[bins >= 0], weights=pr[bins >= 0] * n, minlength=n_bins)
    statistic = float(((observed - expected) ** 2 / expected).sum())
    dof = n_bins - 1
    if dof < 1:
        raise ValueError("probs put (nearly) all mass on one bin: nothing for a chi-square to test")
    return ChiSquareResult(statistic, dof, float(chi2.sf(statistic, dof)), n, n_bins)


def chi_square_power(
    p_null: torch.Tensor,
    p_alt: torch.Tensor,
    n: int,
    alpha: float = ALPHA,
    min_expected: float = MIN_EXPECTED,
) -> float:
    """Probability that :func:`chi_square` at level ``alpha`` rejects ``p_null`` after ``n``
    draws from ``p_alt``, from the non-central chi-square approximation.

    Non-centrality: n · sum over bins (alt - null)² / null. This is the power curve
    of the test, computed rather than simulated; :func:`error_rates` measures it.
    """
    from scipy.stats import chi2, ncx2

    bins = pooled_bins(p_null, n, min_expected)
    null = np.asarray(torch.as_tensor(p_null, dtype=torch.float64))
    alt = np.asarray(torch.as_tensor(p_alt, dtype=torch.float64))
    if alt[bins < 0].sum() > 0:
        return 1.0
    n_bins = int(bins.max()) + 1
    b0 = np.bincount(bins[bins >= 0], weights=null[bins >= 0], minlength=n_bins)
    b1 = np.bincount(bins[bins >= 0], weights=alt[bins >= 0], minlength=n_bins)
    dof = n_bins - 1
    noncentrality = n * float(((b1 - b0) ** 2 / b0).sum())
    return float(ncx2.sf(chi2.isf(alpha, dof), dof, noncentrality))


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
    ``p_values_correct`` / ``p_values_biased``: one chi-square p-value per seed;
    ``tests_correct`` / ``tests_biased``: the full result per seed, counts included.
    """

    n_seeds: int
    n_samples: int
    alpha: float
    false_alarm_rate: float
    miss_rate: float
    p_values_correct: list[float]
    p_values_biased: list[float]
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
    vocab_size = p.shape[-1]
    for seed in seeds:
        tokens = first_tokens(rule, target_logits, draft_probs, params, sizes[-1], seed)
        for n in sizes:
            counts = torch.from_numpy(np.bincount(tokens[:n], minlength=vocab_size))
            out[n].append(distribution_test(counts, p, alpha))
    return out


def error_rates(
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    params: SamplingParams,
    n_samples: int,
    seeds: Iterable[int],
    correct_rule: Rule = accept_sampled,
    biased_rule: Rule = accept_sampled_biased,
    alpha: float = ALPHA,
) -> ErrorRates:
    """Run the distribution test on both rules for every seed; report how often it errs.

    A test worth trusting has a false-alarm rate near ``alpha`` and a miss rate near
    0 at the chosen ``n_samples``. If the miss rate is high, the test is blind at
    that size, and a pass of the correct rule means nothing.
    """
    seeds = list(seeds)
    good = run_distribution_tests(
        correct_rule, target_logits, draft_probs, params, n_samples, seeds, alpha
    )[n_samples]
    bad = run_distribution_tests(
        biased_rule, target_logits, draft_probs, params, n_samples, seeds, alpha
    )[n_samples]
    return ErrorRates(
        n_seeds=len(seeds),
        n_samples=n_samples,
        alpha=alpha,
        false_alarm_rate=sum(not t.passed for t in good) / len(seeds),
        miss_rate=sum(t.passed for t in bad) / len(seeds),
        p_values_correct=[t.chi_square.p_value for t in good],
        p_values_biased=[t.chi_square.p_value for t in bad],
        tests_correct=good,
        tests_biased=bad,
    )
