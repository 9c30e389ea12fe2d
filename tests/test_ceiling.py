import pytest

from specdec_lib import (
    SamplingParams,
    SpeculationStats,
    generate,
    speculative_generate,
    workload_prompts,
)
from specdec_lib.analysis.ceiling import fewest_rounds, reachable_tokens_per_pass
from specdec_lib.engine.drafters import Proposal, one_hot_probs


class OracleDrafter:
    """Proposes the reference continuation itself: every proposal is accepted."""

    name = "oracle"

    def __init__(self, prompt_len: int, reference: list[int], vocab_size: int) -> None:
        self.prompt_len, self.reference, self.vocab_size = prompt_len, reference, vocab_size

    def propose(self, context, k, params, generator=None) -> Proposal:
        done = len(context) - self.prompt_len
        tokens = self.reference[done : done + k]
        return Proposal(tokens, one_hot_probs(tokens, self.vocab_size), 0)


def test_the_ceiling_at_64_tokens_is_below_k_plus_1_unless_k_plus_1_divides_64():
    got = [round(reachable_tokens_per_pass(64, k), 2) for k in range(1, 9)]
    assert got == [2.0, 2.91, 4.0, 4.92, 5.82, 6.4, 8.0, 8.0]
    for k in range(1, 9):
        assert (reachable_tokens_per_pass(64, k) == k + 1) == (64 % (k + 1) == 0)


def test_fewest_rounds_is_the_ceiling_of_tokens_over_k_plus_1_summed_over_runs():
    assert fewest_rounds(64, 7) == 8
    assert fewest_rounds(64, 8) == 8
    assert fewest_rounds(65, 7) == 9
    assert fewest_rounds([64] * 8, 6) == 8 * 10
    assert fewest_rounds(5, 0) == 5  # k = 0 is plain decoding: one pass per token
    assert reachable_tokens_per_pass([10, 7], 4) == pytest.approx(17 / (2 + 2))


def test_the_ceiling_never_exceeds_k_plus_1_and_approaches_it_for_long_runs():
    for k in range(0, 12):
        for n in range(1, 200):
            assert reachable_tokens_per_pass(n, k) <= k + 1
        assert reachable_tokens_per_pass(10_000 * (k + 1) + 1, k) == pytest.approx(k + 1, rel=1e-3)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "64", None])
def test_bad_token_counts_are_refused_naming_the_parameter(bad):
    with pytest.raises(ValueError, match="tokens"):
        reachable_tokens_per_pass(bad, 4)


def test_bad_k_and_empty_runs_are_refused():
    with pytest.raises(ValueError, match="k must be"):
        fewest_rounds(64, -1)
    with pytest.raises(ValueError, match="k must be"):
        reachable_tokens_per_pass(64, 1.5)
    with pytest.raises(ValueError, match="tokens"):
        reachable_tokens_per_pass([], 4)
    with pytest.raises(ValueError, match="tokens"):
        reachable_tokens_per_pass([64, 0], 4)


@pytest.mark.parametrize("n_tokens", [1, 9, 16, 23])
def test_a_drafter_that_is_always_right_takes_exactly_the_fewest_rounds_in_the_engine(
    target, tok, n_tokens
):
    ids = tok.encode(workload_prompts("copy", n=1, seed=100)[0])
    params = SamplingParams(temperature=0.0, max_tokens=n_tokens)
    reference = generate(target, ids, params)
    for k in range(1, 9):
        stats = SpeculationStats()
        drafter = OracleDrafter(len(ids), reference, target.config.vocab_size)
        assert speculative_generate(target, drafter, ids, params, k=k, stats=stats) == reference
        assert stats.acceptance_rate == 1.0 or stats.proposed == 0
        assert stats.target_passes == fewest_rounds(n_tokens, k)
        assert stats.tokens_per_pass == pytest.approx(reachable_tokens_per_pass(n_tokens, k))
