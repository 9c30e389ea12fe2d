import pytest
import torch

from specdec_lib import (
    DraftModelDrafter,
    NgramDrafter,
    SamplingParams,
    SpeculationStats,
    generate,
    workload_prompts,
)
from specdec_lib.engine.batched import generate_batch, speculative_generate_batch

PARAMS = SamplingParams(max_tokens=40)


@pytest.fixture(scope="module")
def mixed_prompts(tok):
    # Different lengths and both workloads in one batch: rows accept different amounts.
    copy = [tok.encode(p) for p in workload_prompts("copy", 3, seed=21)]
    novel = [tok.encode(p) for p in workload_prompts("novel", 2, seed=21)]
    return [copy[0], novel[0], copy[1][:-30] + tok.encode("\nQuote: "), novel[1], copy[2]]


@pytest.fixture(scope="module")
def alone(target, mixed_prompts):
    return [generate(target, p, PARAMS) for p in mixed_prompts]


def test_batched_plain_decoding_equals_each_request_alone(target, mixed_prompts, alone):
    assert generate_batch(target, mixed_prompts, PARAMS) == alone


@pytest.mark.parametrize("k", [1, 3, 7])
def test_batched_speculation_equals_each_request_alone(target, draft, mixed_prompts, alone, k):
    for make in [NgramDrafter, lambda: DraftModelDrafter(draft)]:
        stats = SpeculationStats()
        outs = speculative_generate_batch(target, make, mixed_prompts, PARAMS, k=k, stats=stats)
        assert outs == alone
        assert stats.emitted == PARAMS.max_tokens * len(mixed_prompts)
        # one target pass per batched round, not one per request
        assert stats.target_passes < stats.rounds


def test_batched_speculation_needs_one_drafter_per_prompt(target, mixed_prompts):
    with pytest.raises(ValueError, match="one drafter per prompt"):
        speculative_generate_batch(target, [NgramDrafter()], mixed_prompts, PARAMS)
    with pytest.raises(
        ValueError, match="drafter must have a name and a propose or draft_tree method"
    ):
        speculative_generate_batch(target, ["ngram"] * len(mixed_prompts), mixed_prompts, PARAMS)
    with pytest.raises(ValueError, match="drafters must hold one drafter per prompt"):
        speculative_generate_batch(target, NgramDrafter(), mixed_prompts, PARAMS)


def test_batched_speculation_refuses_k_that_would_overflow_the_context(target):
    # Room for 60 new tokens, not for 60 + k: the short request, once finished, rides
    # along with k+1 padded positions past the long one's end. (A batch of one has no
    # padding, and needs no such room.)
    prompt = [1] * (target.config.block_size - 67)
    with pytest.raises(ValueError, match="k must be <="):
        speculative_generate_batch(
            target, NgramDrafter, [prompt, [1, 2]], SamplingParams(max_tokens=60), k=9
        )


def test_batched_sampling_is_reproducible_with_a_seed(target, mixed_prompts):
    params = SamplingParams(temperature=0.8, max_tokens=20)
    runs = [
        speculative_generate_batch(
            target,
            NgramDrafter,
            mixed_prompts,
            params,
            k=4,
            generator=torch.Generator().manual_seed(5),
        )
        for _ in range(2)
    ]
    assert runs[0] == runs[1]
    assert all(len(o) == 20 for o in runs[0])
