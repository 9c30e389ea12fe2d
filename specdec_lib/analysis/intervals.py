"""Bootstrap 95% intervals, resampling what varies: prompts, and blocks of timing repeats.

A figure measured over a few prompts is one draw of many: another sample of prompts
would give another value, and the rounds of one prompt are not independent (a passage
that is easy stays easy). So every interval here resamples whole prompts, and a paired
comparison (two methods run on the same prompts) draws the same prompts for both sides,
so a prompt that is easy for both moves both together. Timings resample blocks of
repeats too (:func:`blocks_of`), since the machine drifts while a run lasts.

* :class:`Estimate`: a value and its interval; :func:`prompt_draws` and
  :func:`percentile_estimate`, the bootstrap itself (the cost models' intervals use them).
* :func:`paired_speedup`: two methods timed side by side
  (:func:`~specdec_lib.analysis.timing.interleaved`); how many times faster one ran
  (:func:`median_speedup`, the statistic it resamples).
* :func:`ratio_estimate`: a ratio of sums over prompts (a share of tokens, a rate).
* :func:`tokens_per_pass_estimate`, :func:`acceptance_estimate`,
  :func:`paired_tokens_per_pass_difference`, :func:`position_acceptance`: counts of
  speculation (:class:`~specdec_lib.engine.generate.SpeculationStats`), per prompt.
* :func:`stream_ratio`: one server configuration's latency against another's, over a few
  independent request streams (a t-interval, not a bootstrap: the streams are few).

Whether a second run agrees is :mod:`specdec_lib.analysis.replication`'s question.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from specdec_lib.engine.generate import SpeculationStats

#: Bootstrap resamples behind every interval.
_RESAMPLES = 2000


@dataclass(frozen=True)
class Estimate:
    """A point estimate ``value`` with a bootstrap interval [``low``, ``high``] at
    ``level`` (95% by default)."""

    value: float
    low: float
    high: float
    level: float = 0.95

    def resolves(self, other: float) -> bool:
        """Whether the interval excludes ``other`` (e.g. 1.0: "does it pay?")."""
        return not self.low <= other <= self.high

    def holds(self, other: float) -> bool:
        """Whether the interval contains ``other`` (e.g. a rerun's point estimate)."""
        return self.low <= other <= self.high


def percentile_estimate(value: float, boot: list[float]) -> Estimate:
    """``value`` with the central 95% of the bootstrap values ``boot`` around it: the one
    percentile rule of every interval here."""
    boot = sorted(boot)
    tail, n = (1 - 0.95) / 2, len(boot)
    return Estimate(value, boot[int(tail * (n - 1))], boot[int(round((1 - tail) * (n - 1)))])


def prompt_draws(n: int, seed: int) -> list[list[int]]:
    """:data:`_RESAMPLES` draws of ``n`` prompt indices with replacement: the resamples of
    every interval over prompts (a statistic of weighted sums can count how often each
    prompt was drawn instead of summing the draw)."""
    rng = random.Random(seed)
    return [[rng.randrange(n) for _ in range(n)] for _ in range(_RESAMPLES)]


def blocks_of(repeats: int, blocks: int) -> list[list[int]]:
    """Repeat indices 0..repeats-1 cut into ``blocks`` contiguous blocks of near-equal size.

    Repeats that ran close together share a block; since every repeat of
    :func:`~specdec_lib.analysis.timing.interleaved` runs the whole job list, blocks lie
    far apart in time.
    """
    if not 1 <= blocks <= repeats:
        raise ValueError(f"blocks must lie in [1, repeats={repeats}], got {blocks}")
    return [list(range(b * repeats // blocks, (b + 1) * repeats // blocks)) for b in range(blocks)]


def _repeats_of(base: Sequence[Sequence[float]], method: Sequence[Sequence[float]]) -> int:
    """The number of repeats of two prompts x repeats tables of seconds, checked alike."""
    n_p, n_r = len(base), len(base[0]) if base else 0
    if n_r == 0 or len(method) != n_p or any(len(t) != n_r for t in [*base, *method]):
        raise ValueError("base and method must be non-empty prompts x repeats tables of one shape")
    return n_r


def median_speedup(
    base: Sequence[Sequence[float]], method: Sequence[Sequence[float]]
) -> Callable[[Sequence[int], Sequence[int]], float]:
    """What a paired speed-up measures, as a function of the prompts and repeats it counts:
    the total over ``prompts`` of each prompt's median over ``reps``, base / method, for
    two prompts x repeats tables of one shape."""
    _repeats_of(base, method)

    def ratio(prompts: Sequence[int], reps: Sequence[int]) -> float:
        b = sum(statistics.median(base[p][r] for r in reps) for p in prompts)
        m = sum(statistics.median(method[p][r] for r in reps) for p in prompts)
        return b / m

    return ratio


def paired_speedup(
    base: Sequence[Sequence[float]],
    method: Sequence[Sequence[float]],
    seed: int = 0,
    blocks: int | None = None,
) -> Estimate:
    """How many times faster ``method`` ran than ``base``, with a paired bootstrap interval.

    ``base[p][r]`` and ``method[p][r]`` are the seconds of prompt p in repeat r, timed in
    the same repeats. The value is the total over prompts of each prompt's median over
    repeats, base / method. Any two methods compare this way:
    ``paired_speedup(times_b, times_a)`` > 1 says A ran faster than B.

    The interval resamples prompts and blocks of repeats (:func:`blocks_of`; ``blocks=None``
    makes every repeat its own block), the same draws for both sides, which were measured
    side by side. So it covers the spread between prompts (a different sample of prompts
    would give a different speed-up), the timing noise, and the machine's drift between
    blocks spread over the run.
    """
    n_p, n_r = len(base), _repeats_of(base, method)
    groups = blocks_of(n_r, n_r if blocks is None else blocks)
    ratio = median_speedup(base, method)
    rng = random.Random(seed)
    boot = []
    for _ in range(_RESAMPLES):
        prompts = [rng.randrange(n_p) for _ in range(n_p)]
        reps = [r for _ in groups for r in groups[rng.randrange(len(groups))]]
        boot.append(ratio(prompts, reps))
    return percentile_estimate(ratio(range(n_p), range(n_r)), boot)


def ratio_estimate(
    numerators: Sequence[float], denominators: Sequence[float], seed: int = 0
) -> Estimate:
    """sum(numerators) / sum(denominators), one pair per prompt, with the interval that
    resamples prompts (resamples whose denominators sum to zero are left out)."""
    if not numerators or len(numerators) != len(denominators):
        raise ValueError("numerators and denominators must be non-empty and of equal length")

    def ratio(idx: Sequence[int]) -> float:
        below = sum(denominators[i] for i in idx)
        return sum(numerators[i] for i in idx) / below if below else math.nan

    boot = [r for r in (ratio(d) for d in prompt_draws(len(numerators), seed)) if r == r]
    return percentile_estimate(ratio(range(len(numerators))), boot)


def tokens_per_pass_estimate(per_prompt: Sequence[SpeculationStats], seed: int = 0) -> Estimate:
    """Emitted tokens per target pass pooled over prompts (a ratio of sums, so a long
    prompt weighs by its passes), with the prompt-bootstrap interval."""
    return ratio_estimate(
        [s.emitted for s in per_prompt], [s.target_passes for s in per_prompt], seed
    )


def acceptance_estimate(per_prompt: Sequence[SpeculationStats], seed: int = 0) -> Estimate:
    """Accepted over proposed draft tokens pooled over prompts, with the prompt-bootstrap
    interval (resamples in which nothing was proposed are left out)."""
    return ratio_estimate([s.accepted for s in per_prompt], [s.proposed for s in per_prompt], seed)


def paired_tokens_per_pass_difference(
    a: Sequence[SpeculationStats], b: Sequence[SpeculationStats], seed: int = 0
) -> Estimate:
    """Pooled tokens per target pass of ``a`` minus that of ``b``, over the same prompts.

    ``a[i]`` and ``b[i]`` are the two drafters' counts on prompt i; the interval is the
    paired one, the same prompts drawn for both sides.
    """
    if not a or len(a) != len(b):
        raise ValueError("a and b must be non-empty and hold one stats object per prompt each")

    def diff(idx: Sequence[int]) -> float:
        ta = sum(a[i].emitted for i in idx) / sum(a[i].target_passes for i in idx)
        tb = sum(b[i].emitted for i in idx) / sum(b[i].target_passes for i in idx)
        return ta - tb

    boot = [diff(draw) for draw in prompt_draws(len(a), seed)]
    return percentile_estimate(diff(range(len(a))), boot)


def position_acceptance(per_prompt: Sequence[SpeculationStats], seed: int = 0) -> list[Estimate]:
    """P(draft position i accepted | proposed), pooled over prompts, with a bootstrap interval.

    A resample in which no prompt proposed at position i has no rate there, and is
    left out of that position's interval.
    """
    if not per_prompt:
        raise ValueError("per_prompt must hold at least one stats object")
    depth = max(len(s.position_proposed) for s in per_prompt)
    draws = prompt_draws(len(per_prompt), seed)
    out = []
    for i in range(depth):
        pairs = [  # (accepted, proposed) at position i, per prompt
            (s.position_accepted[i], s.position_proposed[i])
            if i < len(s.position_proposed)
            else (0, 0)
            for s in per_prompt
        ]

        def rate(idx: Sequence[int], pairs: list[tuple[int, int]] = pairs) -> float:
            proposed = sum(pairs[j][1] for j in idx)
            return sum(pairs[j][0] for j in idx) / proposed if proposed else math.nan

        boot = [r for r in (rate(d) for d in draws) if not math.isnan(r)]
        out.append(percentile_estimate(rate(range(len(per_prompt))), boot))
    return out


def stream_ratio(
    base: Sequence[tuple[float, int]], other: Sequence[tuple[float, int]]
) -> dict[str, float]:
    """How many times faster ``other`` served than ``base``, over independent streams, each
    given as (summed latency, requests), the same streams in both: the geometric mean of
    the streams' ratios of mean latency, with a 95% t-interval (n - 1 degrees of freedom)
    on their logarithms. A stream's requests share one schedule and are not independent,
    so the streams are the units; with as few as four of them a bootstrap over streams
    gives intervals too narrow, and the t-interval's wider ones are the honest price.
    Above 1: ``other`` is faster."""
    from scipy.stats import t

    if len(base) != len(other) or len(base) < 2:
        raise ValueError(
            f"base and other must hold the same 2 or more streams, got {len(base)}, {len(other)}"
        )
    logs = np.log([(b[0] / b[1]) / (o[0] / o[1]) for b, o in zip(base, other, strict=True)])
    mean, n = float(logs.mean()), len(logs)
    half = float(t.ppf(0.975, n - 1) * logs.std(ddof=1) / np.sqrt(n))
    return {
        "ratio": float(np.exp(mean)),
        "low": float(np.exp(mean - half)),
        "high": float(np.exp(mean + half)),
        "streams": n,
    }
