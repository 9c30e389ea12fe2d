"""The engine's edge: the validation helpers it calls once per request, the base class
that lets a drafter skip re-validation, what a round records, and how weights are saved.

The engine checks what a caller hands it once, at the public boundary (``checks``), and
trusts its own tensors every round after; these tests pin what the boundary refuses.
"""

import math
import random

import numpy as np
import pytest
import torch

from specdec_lib import RoundRecord, SamplingParams, SpeculationStats, TinyGPT
from specdec_lib.checks import (
    check_draft_probs,
    check_drafters,
    check_forward,
    check_k,
    check_model_config,
    check_prompt,
    check_prompts,
    check_proposal,
    check_sampling_params,
    check_target_logits,
)
from specdec_lib.engine.drafters import LibraryDrafter, NgramDrafter, Proposal, one_hot_probs
from specdec_lib.engine.generate import AdaptiveK, next_token, speculative_generate
from specdec_lib.engine.model import ModelConfig
from specdec_lib.engine.sampling import process_logits, sample
from specdec_lib.engine.weights import CONFIGS, load_model, save_model
from specdec_lib.text.language import DOC, NOTE_SHARE, training_text

V = 7
SAMPLED = SamplingParams(temperature=1.0)


def test_check_k_refuses_non_integers_and_lengths_outside_the_adaptive_range():
    assert check_k(3, None) == 3 and check_k(3, AdaptiveK(2, 4)) == 3
    for bad in (0, 2.0, True, "3"):
        with pytest.raises(ValueError, match="k must be an integer >= 1"):
            check_k(bad, None)
    with pytest.raises(ValueError, match=r"k must lie in \[2, 4\]"):
        check_k(5, AdaptiveK(2, 4))


def test_check_prompt_refuses_text_empty_prompts_and_prompts_that_leave_no_room():
    config = ModelConfig(block_size=16, vocab_size=V)
    assert check_prompt((1, 2), config, max_tokens=4) == [1, 2]
    for bad in ("12", [], [1.0, 2.0], [V]):
        with pytest.raises(ValueError):
            check_prompt(bad, config, max_tokens=4)
    with pytest.raises(ValueError, match=r"max_tokens must be <= 6 .*context window 16"):
        check_prompt([1] * 10, config, max_tokens=10)


def test_check_prompts_leaves_a_batch_room_for_a_padded_round_and_a_single_request_none():
    config = ModelConfig(block_size=16, vocab_size=V)
    assert check_prompts([[1] * 10, [2]], config, max_tokens=4, k_max=2) == [[1] * 10, [2]]
    assert check_prompts([[1] * 10], config, max_tokens=6, k_max=9) == [[1] * 10]  # no padding
    with pytest.raises(ValueError, match=r"k must be <= 2 here.*got 10 \+ 4 \+ 3"):
        check_prompts([[1] * 10, [2]], config, max_tokens=4, k_max=3)
    for bad in ([], "12", 5):
        with pytest.raises(ValueError, match="prompts must hold at least 1 prompt"):
            check_prompts(bad, config, max_tokens=4)


def test_check_drafters_wants_one_drafter_with_a_name_and_propose_per_prompt():
    drafters = (NgramDrafter(), NgramDrafter())
    assert check_drafters(drafters, 2) == list(drafters)
    with pytest.raises(ValueError, match=r"one drafter per prompt \(3\), got 2"):
        check_drafters(drafters, 3)
    with pytest.raises(
        ValueError, match="drafter must have a name and a propose or draft_tree method"
    ):
        check_drafters([NgramDrafter(), object()], 2)
    with pytest.raises(
        ValueError, match="drafter must have a name and a propose or draft_tree method"
    ):
        speculative_generate(load_model("draft", trained=False), "ngram", [1, 2], SAMPLED)


def test_check_sampling_params_returns_plain_numbers_and_names_the_bad_field():
    raw = SamplingParams.__new__(SamplingParams)  # unchecked, to hand the helper directly
    for name, value in dict(
        temperature=np.float32(0.5), top_k=np.int64(3), top_p=1, max_tokens=np.int16(4)
    ).items():
        object.__setattr__(raw, name, value)
    checked = check_sampling_params(raw, min_temperature=1e-6)
    assert checked == dict(temperature=0.5, top_k=3, top_p=1.0, max_tokens=4)
    assert [type(v) for v in checked.values()] == [float, int, float, int]
    object.__setattr__(raw, "temperature", 1e-7)
    with pytest.raises(
        ValueError, match=r"temperature must be 0 \(greedy\) or a finite number >= 1e-06"
    ):
        check_sampling_params(raw, min_temperature=1e-6)


def test_check_model_config_names_the_bad_field():
    check_model_config(ModelConfig())
    for kwargs, name in [
        (dict(n_layer=0), "n_layer"),
        (dict(n_head=3), "n_embd / n_head"),
        (dict(rope_theta=1.0), "rope_theta"),
        (dict(rope_theta="big"), "rope_theta"),
    ]:
        with pytest.raises(ValueError, match=name):
            ModelConfig(**kwargs)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_check_target_logits_refuses_nan_and_plus_infinity(value):
    logits = torch.zeros(2, V)
    logits[1, 3] = value
    with pytest.raises(ValueError, match="target_logits must not hold NaN or \\+inf"):
        check_target_logits(logits, [1])


def test_check_target_logits_refuses_a_row_with_no_distribution_and_a_wrong_shape():
    logits = torch.zeros(2, V)
    logits[0] = -math.inf
    with pytest.raises(ValueError, match="a row is all -inf"):
        check_target_logits(logits, [1])
    with pytest.raises(ValueError, match=r"\(k\+1, vocab_size\) = \(3, V\)"):
        check_target_logits(torch.zeros(2, V), [1, 2])
    logits[0, 2] = -math.inf  # some -inf entries are a distribution (top-k did it)
    logits[0, 4] = 0.0
    assert check_target_logits(logits, [4])[1] == [4]


def test_check_draft_probs_refuses_unnormalised_rows_and_proposals_of_probability_zero():
    q = one_hot_probs([1, 2], V)
    assert check_draft_probs(q, [1, 2], V) is q
    with pytest.raises(ValueError, match="must sum to 1"):
        check_draft_probs(2 * q, [1, 2], V)
    with pytest.raises(ValueError, match=r"draft_probs\[1, proposed\[1\]\] must be > 0"):
        check_draft_probs(q, [1, 3], V)
    with pytest.raises(ValueError, match=r"shape \(k, vocab_size\) = \(2, 7\)"):
        check_draft_probs(q[:1], [1, 2], V)


def test_check_proposal_refuses_a_foreign_drafter_s_long_or_out_of_range_proposal():
    ok = check_proposal(Proposal([1, 2]), "mine", 2, SAMPLED, V)
    assert ok.tokens == [1, 2]
    with pytest.raises(ValueError, match="drafter 'mine' proposed 3 tokens, more than k=2"):
        check_proposal(Proposal([1, 2, 3]), "mine", 2, SAMPLED, V)
    with pytest.raises(ValueError, match="tokens proposed by drafter 'mine'"):
        check_proposal(Proposal([V]), "mine", 2, SAMPLED, V)
    with pytest.raises(ValueError, match="draft_probs"):  # sampling needs the real q
        check_proposal(Proposal([1], torch.full((1, V), 0.5)), "mine", 2, SAMPLED, V)


class _Repeat(LibraryDrafter):
    """A drafter of the library's kind: it implements ``draft`` and inherits the checks."""

    name = "repeat the last token"
    vocab_size = V

    def draft(self, context, k, params, generator):
        return Proposal([context[-1]] * k)


def test_a_library_drafter_is_checked_by_propose_and_trusted_by_the_engine():
    drafter = _Repeat()
    assert drafter.propose((3, 4), 2).tokens == [4, 4]
    for bad_context in ([], "34", [V]):
        with pytest.raises(ValueError, match="context"):
            drafter.propose(bad_context, 2)
    with pytest.raises(ValueError, match="k must be an integer >= 0"):
        drafter.propose([3], -1)
    target = TinyGPT(ModelConfig(block_size=32, vocab_size=V, n_layer=1, n_head=2, n_embd=16))
    params = SamplingParams(max_tokens=6)
    stats = SpeculationStats()
    out = speculative_generate(target, drafter, [1, 2, 3], params, k=3, stats=stats)
    assert len(out) == 6 and all(isinstance(r, RoundRecord) for r in stats.log)


def test_each_round_record_holds_the_proposal_the_verdict_and_the_cache_after_rollback():
    target = load_model("target", trained=False)
    stats = SpeculationStats()
    prompt = [5, 6, 7, 5, 6, 7, 5, 6]
    out = speculative_generate(
        target, NgramDrafter(), prompt, SamplingParams(max_tokens=8), k=3, stats=stats
    )
    emitted: list[int] = []
    for r in stats.log:
        assert isinstance(r, RoundRecord) and r.k == 3
        assert r.emitted[: r.n_accepted] == r.proposed[: r.n_accepted]
        assert len(r.emitted) == r.n_accepted + 1 or len(emitted) + len(r.emitted) == 8
        emitted += r.emitted
        assert r.cache_length == len(prompt) + len(emitted) - 1  # all but the pending token
    assert emitted == out


def test_next_token_is_the_argmax_when_greedy_and_a_seeded_draw_when_sampling():
    logits = torch.tensor([0.1, 2.0, -1.0, 2.0, 0.5])
    assert next_token(logits, SamplingParams(), None) == 1  # ties go to the first
    draws = [next_token(logits, SAMPLED, torch.Generator().manual_seed(s)) for s in range(50)]
    same = [
        sample(process_logits(logits, SAMPLED), torch.Generator().manual_seed(s)) for s in range(50)
    ]
    assert draws == same and len(set(draws)) > 1


def test_saved_weights_load_back_identically_with_their_config(tmp_path):
    model = load_model("draft", trained=False)
    save_model(model, "draft", {"steps": 0}, tmp_path)
    loaded = load_model("draft", directory=tmp_path)
    assert loaded.config == CONFIGS["draft"] == model.config
    for (name, a), (_, b) in zip(
        model.state_dict().items(), loaded.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name


def test_the_training_text_holds_notes_at_the_note_share():
    docs = training_text(random.Random(0), 300_000).split(DOC)[1:]
    share = sum(d.startswith("Note:") for d in docs) / len(docs)
    sd = math.sqrt(NOTE_SHARE * (1 - NOTE_SHARE) / len(docs))
    assert abs(share - NOTE_SHARE) < 4 * sd, (share, len(docs))


def test_logits_to_keep_scores_the_last_positions_and_refuses_more_than_it_has():
    model = load_model("draft", trained=False)
    idx = torch.tensor([[5, 6, 7, 8]])
    with torch.inference_mode():
        full = model(idx)
        torch.testing.assert_close(model(idx, logits_to_keep=3), full[:, -3:])
        for bad in (-1, 5):
            with pytest.raises(ValueError, match=r"logits_to_keep must lie in \[0, T=4\]"):
                model(idx, logits_to_keep=bad)
        assert check_forward(idx, model.new_cache(1), 4, block_size=4) == (1, 4)
        with pytest.raises(ValueError, match=r"idx must have shape \(B, T\)"):
            model(idx[0])
        with pytest.raises(ValueError, match="cache batch size 2 != input batch size 1"):
            model(idx, model.new_cache(2))
        with pytest.raises(ValueError, match="sequence length must be <= block_size"):
            model(torch.zeros(1, model.config.block_size + 1, dtype=torch.long))
