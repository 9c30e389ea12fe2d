import pytest
import torch

from specdec_lib import (
    ModelConfig,
    NgramDrafter,
    RoundRecord,
    SamplingParams,
    SpeculationStats,
    TinyGPT,
)
from specdec_lib.analysis.costs import (
    cost_per_token,
    kv_cache_bytes_per_token,
    stats_cost_per_token,
    weight_bytes,
)
from specdec_lib.analysis.timing import decode_step, proposal_call, time_ratio

SMALL = ModelConfig(block_size=64, n_layer=1, n_head=2, n_embd=16)


def test_weight_bytes_counts_the_tied_embedding_once():
    model = TinyGPT(SMALL)
    assert weight_bytes(model) == 4 * model.num_parameters()


def test_kv_cache_holds_a_key_and_a_value_per_layer_per_token():
    assert kv_cache_bytes_per_token(SMALL) == 2 * 1 * 16 * 4


def test_kv_cache_under_grouped_query_attention_holds_only_the_shared_heads():
    # SmolLM2-135M's shape: 9 query heads share 3 key/value heads of width 64, 30 layers
    gqa = ModelConfig(block_size=64, n_layer=30, n_head=9, n_kv_head=3, n_embd=576, n_hidden=64)
    assert kv_cache_bytes_per_token(gqa, 2) == 2 * 30 * 3 * 64 * 2  # 23,040 bytes in bf16
    full = ModelConfig(block_size=64, n_layer=30, n_head=9, n_embd=576, n_hidden=64)
    assert kv_cache_bytes_per_token(full, 2) == 3 * kv_cache_bytes_per_token(gqa, 2)


@pytest.mark.parametrize("bad", [0, -2, 2.0, True])
def test_kv_cache_bytes_refuses_a_bad_element_size(bad):
    with pytest.raises(ValueError, match="bytes_per_value"):
        kv_cache_bytes_per_token(SMALL, bad)


def test_plain_decoding_costs_exactly_one_target_pass_per_token():
    assert cost_per_token(target_passes=10, draft_passes=0, emitted=10, c=0.3) == 1.0


def test_draft_passes_are_charged_at_c_and_rounds_at_o():
    assert cost_per_token(4, 12, 16, c=0.5, rounds=4, o=0.25) == pytest.approx((4 + 6 + 1) / 16)


def test_cost_per_token_rejects_nothing_emitted_and_negative_costs():
    with pytest.raises(ValueError, match="emitted"):
        cost_per_token(1, 0, 0, c=0.1)
    with pytest.raises(ValueError, match="c and o"):
        cost_per_token(1, 0, 1, c=-0.1)


def test_stats_cost_per_token_uses_the_pooled_counts():
    stats = SpeculationStats()
    stats.record(RoundRecord([1, 2, 3], 3, [1, 2, 3, 4]), draft_passes=3)
    stats.record(RoundRecord([5, 6, 7], 0, [9]), draft_passes=3)
    assert stats_cost_per_token(stats, c=0.5) == pytest.approx((2 + 0.5 * 6) / 5)


def test_every_decode_step_sees_the_same_context_length():
    model = TinyGPT(SMALL).eval()
    step = decode_step(model, context_len=10)
    first, second = step(), step()
    assert torch.equal(first, second)  # same token at the same position: rolled back each time


def test_proposal_call_runs_the_drafter():
    calls = []

    class Recorder:
        name = "recorder"

        def propose(self, context, k, params, generator=None):
            calls.append((list(context), k))

    proposal_call(Recorder(), [1, 2, 3], 4, SamplingParams())()
    assert calls == [([1, 2, 3], 4)]
    proposal_call(NgramDrafter(), [1, 2, 3, 1, 2], 4, SamplingParams())()


def test_time_ratio_of_a_slow_and_a_fast_function_is_large():
    import time

    ratio = time_ratio(lambda: time.sleep(0.004), lambda: time.sleep(0.001), repeats=10, warmup=1)
    assert ratio.ratio > 1.5 and ratio.median_ratio > 1.5
    assert ratio.numerator > ratio.denominator and ratio.repeats == 10


def test_time_ratio_validates_repeats_and_quantile():
    with pytest.raises(ValueError, match="repeats"):
        time_ratio(lambda: None, lambda: None, repeats=1)
    with pytest.raises(ValueError, match="quantile"):
        time_ratio(lambda: None, lambda: None, quantile=0.9)
