import pytest
import torch
from measures import COPY_SEEDS

from specdec_lib import (
    DraftModelDrafter,
    NgramDrafter,
    SamplingParams,
    SpeculationStats,
    Tokenizer,
    generate,
    load_model,
    speculative_generate,
    workload_examples,
    workload_prompts,
)
from specdec_lib.analysis.runs import copy_accuracy
from specdec_lib.engine.generate import speculate

GREEDY = SamplingParams(max_tokens=48)
VOCAB = Tokenizer().vocab_size


@pytest.fixture(scope="module")
def prompts(tok):
    return {w: [tok.encode(p) for p in workload_prompts(w, 2, seed=11)] for w in ("copy", "novel")}


@pytest.fixture(scope="module")
def references(target, prompts):
    return {w: [generate(target, ids, GREEDY) for ids in prompts[w]] for w in prompts}


@pytest.mark.parametrize("workload", ["copy", "novel"])
@pytest.mark.parametrize("drafter_name", ["ngram", "draft"])
def test_greedy_speculation_is_identical_to_greedy_decoding_for_every_k(
    target, draft, prompts, references, workload, drafter_name
):
    for k in range(1, 9):
        drafter = NgramDrafter() if drafter_name == "ngram" else DraftModelDrafter(draft)
        for ids, ref in zip(prompts[workload], references[workload], strict=True):
            stats = SpeculationStats()
            out = speculative_generate(target, drafter, ids, GREEDY, k=k, stats=stats)
            assert out == ref, f"k={k}"
            assert stats.emitted == GREEDY.max_tokens == len(out)
            assert [t for r in stats.log for t in r.emitted] == out
            assert all(1 <= len(r.emitted) <= k + 1 for r in stats.log)


@pytest.mark.parametrize("k", [1, 4, 7])
def test_cached_and_uncached_speculation_agree_for_greedy_and_seeded_sampling(
    target, draft, prompts, k
):
    ids = prompts["copy"][0]
    for params in [GREEDY, SamplingParams(temperature=0.9, top_p=0.95, max_tokens=40)]:
        for make in [NgramDrafter, lambda: DraftModelDrafter(draft)]:
            outs = [
                speculative_generate(
                    target,
                    make(),
                    ids,
                    params,
                    k=k,
                    generator=torch.Generator().manual_seed(3),
                    use_kv_cache=cached,
                )
                for cached in (True, False)
            ]
            assert outs[0] == outs[1]


def test_speculation_returns_exactly_max_tokens_and_counts_only_those(target, prompts):
    for max_tokens in [1, 2, 5, 9, 30]:
        stats = SpeculationStats()
        params = SamplingParams(max_tokens=max_tokens)
        out = speculative_generate(
            target, NgramDrafter(), prompts["copy"][0], params, k=8, stats=stats
        )
        assert len(out) == max_tokens == stats.emitted
        assert stats.accepted + stats.rounds == stats.emitted
        assert stats.target_passes == stats.rounds


def _until(out, stop):
    """``out`` cut after its first token of ``stop`` (all of it if there is none)."""
    return next((out[: i + 1] for i, t in enumerate(out) if t in stop), out)


def test_a_stop_token_ends_plain_and_speculative_decoding_right_after_it(
    target, draft, prompts, references
):
    refs = references["copy"] + references["novel"]
    for ids, ref in zip(prompts["copy"] + prompts["novel"], refs, strict=True):
        stop = [ref[5], ref[20]]  # in the middle of accepted drafts, at some k
        want = _until(ref, stop)
        assert len(want) <= 6 and generate(target, ids, GREEDY, stop_token_ids=stop) == want
        for k in (1, 4, 7):
            for make in [NgramDrafter, lambda: DraftModelDrafter(draft)]:
                stats = SpeculationStats()
                out = speculative_generate(
                    target, make(), ids, GREEDY, k=k, stats=stats, stop_token_ids=stop
                )
                assert out == want, k
                assert [t for r in stats.log for t in r.emitted] == out == want
                assert stats.emitted == len(want) and stats.accepted + stats.rounds == len(want)


def test_stopping_cuts_the_same_seeded_sample_it_would_have_written(target, draft, prompts):
    ids, params = prompts["novel"][0], SamplingParams(temperature=1.0, max_tokens=40)
    seeded = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    full = generate(target, ids, params, seeded())
    stop = [full[12]]
    assert generate(target, ids, params, seeded(), stop_token_ids=stop) == _until(full, stop)
    whole = speculative_generate(target, DraftModelDrafter(draft), ids, params, 4, seeded())
    stop = [whole[12]]
    cut = speculative_generate(
        target, DraftModelDrafter(draft), ids, params, 4, seeded(), stop_token_ids=stop
    )
    assert cut == _until(whole, stop)


def test_each_request_of_a_batch_stops_at_its_own_first_stop_token(target, prompts, references):
    ids, refs = prompts["copy"], references["copy"]
    stop = [refs[0][3]]
    outs = speculate(target, [NgramDrafter(), NgramDrafter()], ids, GREEDY, 4, stop_token_ids=stop)
    assert outs == [_until(ref, stop) for ref in refs]


def test_acceptance_per_position_counts_each_draft_position(target, prompts):
    stats = SpeculationStats()
    speculative_generate(target, NgramDrafter(), prompts["copy"][1], GREEDY, k=4, stats=stats)
    assert stats.position_proposed[0] == sum(1 for r in stats.log if r.proposed)
    assert sum(stats.position_accepted) == stats.accepted
    assert all(0 <= a <= 1 for a in stats.acceptance_per_position)


def test_trained_target_copies_the_quoted_passage_and_untrained_does_not(target, tok):
    # 32 unseen copy prompts (the first seed of benchmarks/copy_accuracy.py, whose five seeds
    # and 160 prompts measure the course's bar) x the first 64 tokens of the quoted passage.
    # Training text is seeded apart from every workload seed, so the model copies from its
    # context; it cannot recall the passage.
    examples = workload_examples("copy", 32, COPY_SEEDS[0])
    assert copy_accuracy(target, examples, n_tokens=64) >= 0.99
    untrained = load_model("target", trained=False)
    assert copy_accuracy(untrained, examples[:16], n_tokens=64) <= 0.05


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda t, ids: speculative_generate(t, NgramDrafter(), ids, GREEDY, k=0), "k must"),
        (lambda t, ids: speculative_generate(t, NgramDrafter(), [], GREEDY), "at least 1 token"),
        (lambda t, ids: generate(t, [], GREEDY), "at least 1 token"),
        (
            lambda t, ids: generate(t, [1, VOCAB], GREEDY),
            rf"prompt_token_ids must lie in \[0, {VOCAB - 1}\]",
        ),
        (
            lambda t, ids: generate(t, [-1], GREEDY),
            rf"prompt_token_ids must lie in \[0, {VOCAB - 1}\]",
        ),
        (lambda t, ids: generate(t, [1] * 512, GREEDY), "shorter than the context window"),
        (
            lambda t, ids: generate(t, [1] * 444, SamplingParams(max_tokens=100)),
            "max_tokens must be <= 68",
        ),
        (lambda t, ids: generate(t, "a string", GREEDY), "encode text first"),
        (lambda t, ids: generate(t, ids, GREEDY, stop_token_ids=[VOCAB]), "stop_token_ids"),
        (
            lambda t, ids: speculative_generate(
                t, NgramDrafter(), ids, GREEDY, stop_token_ids=[-1]
            ),
            "stop_token_ids must lie",
        ),
    ],
)
def test_bad_input_is_refused_with_the_parameter_named(target, call, name):
    with pytest.raises(ValueError, match=name):
        call(target, [1, 2, 3])
