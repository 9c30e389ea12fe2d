import pytest
import torch

from specdec_lib import SamplingParams, accept_greedy, accept_sampled, accept_sampled_biased
from specdec_lib.analysis.exact_distributions import exact_first_token_distribution
from specdec_lib.engine.drafters import one_hot_probs
from specdec_lib.engine.verify import target_distribution

V = 6
SAMPLED = SamplingParams(temperature=1.0)


def random_dist(seed: int, v: int = V) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(v, generator=g, dtype=torch.float64) * 2, -1)


def test_greedy_acceptance_keeps_the_matching_prefix_and_adds_the_target_token():
    logits = torch.full((4, V), -5.0)
    for row, best in enumerate([1, 2, 3, 4]):
        logits[row, best] = 5.0
    assert accept_greedy(logits, [1, 2, 0]) == ([1, 2, 3], 2)
    assert accept_greedy(logits, [1, 2, 3]) == ([1, 2, 3, 4], 3)  # bonus token
    assert accept_greedy(logits, [5, 2, 3]) == ([1], 0)  # correction at the first mismatch
    assert accept_greedy(logits[:1], []) == ([1], 0)


@pytest.mark.parametrize("seed", range(20))
def test_residual_rule_reproduces_the_target_exactly_by_enumeration(seed):
    p, q = random_dist(seed), random_dist(1000 + seed)
    out = exact_first_token_distribution(p, q)
    assert float((out - p).abs().max()) < 1e-12
    assert abs(float(out.sum()) - 1) < 1e-12


def test_biased_rule_gives_p_times_two_minus_p_to_a_one_hot_draft():
    p = torch.tensor([0.1, 0.2, 0.3, 0.15, 0.15, 0.1], dtype=torch.float64)
    d = 2
    out = exact_first_token_distribution(p, one_hot_probs([d], V)[0], target_distribution)
    pd = float(p[d])
    assert abs(float(out[d]) - pd * (2 - pd)) < 1e-12
    assert abs(float(out[d]) - 0.51) < 1e-12


def test_edge_cases_of_the_residual_rule_by_enumeration():
    p = random_dist(5)
    # p == q: every proposal is accepted
    torch.testing.assert_close(exact_first_token_distribution(p, p), p)
    # disjoint supports: every proposal is rejected, output is p
    p2 = torch.tensor([0.5, 0.5, 0, 0, 0, 0], dtype=torch.float64)
    q2 = torch.tensor([0, 0, 0.25, 0.25, 0.25, 0.25], dtype=torch.float64)
    torch.testing.assert_close(exact_first_token_distribution(p2, q2), p2)
    # target gives the drafted token probability 0: it is never emitted
    out = exact_first_token_distribution(p2, one_hot_probs([3], V)[0])
    assert float(out[3]) == 0.0
    torch.testing.assert_close(out, p2)


def sampled_frequency(rule, p: torch.Tensor, d: int, n: int, seed: int) -> float:
    """How often token d comes out when a one-hot drafter proposes d, over n seeded draws."""
    logits = torch.log(p).to(torch.float32).repeat(2, 1)
    q = one_hot_probs([d], V)
    g = torch.Generator().manual_seed(seed)
    hits = sum(rule(logits, q, [d], SAMPLED, g)[0][0] == d for _ in range(n))
    return hits / n


def test_seeded_sampling_passes_for_the_residual_rule_and_catches_the_biased_one():
    p = torch.softmax(torch.tensor([0.0, 0.5, 1.0, 0.2, -0.3, 0.1], dtype=torch.float64), -1)
    d, n = 2, 4000
    pd = float(torch.softmax(torch.log(p).float(), -1)[d])
    se = (pd * (1 - pd) / n) ** 0.5
    z_correct = (sampled_frequency(accept_sampled, p, d, n, seed=1) - pd) / se
    z_biased = (sampled_frequency(accept_sampled_biased, p, d, n, seed=1) - pd) / se
    assert abs(z_correct) < 4
    assert z_biased > 6  # theory: p(2 - p) - p = p(1 - p) above, many standard errors


def test_a_round_emits_between_one_and_k_plus_one_tokens():
    g = torch.Generator().manual_seed(0)
    for trial in range(200):
        k = 1 + trial % 6
        logits = torch.randn(k + 1, V, generator=g)
        q = torch.softmax(torch.randn(k, V, generator=g), -1)
        proposed = torch.multinomial(q, 1, generator=g).squeeze(1).tolist()
        emitted, n = accept_sampled(logits, q, proposed, SAMPLED, g)
        assert 1 <= len(emitted) <= k + 1
        assert len(emitted) == n + 1
        assert emitted[:n] == proposed[:n]


def test_all_accepted_gets_a_bonus_token_from_the_last_row():
    logits = torch.full((3, V), -30.0)
    logits[0, 1] = logits[1, 2] = logits[2, 4] = 30.0
    emitted, n = accept_sampled(logits, one_hot_probs([1, 2], V), [1, 2], SAMPLED)
    assert (emitted, n) == ([1, 2, 4], 2)


@pytest.mark.parametrize("rule", [accept_sampled, accept_sampled_biased])
def test_malformed_draft_distributions_are_refused(rule):
    logits = torch.zeros(3, V)
    good = one_hot_probs([1, 2], V)
    with pytest.raises(ValueError, match="draft_probs must have shape"):
        rule(logits, good[:1], [1, 2], SAMPLED)
    with pytest.raises(ValueError, match="sum to 1"):
        rule(logits, good * 0.5, [1, 2], SAMPLED)
    with pytest.raises(ValueError, match=">= 0"):
        rule(logits, good - 0.1, [1, 2], SAMPLED)
    with pytest.raises(ValueError, match="must be > 0"):
        rule(logits, one_hot_probs([1, 3], V), [1, 2], SAMPLED)
    with pytest.raises(ValueError, match="target_logits must have shape"):
        rule(torch.zeros(2, V), good, [1, 2], SAMPLED)
    with pytest.raises(ValueError, match=r"proposed token ids must lie in \[0, 5\]"):
        rule(logits, good, [1, 9], SAMPLED)


def test_greedy_acceptance_refuses_mismatched_rows():
    with pytest.raises(ValueError, match="target_logits must have shape"):
        accept_greedy(torch.zeros(2, V), [1, 2])


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("row", [0, 2])
def test_non_finite_target_logits_are_refused_by_both_rules(bad, row):
    logits = torch.zeros(3, 5)
    logits[row, 1] = bad
    q = torch.full((2, 5), 0.2)
    with pytest.raises(ValueError, match="target_logits"):
        accept_greedy(logits, [1, 2])
    with pytest.raises(ValueError, match="target_logits"):
        accept_sampled(logits, q, [1, 2], SamplingParams(temperature=1.0))


def test_a_target_row_that_is_minus_infinity_everywhere_is_refused():
    logits = torch.zeros(3, 5)
    logits[2] = float("-inf")
    with pytest.raises(ValueError, match="target_logits"):
        accept_sampled(logits, torch.full((2, 5), 0.2), [1, 2], SamplingParams(temperature=1.0))
    logits[2, 0] = 0.0  # -inf entries alone are a legitimate mask
    accept_sampled(logits, torch.full((2, 5), 0.2), [1, 2], SamplingParams(temperature=1.0))
