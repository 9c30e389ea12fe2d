import random

import pytest
import torch

from specdec_lib import NgramDrafter, SamplingParams, Tokenizer, workload_prompts
from specdec_lib.fast_ngram import FastNgramDrafter


def _contexts():
    rng = random.Random(0)
    tok = Tokenizer()
    for text in workload_prompts("copy", 3, seed=41) + workload_prompts("novel", 3, seed=41):
        ids = tok.encode(text)
        for cut in range(1, len(ids), 7):
            yield ids[:cut]
    for _ in range(300):
        # small alphabets make long and overlapping matches common
        alphabet = rng.randint(1, 4)
        yield [rng.randrange(alphabet) for _ in range(rng.randint(1, 60))]


@pytest.mark.parametrize("max_n, min_n", [(8, 3), (4, 1), (2, 2)])
def test_the_fast_drafter_proposes_exactly_what_the_reference_drafter_proposes(max_n, min_n):
    slow, fast = NgramDrafter(max_n, min_n), FastNgramDrafter(max_n, min_n)
    params = SamplingParams()
    for ctx in _contexts():
        assert fast.find_match(ctx) == slow.find_match(ctx), ctx
        for k in (0, 1, 5):
            a, b = slow.propose(ctx, k, params), fast.propose(ctx, k, params)
            assert a.tokens == b.tokens and a.draft_passes == b.draft_passes
            assert b.probs.dtype == a.probs.dtype and torch.equal(a.probs, b.probs)


def test_ids_beyond_a_byte_fall_back_to_the_general_search():
    fast, slow = FastNgramDrafter(vocab_size=1000), NgramDrafter(vocab_size=1000)
    ctx = [300, 5, 999, 7, 300, 5, 999, 7, 300, 5, 999]
    assert fast.find_match(ctx) == slow.find_match(ctx) == (0, 7)
    assert fast.propose(ctx, 3).tokens == [7, 300, 5]


def test_bad_k_is_refused_like_the_reference_drafter():
    with pytest.raises(ValueError, match="k must be"):
        FastNgramDrafter().propose([1, 2, 3], -1)
