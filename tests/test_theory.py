import math
import random

import pytest

from specdec_lib import RoundRecord, SpeculationStats
from specdec_lib.analysis.theory import (
    best_k,
    conditional_acceptance,
    estimate_alpha,
    expected_speedup,
    expected_tokens_per_pass,
    expected_tokens_per_pass_given_lengths,
)


def test_expected_tokens_per_pass_runs_from_one_to_k_plus_one():
    assert expected_tokens_per_pass(0.0, 5) == 1.0
    assert expected_tokens_per_pass(1.0, 5) == 6.0
    assert expected_tokens_per_pass(0.5, 2) == pytest.approx(1 + 0.5 + 0.25)
    assert expected_tokens_per_pass(0.8, 0) == 1.0
    for k in range(1, 10):
        assert expected_tokens_per_pass(0.7, k) == pytest.approx(sum(0.7**i for i in range(k + 1)))


def test_expected_tokens_per_pass_matches_a_simulation_of_independent_acceptance():
    rng = random.Random(0)
    alpha, k, rounds = 0.6, 4, 40_000
    total = 0
    for _ in range(rounds):
        n = 0
        while n < k and rng.random() < alpha:
            n += 1
        total += n + 1
    assert total / rounds == pytest.approx(expected_tokens_per_pass(alpha, k), abs=0.02)


def test_speedup_divides_tokens_per_pass_by_the_cost_of_a_round():
    assert expected_speedup(0.8, 4, c=0.0) == pytest.approx(expected_tokens_per_pass(0.8, 4))
    assert expected_speedup(0.8, 4, c=0.25) == pytest.approx(expected_tokens_per_pass(0.8, 4) / 2)
    assert expected_speedup(0.8, 4, c=0.0, verify_cost=1.25) == pytest.approx(
        expected_tokens_per_pass(0.8, 4) / 1.25
    )
    # a useless free drafter costs nothing; a useless expensive one costs its price
    assert expected_speedup(0.0, 3, c=0.0) == 1.0
    assert expected_speedup(0.0, 3, c=0.1) < 1.0


def test_best_k_grows_with_alpha_and_shrinks_with_draft_cost():
    assert best_k(0.9, c=0.05) > best_k(0.6, c=0.05)
    assert best_k(0.8, c=0.3) < best_k(0.8, c=0.01)
    assert best_k(1.0, c=0.0, k_max=12) == 12
    assert best_k(0.0, c=0.1) == 1
    # a verification pass that gets dearer with k pulls the best k down
    assert best_k(0.95, 0.0, k_max=16, verify_cost=lambda k: 1 + 0.2 * k) < 16


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: expected_tokens_per_pass(1.5, 3), "alpha must lie in"),
        (lambda: expected_tokens_per_pass(0.5, -1), "k must be an integer >= 0"),
        (lambda: expected_speedup(0.5, 3, c=-1), "c must be"),
        (lambda: expected_speedup(0.5, 3, c=0.1, verify_cost=0), "verify_cost must be"),
        (lambda: best_k(0.5, 0.1, k_max=0), "k_max must be"),
        (lambda: expected_tokens_per_pass_given_lengths(0.5, []), "at least one"),
    ],
)
def test_bad_input_is_refused_with_the_parameter_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def _stats_from(rounds):
    stats = SpeculationStats()
    for m, n in rounds:
        proposed = list(range(m))
        stats.record(RoundRecord(proposed, n, proposed[:n] + [0]), draft_passes=0)
    return stats


def test_estimate_alpha_counts_only_tested_positions():
    # m=4 accepted 1: tested 2 (one pass, one fail). m=2 accepted 2: tested 2. m=0: nothing.
    stats = _stats_from([(4, 1), (2, 2), (0, 0)])
    assert estimate_alpha(stats) == pytest.approx(3 / 4)
    assert stats.acceptance_rate == pytest.approx(3 / 6)  # the naive rate understates α
    assert math.isnan(estimate_alpha(_stats_from([(0, 0)])))


def test_estimate_alpha_recovers_alpha_from_simulated_independent_rounds():
    rng = random.Random(1)
    rounds = []
    for _ in range(20_000):
        m = rng.randint(0, 6)
        n = 0
        while n < m and rng.random() < 0.7:
            n += 1
        rounds.append((m, n))
    stats = _stats_from(rounds)
    assert estimate_alpha(stats) == pytest.approx(0.7, abs=0.01)
    assert all(
        a == pytest.approx(0.7, abs=0.06) for a in conditional_acceptance(stats)
    )  # 3 s.e. at the last
    lengths = [m for m, _ in rounds]
    assert expected_tokens_per_pass_given_lengths(0.7, lengths) == pytest.approx(
        stats.tokens_per_pass, abs=0.02
    )


def test_conditional_acceptance_exposes_correlated_acceptance():
    # All-or-nothing rounds: the independence model's α is 0.5, yet a proposal
    # that survived its first position always survives the rest.
    stats = _stats_from([(4, 4), (4, 0)] * 50)
    assert conditional_acceptance(stats) == [0.5, 1.0, 1.0, 1.0]
    assert estimate_alpha(stats) == pytest.approx(200 / 250)


def test_kept_prefix_rates_and_the_model_without_independence():
    from specdec_lib.analysis.theory import (
        expected_tokens_per_pass,
        expected_tokens_per_pass_from_rates,
        kept_prefix_rates,
    )

    # 10 rounds drafting 3: the first kept in 8, the first two in 6, all three in 6
    rates = kept_prefix_rates([10, 10, 10], [8, 6, 6])
    assert rates == [0.8, 0.6, 0.6]
    assert expected_tokens_per_pass_from_rates(rates, 3) == pytest.approx(3.0)
    assert expected_tokens_per_pass_from_rates(rates, 1) == pytest.approx(1.8)
    # independence: r_i = alpha^(i+1) gives the textbook E(alpha, k)
    alpha = 0.7
    independent = [alpha ** (i + 1) for i in range(5)]
    for k in range(6):
        assert expected_tokens_per_pass_from_rates(independent, k) == pytest.approx(
            expected_tokens_per_pass(alpha, k)
        )
    assert kept_prefix_rates([0], [0])[0] != kept_prefix_rates([0], [0])[0]  # nan
    with pytest.raises(ValueError, match="position_accepted must lie between"):
        kept_prefix_rates([3], [4])
    with pytest.raises(ValueError, match="same length"):
        kept_prefix_rates([3, 2], [1])
    with pytest.raises(ValueError, match="rates must hold at least k=3"):
        expected_tokens_per_pass_from_rates([0.5, 0.2], 3)
    with pytest.raises(ValueError, match="rates must lie in"):
        expected_tokens_per_pass_from_rates([1.5], 1)
