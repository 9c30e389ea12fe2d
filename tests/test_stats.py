import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from specdec_lib import SamplingParams, accept_sampled, accept_sampled_biased, process_logits
from specdec_lib.analysis.enumeration import enumerate_outcomes
from specdec_lib.analysis.exact_distributions import (
    exact_first_token_distribution,
    exact_output_distribution,
    residual_decomposition,
)
from specdec_lib.analysis.hypothesis import (
    NULL_SIMULATIONS,
    chi_square,
    conditional_false_alarm_rate,
    distribution_test,
    error_rates,
    expected_z,
    first_tokens,
    pooled_bins,
    run_distribution_tests,
    standard_error,
    z_score,
)
from specdec_lib.analysis.power import chi_square_power
from specdec_lib.engine.drafters import one_hot_probs
from specdec_lib.engine.verify import residual_distribution, target_distribution

V = 6
SAMPLED = SamplingParams(temperature=1.0)
# A small target with a drafted token of moderate probability: the biased rule's
# excess p(1 - p) is large, so a few hundred samples separate the rules.
LOGITS = torch.tensor([0.0, 0.5, 1.0, 0.2, -0.3, 0.1])
D = 2


def random_logits(seed: int, v: int = 40) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(v, generator=g, dtype=torch.float64) * 2


PROCESSINGS = [
    SamplingParams(temperature=1.0),
    SamplingParams(temperature=0.6),
    SamplingParams(temperature=1.3, top_k=7),
    SamplingParams(temperature=0.8, top_p=0.7),
    SamplingParams(temperature=1.0, top_k=12, top_p=0.9),
]


@pytest.mark.parametrize("params", PROCESSINGS)
@pytest.mark.parametrize("seed", range(5))
def test_exact_output_of_the_residual_rule_is_the_processed_target_to_1e9(params, seed):
    target, draft = random_logits(seed), random_logits(100 + seed)
    p = process_logits(target, params)
    q = process_logits(draft, params)  # draft processed consistently with the target
    out = exact_output_distribution(accept_sampled, target, q, params)
    assert abs(float(out.sum()) - 1) < 1e-9
    assert float((out - p).abs().max()) < 1e-9


def test_exact_output_of_the_biased_rule_is_min_p_q_plus_rejection_times_p():
    target, draft = random_logits(1), random_logits(2)
    p, q = process_logits(target, SAMPLED), process_logits(draft, SAMPLED)
    out = exact_output_distribution(accept_sampled_biased, target, q, SAMPLED)
    rejected = 1 - float(torch.minimum(p, q).sum())
    torch.testing.assert_close(out, torch.minimum(p, q) + rejected * p, rtol=0, atol=1e-12)
    assert abs(float(out.sum()) - 1) < 1e-9
    assert float((out - p).abs().max()) > 1e-3  # and it is visibly not p


def test_a_one_hot_draft_under_the_biased_rule_gets_p_times_two_minus_p():
    q = one_hot_probs([D], V)[0]
    out = exact_output_distribution(accept_sampled_biased, LOGITS, q, SAMPLED)
    p = float(process_logits(LOGITS, SAMPLED)[D])
    assert abs(float(out[D]) - p * (2 - p)) < 1e-12


def test_a_draft_that_misreports_its_distribution_breaks_the_output():
    target, draft = random_logits(3), random_logits(4)
    p = process_logits(target, SAMPLED)
    honest = process_logits(draft, SamplingParams(temperature=0.5))
    reported = process_logits(draft, SAMPLED)  # the temperature-1 probabilities, not the ones used
    same = exact_first_token_distribution(p, honest, drawn_from=honest)
    wrong = exact_first_token_distribution(p, reported, drawn_from=honest)
    assert float((same - p).abs().max()) < 1e-12
    assert float((wrong - p).abs().max()) > 1e-3
    assert abs(float(wrong.sum()) - 1) < 1e-12
    # the library rule with drawn_from is the same enumeration
    via_rule = exact_output_distribution(accept_sampled, target, reported, SAMPLED, honest)
    torch.testing.assert_close(via_rule, wrong, rtol=0, atol=1e-15)


def test_enumeration_refuses_what_it_cannot_enumerate():
    q = one_hot_probs([D], V)[0]

    def global_draw(logits, draft_probs, proposed, params, generator=None):
        return [int(torch.randint(V, ()))], 0  # ignores the generator it was given

    def own_rand(logits, draft_probs, proposed, params, generator=None):
        return [int(torch.rand(()) * V)], 0  # torch.rand, but not with its generator

    def inspects_draw(logits, draft_probs, proposed, params, generator=None):
        y = int(torch.multinomial(process_logits(logits[0], params), 1, generator=generator))
        return [y if y >= 0 else 0], 0  # branches on the drawn token's value

    with pytest.raises(ValueError, match="global random generator"):
        exact_output_distribution(global_draw, LOGITS, q, SAMPLED)
    with pytest.raises(ValueError, match="without the generator"):
        exact_output_distribution(own_rand, LOGITS, q, SAMPLED)
    with pytest.raises(ValueError, match="other than by passing it on"):
        exact_output_distribution(inspects_draw, LOGITS, q, SAMPLED)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        exact_output_distribution(accept_sampled, LOGITS, q, SamplingParams(temperature=0))
    with pytest.raises(ValueError, match="q must be > 0"):
        p = process_logits(LOGITS, SAMPLED)
        exact_first_token_distribution(p, q, drawn_from=p)


def test_enumeration_runs_the_function_not_a_formula_of_it():
    """A rule the formula knows nothing about is enumerated to what it really does."""
    q = process_logits(LOGITS.flip(0), SAMPLED)
    p = process_logits(LOGITS, SAMPLED)
    calls = []

    def squared_ratio(logits, draft_probs, proposed, params, generator=None):
        calls.append(1)
        pt = process_logits(logits, params)
        x = proposed[0]
        u = float(torch.rand((), generator=generator, dtype=torch.float64))
        if u < min(1.0, float(pt[0, x] / draft_probs[0, x])) ** 2:  # a wrong acceptance
            return [x, int(torch.multinomial(pt[1], 1, generator=generator))], 1
        residual = (pt[0] - draft_probs[0]).clamp(min=0)
        return [int(torch.multinomial(residual, 1, generator=generator))], 0

    out = exact_output_distribution(squared_ratio, LOGITS, q, SAMPLED)
    a = torch.clamp(p / q, max=1.0) ** 2
    expected = (
        q * a + float((q * (1 - a)).sum()) * (p - q).clamp(min=0) / (p - q).clamp(min=0).sum()
    )
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    assert float((out - p).abs().max()) > 1e-3 and len(calls) >= 2 * V


def test_enumeration_of_the_shipped_rules_matches_the_formula_with_and_without_a_guess():
    p, q = process_logits(random_logits(3), SAMPLED), process_logits(random_logits(4), SAMPLED)
    for rule, replacement in (
        (accept_sampled, residual_distribution),
        (accept_sampled_biased, target_distribution),
    ):
        out = exact_output_distribution(rule, random_logits(3), q, SAMPLED)
        formula = exact_first_token_distribution(p, q, replacement)
        torch.testing.assert_close(out, formula, rtol=0, atol=1e-12)
    rows = random_logits(3).unsqueeze(0).repeat(2, 1)
    x = int(q.argmax())
    # no guess: the switch is found by bisection, to 2^-53
    branches = enumerate_outcomes(lambda g: accept_sampled(rows, q[None], [x], SAMPLED, g))
    accepted = sum(o.probability for o in branches if o.n_accepted == 1)
    assert abs(accepted - min(1.0, float(p[x] / q[x]))) < 1e-15
    assert abs(sum(o.probability for o in branches) - 1) < 1e-15


def test_the_residual_decomposition_adds_up_to_the_target():
    p, q = process_logits(random_logits(7), SAMPLED), process_logits(random_logits(8), SAMPLED)
    parts = residual_decomposition(p, q)
    torch.testing.assert_close(parts.output, p, rtol=0, atol=1e-12)
    assert abs(parts.rejected_mass - float(parts.shortfall.sum())) < 1e-12
    torch.testing.assert_close(parts.accepted + parts.shortfall, p, rtol=0, atol=1e-12)


def first_token_counts(rule, q, n, seed):
    """Counts (V,) of the first emitted token over ``n`` seeded rounds of ``rule``."""
    return np.bincount(first_tokens(rule, LOGITS, q, SAMPLED, n, seed), minlength=V)


def test_seeded_sampling_is_reproducible_and_counts_every_round():
    q = one_hot_probs([D], V)[0]
    a = first_tokens(accept_sampled, LOGITS, q, SAMPLED, 300, seed=11)
    b = first_tokens(accept_sampled, LOGITS, q, SAMPLED, 300, seed=11)
    c = first_tokens(accept_sampled, LOGITS, q, SAMPLED, 300, seed=12)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.shape == (300,) and a.dtype == np.int64 and 0 <= a.min() and a.max() < V
    counts = first_token_counts(accept_sampled, q, 300, seed=11)
    assert counts.shape == (V,) and int(counts.sum()) == 300


def test_sampling_uses_the_distribution_the_proposal_was_drawn_from():
    q = process_logits(LOGITS.flip(0), SAMPLED)
    counts = first_token_counts(accept_sampled, q, 2000, seed=3)
    assert distribution_test(counts, process_logits(LOGITS, SAMPLED)).passed


def test_standard_error_and_z_score():
    assert standard_error(0.5, 100) == pytest.approx(0.05)
    assert z_score(60, 100, 0.5) == pytest.approx(2.0)
    assert expected_z(0.5, 0.6, 100) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="p must lie"):
        standard_error(1.5, 10)
    with pytest.raises(ValueError, match="n must be >= 1"):
        standard_error(0.5, 0)
    with pytest.raises(ValueError, match="must both be >= 5"):
        z_score(3, 10, 0.0)
    with pytest.raises(ValueError, match="must both be >= 5"):
        z_score(1, 100, 0.02)  # the cell is expected twice: too few for a z-score


def test_chi_square_matches_scipy_when_no_bin_is_pooled():
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    counts = torch.tensor([12, 18, 33, 37])
    ours = chi_square(counts, probs)
    ref = chisquare(counts.numpy(), probs.numpy() * 100)
    assert ours.statistic == pytest.approx(ref.statistic)
    assert ours.asymptotic_p_value == pytest.approx(ref.pvalue)
    assert ours.p_value == pytest.approx(ref.pvalue, abs=0.02)  # Monte-Carlo, 10,000 draws
    assert (ours.dof, ours.n_bins, ours.n) == (3, 4, 100)


def test_the_monte_carlo_p_value_is_calibrated_where_cells_are_sparse():
    """Draws from the target itself, 30 at a time over 12 tokens (cells pooled to about
    5 expected): the test must fail them at its nominal rate, within the binomial 95%
    interval of 4,000 runs."""
    from scipy.stats import binom

    p = process_logits(random_logits(9, 12), SAMPLED)
    rng = np.random.default_rng(5)
    runs = 4000
    p_values = np.array(
        [
            chi_square(torch.from_numpy(rng.multinomial(30, p.numpy())), p).p_value
            for _ in range(runs)
        ]
    )
    for alpha in (0.01, 0.05):
        low, high = binom.ppf(0.025, runs, alpha), binom.ppf(0.975, runs, alpha)
        assert low <= int((p_values <= alpha).sum()) <= high, alpha


def test_the_false_alarm_rate_given_the_reused_reference_is_what_chi_square_delivers():
    """The vectorised rate must match chi_square itself run on fresh samples (the same
    reference set is reused by both), and sit near alpha; bad input is refused."""
    p = process_logits(random_logits(9, 12), SAMPLED)
    rng = np.random.default_rng(6)
    runs, n, alpha = 4000, 30, 0.05
    looped = np.mean(
        [
            chi_square(torch.from_numpy(rng.multinomial(n, p.numpy())), p).p_value < alpha
            for _ in range(runs)
        ]
    )
    vectorised = conditional_false_alarm_rate(p, n, runs, seed=1, alpha=alpha)
    se = math.sqrt(alpha * (1 - alpha) / runs)
    assert abs(vectorised - looped) < 4 * math.sqrt(2) * se
    assert abs(vectorised - alpha) < 0.02
    with pytest.raises(ValueError, match="runs"):
        conditional_false_alarm_rate(p, n, 0, seed=1)
    with pytest.raises(ValueError, match="alpha"):
        conditional_false_alarm_rate(p, n, 10, seed=1, alpha=1.5)


def test_a_power_curve_needs_cells_expected_five_times_and_matches_its_measurement():
    p = process_logits(LOGITS, SAMPLED)
    biased = exact_first_token_distribution(p, one_hot_probs([D], V)[0], target_distribution)
    n, runs = 60, 3000
    rng = np.random.default_rng(8)
    caught = sum(
        not distribution_test(torch.from_numpy(rng.multinomial(n, biased.numpy())), p).passed
        for _ in range(runs)
    )
    predicted = chi_square_power(p, biased, n)
    assert abs(caught / runs - predicted) < 2.6 * math.sqrt(predicted * (1 - predicted) / runs)


def test_chi_square_pools_sparse_bins_and_rejects_impossible_tokens():
    probs = torch.tensor([0.5, 0.47, 0.01, 0.01, 0.01, 0.0], dtype=torch.float64)
    bins = pooled_bins(probs, 100)
    assert bins.tolist() == [0, 1, 1, 1, 1, -1]  # 3 expected in the pool: joins bin 1
    assert pooled_bins(probs, 300).tolist() == [0, 1, 2, 2, 2, -1]  # 9 expected: own bin
    assert pooled_bins(probs, 1000).tolist() == [0, 1, 2, 3, 4, -1]
    uniform = torch.full((40,), 1 / 40, dtype=torch.float64)
    assert np.bincount(pooled_bins(uniform, 100)).tolist() == [2] * 20  # 2.5 expected each: pairs
    impossible = chi_square(torch.tensor([50, 47, 1, 1, 0, 1]), probs)
    assert impossible.statistic == math.inf and impossible.p_value == 0.0


def test_the_distribution_test_passes_the_correct_rule_and_fails_the_biased_one():
    q = one_hot_probs([D], V)[0]
    p = process_logits(LOGITS, SAMPLED)
    good = first_token_counts(accept_sampled, q, 1500, seed=100)
    bad = first_token_counts(accept_sampled_biased, q, 1500, seed=100)
    assert distribution_test(good, p).passed
    result = distribution_test(bad, p)
    assert not result.passed and result.chi_square.asymptotic_p_value < 1e-20
    assert result.chi_square.p_value == 1 / (NULL_SIMULATIONS + 1)  # beyond every null draw


def test_error_rates_over_seeds_are_low_where_the_test_has_power():
    q = one_hot_probs([D], V)[0]
    rates = error_rates(LOGITS, q, SAMPLED, n_samples=300, seeds=range(100, 120))
    assert (rates.n_seeds, rates.n_samples) == (20, 300)
    assert rates.false_alarm_rate == 0.0
    assert rates.miss_rate == 0.0
    assert len(rates.tests_correct) == len(rates.tests_biased) == 20
    assert all(int(t.counts.sum()) == 300 for t in rates.tests_correct + rates.tests_biased)


def test_prefixes_of_one_run_give_a_power_curve_that_grows_with_samples():
    q = one_hot_probs([D], V)[0]
    runs = run_distribution_tests(accept_sampled_biased, LOGITS, q, SAMPLED, [20, 400], range(10))
    assert set(runs) == {20, 400}
    caught = {n: sum(not t.passed for t in tests) for n, tests in runs.items()}
    assert caught[20] < caught[400] == 10


def test_chi_square_power_is_alpha_under_the_null_and_grows_with_n():
    p = process_logits(LOGITS, SAMPLED)
    biased = exact_output_distribution(
        accept_sampled_biased, LOGITS, one_hot_probs([D], V)[0], SAMPLED
    )
    assert chi_square_power(p, p, 1000, alpha=0.01) == pytest.approx(0.01, rel=0.3)
    powers = [chi_square_power(p, biased, n) for n in (20, 100, 400)]
    assert powers == sorted(powers) and powers[-1] > 0.999
