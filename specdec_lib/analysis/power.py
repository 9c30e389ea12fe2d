"""How many samples the distribution test needs: its power, predicted rather than simulated.

A test that passes the correct rule means something only if it would have failed a wrong
one, at the sample size used. :func:`chi_square_power` predicts the probability that
:func:`~specdec_lib.analysis.hypothesis.chi_square` rejects the target's distribution when
the samples really come from another, from the statistic's exact mean and variance and
the shape of its normal approximation (a noncentral chi-square matched to them), against
the test's own Monte-Carlo critical value. :func:`chi_square_power_local` is the textbook
prediction, kept to show how far off it is for a large bias.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from specdec_lib.analysis.hypothesis import (
    ALPHA,
    critical_value,
    pooled_bins,
    pooled_probabilities,
)


def _noncentral_sf(
    x: float, cumulants: tuple[float, float, float, float], variance: float
) -> float:
    """P(Q > x) for a statistic Q with mean c1 and ``variance``, whose shape (skewness and
    kurtosis, from c2..c4) is that of a quadratic form with cumulants c1..c4: the
    noncentral chi-square of that shape (Liu, Tang & Zhang 2009), moved and scaled to
    Q's mean and variance."""
    from scipy.stats import chi2, ncx2

    c1, c2, c3, c4 = cumulants
    s1, s2 = c3 / c2**1.5, c4 / c2**2
    if s1 * s1 > s2:
        a = 1 / (s1 - math.sqrt(s1 * s1 - s2))
        delta = s1 * a**3 - a * a
        dof = a * a - 2 * delta
    else:
        a, delta, dof = 1 / s1, 0.0, 1 / (s1 * s1)
    t = (x - c1) / math.sqrt(variance) * math.sqrt(2) * a + dof + delta
    return float(ncx2.sf(t, dof, delta) if delta > 0 else chi2.sf(t, dof))


def _pearson_variance(e: np.ndarray, pi: np.ndarray, n: int) -> float:
    """Exact variance of Pearson's statistic over cells ``e`` for n multinomial draws from
    ``pi``, from the factorial moments E[O_i^(r) O_j^(s)] = n^(r+s) pi_i^r pi_j^s (falling
    powers): X^2 = sum O_i^2 / (n e_i) - n."""
    w = 1 / (n * e)
    n2, n3, n4 = n * (n - 1), n * (n - 1) * (n - 2), n * (n - 1) * (n - 2) * (n - 3)
    mean_o2 = n2 * pi**2 + n * pi
    mean_o4 = n4 * pi**4 + 6 * n3 * pi**3 + 7 * n2 * pi**2 + n * pi

    def s(power: int, weight: int = 1) -> float:
        return float((w**weight * pi**power).sum())

    cross = (  # sum over i != j of w_i w_j E[O_i^2 O_j^2]
        n4 * (s(2) ** 2 - s(4, 2)) + 2 * n3 * (s(2) * s(1) - s(3, 2)) + n2 * (s(1) ** 2 - s(2, 2))
    )
    return float((w**2 * mean_o4).sum()) + cross - float((w * mean_o2).sum()) ** 2


def _pearson_cumulants(e: np.ndarray, pi: np.ndarray, n: int) -> tuple[float, float, float, float]:
    """c_r = tr(A^r) + r mu' A^(r-1) mu for Pearson's statistic with null cells ``e`` under
    draws from ``pi``, in its normal approximation: Y = (O - n e)/sqrt(n e) has mean mu and
    covariance A = diag(pi/e) - w w', w = pi/sqrt(e). Under the null, c_r = cells - 1."""
    a, w = pi / e, pi / np.sqrt(e)
    ww = float(w @ w)
    aw = [float((a**r * w * w).sum()) for r in range(4)]
    traces = (
        a.sum() - ww,
        (a**2).sum() - 2 * aw[1] + ww**2,
        (a**3).sum() - 3 * aw[2] + 3 * aw[1] * ww - ww**3,
        (a**4).sum() - 4 * aw[3] + 4 * aw[2] * ww + 2 * aw[1] ** 2 - 4 * aw[1] * ww**2 + ww**4,
    )
    mu = math.sqrt(n) * (pi - e) / np.sqrt(e)
    v, quad = mu.copy(), []
    for _ in range(4):
        quad.append(float(mu @ v))
        v = a * v - w * float(w @ v)  # A v
    return tuple(float(traces[r]) + (r + 1) * quad[r] for r in range(4))  # type: ignore[return-value]


def chi_square_power(
    p_null: torch.Tensor, p_alt: torch.Tensor, n: int, alpha: float = ALPHA
) -> float:
    """Probability that :func:`~specdec_lib.analysis.hypothesis.chi_square` at level
    ``alpha`` rejects ``p_null`` after ``n`` draws from ``p_alt``, predicted (not
    simulated) from a noncentral chi-square.

    The cells are the test's pooled cells; the critical value is the test's own
    (:func:`~specdec_lib.analysis.hypothesis.critical_value`). The textbook prediction
    (:func:`chi_square_power_local`) assumes the alternative moves the cell means but not
    their variances; a bug that doubles one cell and shrinks the rest changes both, so here
    the noncentral chi-square is matched to the statistic's exact mean and variance under
    ``p_alt`` and to the skewness and kurtosis of its normal approximation. An alternative
    that puts all its mass in one pooled cell c (a bug that always emits one token) has no
    spread to match: the statistic is then the constant n (1 - e_c) / e_c.
    """
    bins = pooled_bins(p_null, n)
    alt = np.asarray(torch.as_tensor(p_alt, dtype=torch.float64))
    if alt[bins < 0].sum() > 0:
        return 1.0
    e = pooled_probabilities(p_null, bins)  # (cells,) under the null
    pi = pooled_probabilities(torch.from_numpy(alt), bins)  # (cells,) under the alternative
    critical = critical_value(p_null, n, alpha)
    if pi.max() >= 1 - 1e-12:
        e_c = float(e[int(pi.argmax())] / e.sum())
        return float(n * (1 - e_c) / e_c > critical)
    return _noncentral_sf(critical, _pearson_cumulants(e, pi, n), _pearson_variance(e, pi, n))


def noncentrality(p_null: torch.Tensor, p_alt: torch.Tensor, n: int) -> float:
    """n · sum over the pooled cells of (alt - null)^2 / null."""
    bins = pooled_bins(p_null, n)
    b0 = pooled_probabilities(p_null, bins)
    b1 = pooled_probabilities(p_alt, bins)
    return n * float(((b1 - b0) ** 2 / b0).sum())


def chi_square_power_local(p_null: torch.Tensor, p_alt: torch.Tensor, n: int) -> float:
    """The textbook power at :data:`~specdec_lib.analysis.hypothesis.ALPHA`: noncentral
    chi-square on cells - 1 degrees of freedom with :func:`noncentrality`, against the
    textbook critical value. Right for a small (local) alternative; kept to show how far
    off it is for a large one."""
    from scipy.stats import chi2, ncx2

    dof = int(pooled_bins(p_null, n).max())
    lam = noncentrality(p_null, p_alt, n)
    return float(ncx2.sf(chi2.isf(ALPHA, dof), dof, lam))
