import random

import pytest
import torch

from specdec_lib import Drafter, DraftModelDrafter, NgramDrafter, SamplingParams, TinyGPT
from specdec_lib.engine.drafters import VOCAB_SIZE
from specdec_lib.engine.model import ModelConfig

GREEDY = SamplingParams()


def ids(text: str) -> list[int]:
    return list(text.encode())


def test_ngram_drafter_copies_what_followed_the_longest_latest_match():
    drafter = NgramDrafter(max_n=4, min_n=2)
    context = ids("abcXY abdZW abc")
    proposal = drafter.propose(context, 2, GREEDY)
    assert bytes(proposal.tokens) == b"XY"  # "abc" (n=3) beats the later "ab" (n=2)
    assert proposal.probs is None  # deterministic: all mass on each token
    assert proposal.dense_probs(VOCAB_SIZE).shape == (2, VOCAB_SIZE)
    assert proposal.dense_probs(VOCAB_SIZE).sum(-1).tolist() == [1.0, 1.0]
    assert proposal.draft_passes == 0


def test_ngram_drafter_prefers_the_latest_occurrence():
    proposal = NgramDrafter(max_n=3, min_n=3).propose(ids("abc1 abc2 abc"), 1, GREEDY)
    assert bytes(proposal.tokens) == b"2"


def test_ngram_drafter_proposes_nothing_without_a_match():
    proposal = NgramDrafter().propose(ids("no repeat"), 4, GREEDY)
    assert proposal.tokens == [] and proposal.dense_probs(VOCAB_SIZE).shape == (0, VOCAB_SIZE)


def test_ngram_drafter_proposes_at_most_k_and_stops_at_the_end_of_the_context():
    drafter = NgramDrafter(max_n=3, min_n=3)
    assert len(drafter.propose(ids("abcdefgh abc"), 3, GREEDY).tokens) == 3
    assert bytes(drafter.propose(ids("xyzab xyz"), 10, GREEDY).tokens) == b"ab xyz"


def test_ngram_drafter_validates_its_settings():
    with pytest.raises(ValueError, match="min_n"):
        NgramDrafter(min_n=0)
    with pytest.raises(ValueError, match="max_n"):
        NgramDrafter(max_n=2, min_n=3)
    with pytest.raises(ValueError, match="k must"):
        NgramDrafter().propose([1, 2, 3], -1, GREEDY)


def latest_longest_match(context: list[int], max_n: int, min_n: int) -> tuple[int, int] | None:
    """The rule as plainly as it can be written: an oracle for the byte search."""
    L = len(context)
    for n in range(min(max_n, L - 1), min_n - 1, -1):
        for start in range(L - 1 - n, -1, -1):
            if context[start : start + n] == context[L - n :]:
                return start, n
    return None


@pytest.mark.parametrize("vocab", [3, 300, 70_000])
def test_ngram_search_agrees_with_the_plain_rule_on_random_contexts(vocab):
    # Small vocabularies repeat often; ids above 255 and 65535 span several bytes, where a
    # byte-level hit can straddle two tokens and must be skipped.
    rng = random.Random(vocab)
    for _ in range(300):
        context = [rng.randrange(vocab) for _ in range(rng.randint(1, 40))]
        if vocab > 3 and len(context) > 4 and rng.random() < 0.5:
            at = rng.randrange(len(context) - 2)
            context += context[at : at + rng.randint(1, 3)]
        drafter = NgramDrafter(max_n=4, min_n=1, vocab_size=vocab)
        assert drafter.find_match(context) == latest_longest_match(context, 4, 1), context


def test_ngram_search_skips_hits_that_straddle_a_token_boundary():
    # As 4-byte words, [1, 256] is 00 00 00 01 00 00 01 00; the bytes of token 65536
    # (00 01 00 00) occur across that boundary but the token itself does not.
    assert NgramDrafter(max_n=1, min_n=1, vocab_size=70_000).find_match([1, 256, 65536]) is None


def test_both_drafters_satisfy_the_protocol():
    torch.manual_seed(0)
    small = TinyGPT(ModelConfig(block_size=64, n_layer=1, n_head=1, n_embd=8)).eval()
    assert isinstance(NgramDrafter(), Drafter)
    assert isinstance(DraftModelDrafter(small), Drafter)


def greedy_loop(model: TinyGPT, context: list[int], k: int) -> list[int]:
    seq = list(context)
    with torch.no_grad():
        for _ in range(k):
            seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
    return seq[len(context) :]


def test_draft_model_drafter_reuses_its_cache_correctly_across_diverging_contexts(draft):
    drafter = DraftModelDrafter(draft)
    context = ids("Text: The dova sopes the taku.\nQuote: The")
    first = drafter.propose(context, 4, GREEDY)
    assert first.tokens == greedy_loop(draft, context, 4)
    assert first.draft_passes == 4
    # The target accepted one token and corrected the next: the cache must roll back.
    later = context + first.tokens[:1] + [ord("#")]
    assert drafter.propose(later, 3, GREEDY).tokens == greedy_loop(draft, later, 3)


def test_draft_model_drafter_records_the_processed_distribution_it_sampled_from(draft):
    params = SamplingParams(temperature=0.8, top_k=20)
    proposal = DraftModelDrafter(draft).propose(
        ids("Note: The"), 3, params, torch.Generator().manual_seed(0)
    )
    assert proposal.probs.shape == (3, VOCAB_SIZE)
    assert (torch.count_nonzero(proposal.probs, dim=-1) <= 20).all()
    for row, token in zip(proposal.probs, proposal.tokens, strict=True):
        assert row[token] > 0
