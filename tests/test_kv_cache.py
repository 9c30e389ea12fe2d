"""Cached speculation with rollback: the cache changes the cost, never the tokens."""

import random

import pytest
import torch

from specdec_lib import (
    DraftModelDrafter,
    NgramDrafter,
    Proposal,
    SamplingParams,
    SpeculationStats,
    generate,
    speculative_generate,
    workload_prompts,
)
from specdec_lib.engine.drafters import VOCAB_SIZE, one_hot_probs
from specdec_lib.engine.generate import AdaptiveK

SHORT = 20
MODES = {
    "greedy": SamplingParams(max_tokens=SHORT),
    "sampled": SamplingParams(temperature=0.9, top_p=0.95, max_tokens=SHORT),
}


@pytest.fixture(scope="module")
def prompts(tok):
    return {w: tok.encode(workload_prompts(w, 1, seed=31)[0]) for w in ("copy", "novel")}


@pytest.fixture(scope="module")
def references(target, prompts):
    params = SamplingParams(max_tokens=40)
    return {w: generate(target, ids, params) for w, ids in prompts.items()}


def make_drafter(name, draft):
    return NgramDrafter() if name == "ngram" else DraftModelDrafter(draft)


class ScriptedDrafter:
    """Proposes the known greedy continuation, spoiled at a chosen draft position.

    ``spoil(round)`` returns the position to corrupt (or None for a clean
    proposal). The target must accept exactly the tokens before that position.
    """

    name = "scripted"

    def __init__(self, n_prompt, reference, spoil):
        self.n_prompt, self.reference, self.spoil = n_prompt, reference, spoil
        self.rounds = 0
        self.spoiled_at = []

    def propose(self, context, k, params, generator=None):
        done = len(context) - self.n_prompt
        tokens = list(self.reference[done : done + k])
        at = self.spoil(self.rounds) if tokens else None
        if at is not None and at < len(tokens):
            tokens[at] = (tokens[at] + 1) % VOCAB_SIZE
        else:
            at = None
        self.spoiled_at.append(at)
        self.rounds += 1
        return Proposal(tokens, one_hot_probs(tokens, VOCAB_SIZE))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("workload", ["copy", "novel"])
@pytest.mark.parametrize("drafter_name", ["ngram", "draft"])
def test_cached_and_uncached_speculation_emit_identical_tokens_for_every_k(
    target, draft, prompts, drafter_name, workload, mode
):
    params = MODES[mode]
    for k in range(1, 9):
        runs = []
        for cached in (True, False):
            stats = SpeculationStats()
            out = speculative_generate(
                target,
                make_drafter(drafter_name, draft),
                prompts[workload],
                params,
                k=k,
                generator=torch.Generator().manual_seed(100 + k),
                stats=stats,
                use_kv_cache=cached,
            )
            runs.append((out, [(r.proposed, r.n_accepted, r.emitted) for r in stats.log]))
        assert runs[0] == runs[1], f"k={k}: cached and uncached rounds differ"
        assert len(runs[0][0]) == SHORT


@pytest.mark.parametrize("cached", [True, False])
def test_the_first_drafted_token_is_always_verified(target, prompts, references, cached):
    # Every proposal is the right continuation with its FIRST token spoiled. An
    # engine that skipped verifying draft position 0 would accept it.
    ids, ref = prompts["copy"], references["copy"]
    drafter = ScriptedDrafter(len(ids), ref, spoil=lambda r: 0)
    stats = SpeculationStats()
    out = speculative_generate(
        target, drafter, ids, SamplingParams(max_tokens=30), k=5, stats=stats, use_kv_cache=cached
    )
    assert out == ref[:30]
    # every round proposes (the last may have no room left), and none is accepted
    assert all(r.proposed for r in stats.log[:-1])
    assert all(r.n_accepted == 0 for r in stats.log)
    assert all(len(r.emitted) == 1 for r in stats.log)


@pytest.mark.parametrize("cached", [True, False])
def test_no_token_is_duplicated_or_dropped_at_a_round_boundary(target, prompts, references, cached):
    # Rejections at every draft position, including none at all: whatever was
    # accepted, the next round must start exactly after the last emitted token.
    ids, ref = prompts["novel"], references["novel"]
    rng = random.Random(7)
    k = 6
    drafter = ScriptedDrafter(len(ids), ref, spoil=lambda r: rng.choice([None, 0, 1, 2, 3, 4, 5]))
    stats = SpeculationStats()
    params = SamplingParams(max_tokens=40)
    out = speculative_generate(target, drafter, ids, params, k=k, stats=stats, use_kv_cache=cached)
    assert out == ref
    assert [t for r in stats.log for t in r.emitted] == out
    done = 0
    for r, at in zip(stats.log, drafter.spoiled_at, strict=True):
        expected = len(r.proposed) if at is None else at
        assert r.n_accepted == expected
        # what was emitted is the reference continuation from exactly where we were
        assert r.emitted == ref[done : done + len(r.emitted)]
        done += len(r.emitted)
    assert {r.n_accepted for r in stats.log} >= {0, 1, 2, 3, 4, 5, 6}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("drafter_name", ["ngram", "draft"])
def test_the_cache_holds_exactly_the_kept_tokens_after_every_round(
    target, draft, prompts, drafter_name, mode
):
    rolled_back = 0
    for ids in prompts.values():
        stats = SpeculationStats()
        speculative_generate(
            target,
            make_drafter(drafter_name, draft),
            ids,
            # hot sampling, so that rollback happens whatever the weights
            MODES[mode] if mode == "greedy" else SamplingParams(temperature=1.5, max_tokens=SHORT),
            k=4,
            generator=torch.Generator().manual_seed(1),
            stats=stats,
        )
        kept = len(ids)
        for r in stats.log:
            kept += len(r.emitted)
            # every context token but the last, which is pending for the next round
            assert r.cache_length == kept - 1
        rolled_back += sum(r.n_accepted < len(r.proposed) for r in stats.log)
    assert rolled_back > 0, "no rollback was exercised"


def test_the_uncached_path_records_no_cache_length(target, prompts):
    stats = SpeculationStats()
    speculative_generate(
        target, NgramDrafter(), prompts["copy"], MODES["greedy"], stats=stats, use_kv_cache=False
    )
    assert all(r.cache_length is None for r in stats.log)


def test_rolling_back_a_rejected_proposal_leaves_no_trace_in_the_cache(target, prompts):
    # Write context + rejected tokens, crop, write the right tokens: the logits
    # (and so every later one) equal those of a cache that never saw the rejects.
    ids = prompts["copy"]
    right, wrong = [101, 102, 103], [7, 8, 9, 10, 11]
    with torch.inference_mode():
        clean = target.new_cache(1)
        target(torch.tensor([ids]), clean)
        expected = target(torch.tensor([right]), clean)
        dirty = target.new_cache(1)
        target(torch.tensor([ids]), dirty)
        target(torch.tensor([wrong]), dirty)
        dirty.crop(len(ids))
        got = target(torch.tensor([right]), dirty)
    assert int(dirty.lengths[0]) == int(clean.lengths[0]) == len(ids) + len(right)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    # negative control: without the crop the rejected tokens are still attended to
    with torch.inference_mode():
        stale = target.new_cache(1)
        target(torch.tensor([ids]), stale)
        target(torch.tensor([wrong]), stale)
        leaked = target(torch.tensor([right]), stale)
    assert (leaked - expected).abs().max() > 1e-2


@pytest.mark.parametrize("workload", ["copy", "novel"])
@pytest.mark.parametrize("drafter_name", ["ngram", "draft"])
def test_adaptive_k_changes_the_cost_but_not_the_greedy_output(
    target, draft, prompts, references, workload, drafter_name
):
    policy = AdaptiveK(min_k=1, max_k=10)
    stats = SpeculationStats()
    params = SamplingParams(max_tokens=40)
    out = speculative_generate(
        target,
        make_drafter(drafter_name, draft),
        prompts[workload],
        params,
        k=3,
        stats=stats,
        adaptive_k=policy,
    )
    assert out == references[workload]
    ks = [r.k for r in stats.log]
    assert ks[0] == 3 and all(policy.min_k <= k <= policy.max_k for k in ks)
    rounds = [(len(r.proposed), r.n_accepted) for r in stats.log]
    for i, k_next in enumerate(ks[1:]):
        assert k_next == policy.next_k(ks[i], rounds[: i + 1])


def test_adaptive_k_grows_on_full_acceptance_and_shrinks_on_rejection():
    policy = AdaptiveK(min_k=1, max_k=8, grow=2, shrink=1)
    assert policy.next_k(4, [(4, 4)]) == 6
    assert policy.next_k(7, [(7, 7)]) == 8  # capped at max_k
    assert policy.next_k(4, [(4, 4), (4, 2)]) == 3  # only the last round counts
    assert policy.next_k(1, [(1, 0)]) == 1  # floored at min_k
    assert policy.next_k(5, [(5, 5), (0, 0)]) == 5  # no proposal, no evidence


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(min_k=0), "min_k must be"),
        (dict(min_k=3, max_k=2), "max_k must be"),
        (dict(grow=0), "grow must be"),
        (dict(shrink=True), "shrink must be"),
    ],
)
def test_a_bad_adaptive_k_is_refused_with_the_parameter_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AdaptiveK(**kwargs)


def test_a_starting_k_outside_the_adaptive_range_is_refused(target, prompts):
    with pytest.raises(ValueError, match=r"k must lie in \[1, 4\]"):
        speculative_generate(
            target,
            NgramDrafter(),
            prompts["copy"],
            MODES["greedy"],
            k=6,
            adaptive_k=AdaptiveK(max_k=4),
        )


@pytest.mark.parametrize("cached", [True, False])
def test_every_target_forward_pass_is_counted_prefill_included(target, prompts, cached):
    # Plain decoding spends one pass per token, its prefill being the first; speculation's
    # first round is its prefill too, so target_passes is every call of the target.
    calls = []
    handle = target.register_forward_hook(lambda *_: calls.append(1))
    try:
        stats = SpeculationStats()
        speculative_generate(
            target,
            NgramDrafter(),
            prompts["copy"],
            MODES["greedy"],
            stats=stats,
            use_kv_cache=cached,
        )
        assert len(calls) == stats.target_passes == stats.rounds
        calls.clear()
        generate(target, prompts["copy"], MODES["greedy"])
        assert len(calls) == MODES["greedy"].max_tokens
    finally:
        handle.remove()
