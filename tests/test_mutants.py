"""The mutant battery: each mutant really changes the engine, and the test that the
chapter says catches it does, at a small size, while the correct engine passes."""

from __future__ import annotations

import pytest
import torch

from specdec_lib import accept_sampled
from specdec_lib.analysis.exact_distributions import exact_output_distribution
from specdec_lib.experiments.mutant_battery import (
    Setup,
    across_seeds_test,
    all_position_test,
    first_token_distribution,
    first_token_test,
    greedy_identity,
    round_law,
    rounds_for_power,
    tie_test,
    total_variation,
)
from specdec_lib.experiments.mutants import CORRECT, MUTANTS, mutant


@pytest.fixture(scope="module")
def setup() -> Setup:
    return Setup()


def test_every_mutant_cites_a_public_thread_or_says_it_has_none() -> None:
    for m in MUTANTS:
        assert m.description
        assert (m.url == "") == (m.thread == "" or m.thread.startswith("the course"))
        if m.url:
            assert m.url.startswith("https://github.com/") and m.thread.split("#")[1] in m.url


@pytest.mark.parametrize(
    "name", ["greedy draft", "unfiltered q", "target without params", "resample from target"]
)
def test_a_mutant_that_theory_says_biases_the_first_token_does(setup: Setup, name: str) -> None:
    assert total_variation(first_token_distribution(mutant(name), setup), setup.p) > 0.05


@pytest.mark.parametrize(
    "name", ["one uniform per round", "seedless uniforms", "tie broken last", "correct engine"]
)
def test_a_mutant_that_theory_says_leaves_the_first_token_alone_does(
    setup: Setup, name: str
) -> None:
    assert total_variation(first_token_distribution(mutant(name), setup), setup.p) < 1e-12


def test_the_reused_uniform_biases_the_second_position_only(setup: Setup) -> None:
    law = round_law(mutant("one uniform per round"), setup)
    tv = [total_variation(law.position(i, setup.drafted)[1], setup.round_p[i]) for i in range(3)]
    assert tv[0] < 1e-12 and tv[1] > 0.3 and tv[2] < 1e-12


def test_the_correct_round_law_is_the_target_at_every_position(setup: Setup) -> None:
    law = round_law(CORRECT, setup)
    for i in range(3):
        assert total_variation(law.position(i, setup.drafted)[1], setup.round_p[i]) < 1e-9


def test_leaving_a_mutant_restores_the_engine(setup: Setup) -> None:
    for m in MUTANTS:
        with m.active():
            pass
    q = setup.drafter(CORRECT).propose(setup.context, 1, setup.params).probs[0]
    exact = exact_output_distribution(accept_sampled, setup.logits, q, setup.params)
    assert total_variation(exact, setup.p) < 1e-12


# n: at least the sample size at which benchmarks/mutants.py measured 99% detection
@pytest.mark.parametrize(
    ("name", "test", "n"),
    [
        ("greedy draft", first_token_test, 200),
        ("unfiltered q", first_token_test, 2500),
        ("target without params", first_token_test, 100),
        ("resample from target", first_token_test, 4200),
        ("one uniform per round", all_position_test, 300),
        ("seedless uniforms", across_seeds_test, 200),
    ],
)
def test_each_sampled_mutant_is_caught_by_the_test_the_chapter_names(
    setup: Setup, name: str, test, n: int
) -> None:
    assert test(mutant(name), setup, n, seed=0)
    assert not test(CORRECT, setup, n, seed=0)  # and the same test passes the correct engine


def test_the_reused_uniform_slips_through_the_first_token_test(setup: Setup) -> None:
    assert not first_token_test(mutant("one uniform per round"), setup, 300, seed=0)


def test_the_seedless_uniforms_slip_through_every_test_inside_one_stream(setup: Setup) -> None:
    m = mutant("seedless uniforms")
    assert not first_token_test(m, setup, 300, seed=0)
    assert not all_position_test(m, setup, 300, seed=0)


def test_the_tie_mutant_is_caught_by_the_tie_test_and_not_by_greedy_identity() -> None:
    m = mutant("tie broken last")
    assert all(tie_test(m)) and not any(tie_test(CORRECT))
    assert not any(greedy_identity(m, seed=100))  # real logits never tie exactly


def test_unknown_mutant_names_are_refused() -> None:
    with pytest.raises(ValueError, match="name must be one of"):
        mutant("no such bug")


def test_the_set_up_drafts_moderate_probabilities(setup: Setup) -> None:
    # where the test can discriminate: the drafted tokens are neither rare nor certain
    for i, d in enumerate(setup.drafted):
        assert 0.2 < float(setup.round_p[i, d]) < 0.9
    assert torch.isclose(setup.p.sum(), torch.tensor(1.0, dtype=torch.float64))


def test_rounds_for_power_finds_the_threshold_and_refuses_bad_arguments() -> None:
    assert rounds_for_power(lambda n: float(n >= 300)) in range(300, 308)
    assert rounds_for_power(lambda n: 0.5) is None
    with pytest.raises(ValueError, match="power must lie"):
        rounds_for_power(lambda n: 1.0, power=1.0)
    with pytest.raises(ValueError, match="high must be"):
        rounds_for_power(lambda n: 1.0, low=100, high=50)
    with pytest.raises(ValueError, match="vocab_size must be"):
        tie_test(CORRECT, vocab_size=1)
