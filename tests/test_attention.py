"""Attention patterns read from the model's own pass, and the induction-head score."""

import pytest
import torch
import torch.nn.functional as F

from specdec_lib import Tokenizer, load_model, workload_examples
from specdec_lib.experiments import attention
from specdec_lib.experiments.attention import (
    attention_patterns,
    induction_scores,
    induction_targets,
    induction_weights,
)


def test_the_recorder_returns_what_attention_returns_and_weights_that_reproduce_it():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))
    record = []
    functional = attention._recording_functional(record)
    for kwargs in (
        {"is_causal": True},
        {"attn_mask": torch.ones(1, 1, 5, 5, dtype=torch.bool).tril()},
    ):
        record.clear()
        out = functional.scaled_dot_product_attention(q, k, v, **kwargs)
        assert torch.allclose(out, F.scaled_dot_product_attention(q, k, v, **kwargs))
        assert torch.allclose(record[0] @ v, out, atol=1e-6)


def test_recording_changes_nothing_in_the_models_pass():
    model = load_model("target")
    ids = Tokenizer().encode(workload_examples("copy", 1, seed=7)[0].prompt)
    before = model(torch.tensor([ids]))
    patterns = attention_patterns(model, ids)
    assert torch.equal(model(torch.tensor([ids])), before)
    n = len(ids)
    assert patterns.shape == (model.config.n_layer, model.config.n_head, n, n)
    assert torch.allclose(patterns.sum(-1), torch.ones(()), atol=1e-5)
    assert patterns.triu(diagonal=1).abs().max() == 0  # no query sees a later key


def test_induction_targets_are_the_positions_after_a_single_earlier_occurrence():
    #        0  1  2  3  4  5  6  7
    ids = [5, 6, 7, 5, 6, 5, 8, 7]
    assert induction_targets(ids) == [(3, 1), (4, 2), (7, 3)]  # 5 at 5 occurred twice before
    assert induction_targets(ids, start=4) == [(4, 2), (7, 3)]
    assert induction_targets([1, 1, 1]) == []  # the token right before is not a target


def test_induction_scores_are_one_for_a_perfect_head_and_even_for_uniform_attention():
    ids = [5, 6, 7, 5, 6, 7]
    T = len(ids)
    perfect = torch.zeros(1, 2, T, T)
    perfect[0, 1, 0, 0] = 1
    for t in range(1, T):
        perfect[0, 1, t, t - 1] = 1  # attends to the previous position...
    for q, key in induction_targets(ids):
        perfect[0, 1, q] = 0
        perfect[0, 1, q, key] = 1  # ...except where a copy target exists
    perfect[0, 0] = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]
    scores = induction_scores(perfect, ids)
    assert scores[0, 1] == 1
    expected = sum(1 / (q + 1) for q, _ in induction_targets(ids)) / len(induction_targets(ids))
    assert scores[0, 0] == pytest.approx(expected)
    assert induction_weights(perfect, ids, 0, 1) == [1.0, 1.0, 1.0]


def test_bad_arguments_name_the_parameter():
    model = load_model("target")
    with pytest.raises(ValueError, match="token_ids"):
        attention_patterns(model, [])
    with pytest.raises(ValueError, match="token_ids"):
        attention_patterns(model, [model.config.vocab_size])
    patterns = torch.zeros(1, 1, 3, 3)
    with pytest.raises(ValueError, match="token_ids"):
        induction_scores(patterns, [1, 2])
    with pytest.raises(ValueError, match="repeated token"):
        induction_scores(patterns, [1, 2, 3])
    with pytest.raises(ValueError, match="patterns"):
        induction_scores(torch.zeros(3, 3), [1, 2, 3])
    with pytest.raises(ValueError, match="start"):
        induction_targets([1, 2], start=-1)
    with pytest.raises(ValueError, match="layer, head"):
        induction_weights(patterns, [1, 2, 1], 1, 0)


def test_the_trained_target_has_a_copying_head_and_the_untrained_one_has_none():
    tok = Tokenizer()
    ex = workload_examples("copy", 1, seed=3)[0]
    prompt = tok.encode(ex.prompt)
    ids = prompt + tok.encode(ex.reference)
    trained = induction_scores(
        attention_patterns(load_model("target"), ids), ids, start=len(prompt)
    )
    untrained = induction_scores(
        attention_patterns(load_model("target", trained=False), ids), ids, start=len(prompt)
    )
    assert trained.max() > 0.3
    assert untrained.max() < 0.05
