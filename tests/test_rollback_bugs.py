import random

import pytest

from specdec_lib import (
    DraftModelDrafter,
    NgramDrafter,
    SamplingParams,
    SpeculationStats,
    generate,
    speculative_generate,
    workload_prompts,
)
from specdec_lib.engine.batched import speculative_generate_batch
from specdec_lib.engine.model import KVCache
from specdec_lib.experiments.rollback_bugs import (
    MisrewindingDrafter,
    ResettingCache,
    SpoilingDrafter,
    UniformRollbackCache,
    cache_bug,
)

PARAMS = SamplingParams(max_tokens=32)


@pytest.fixture(scope="module")
def prompts(tok):
    return {w: [tok.encode(p) for p in workload_prompts(w, 4, seed=109)] for w in ("copy", "novel")}


def _run(target, drafter, ids, k=4):
    stats = SpeculationStats()
    return speculative_generate(target, drafter, ids, PARAMS, k=k, stats=stats), stats


def test_a_cache_reset_instead_of_a_crop_collapses_copying_to_about_one_token_per_pass(
    target, prompts
):
    ids = prompts["copy"][0]
    right, good = _run(target, NgramDrafter(), ids)
    with cache_bug(target, ResettingCache):
        wrong, bad = _run(target, NgramDrafter(), ids)
    assert good.tokens_per_pass > 4 and bad.tokens_per_pass < 2
    assert right == generate(target, ids, PARAMS) != wrong
    assert type(target.new_cache(1)) is KVCache  # the mutant is gone after the block


def test_a_draft_cache_rewound_too_far_costs_acceptance_but_never_output(target, draft, prompts):
    ids = prompts["novel"][0]
    right, good = _run(target, DraftModelDrafter(draft), ids)
    wrong, bad = _run(target, MisrewindingDrafter(draft, error=2), ids)
    exact, same = _run(target, MisrewindingDrafter(draft, error=0), ids)
    assert right == wrong == exact
    assert bad.acceptance_rate < 0.7 * good.acceptance_rate
    assert same.acceptance_rate == good.acceptance_rate  # error 0 is the correct rewind


def test_one_rollback_for_a_whole_batch_changes_the_output_of_rows_that_rejected_more(
    target, prompts
):
    batch = prompts["copy"]
    alone = [generate(target, ids, PARAMS) for ids in batch]
    assert speculative_generate_batch(target, NgramDrafter, batch, PARAMS, k=4) == alone
    stats = SpeculationStats()
    with cache_bug(target, UniformRollbackCache):
        outs = speculative_generate_batch(target, NgramDrafter, batch, PARAMS, k=4, stats=stats)
    assert outs != alone and stats.acceptance_rate < 0.9


def test_the_uniform_rollback_keeps_each_rows_own_length_as_the_engine_asked(target):
    cache = UniformRollbackCache(target.config, 3)
    cache._advance(10)
    cache.crop([6, 8, 9])  # rollbacks 4, 2, 1: all rows go back by 1
    assert cache.lengths == [6, 8, 9] and cache._held == [9, 9, 9]


@pytest.mark.parametrize("spoil", [lambda r: 0, lambda r: random.Random(r).choice([None, 0, 2, 3])])
def test_the_spoiling_drafter_makes_the_engine_accept_exactly_the_drafts_before_the_spoil(
    target, prompts, spoil
):
    ids = prompts["novel"][1]
    reference = generate(target, ids, PARAMS)
    drafter = SpoilingDrafter(len(ids), reference, spoil)
    out, stats = _run(target, drafter, ids)
    assert out == reference
    for record, at in zip(stats.log, drafter.spoiled_at, strict=True):
        assert record.n_accepted == (len(record.proposed) if at is None else at)
