import dataclasses

import pytest
import torch

from specdec_lib import ModelConfig, TinyGPT
from specdec_lib.engine.model import apply_rotary, rotary_tables, smear

SMALL = ModelConfig(block_size=32, vocab_size=300, n_layer=2, n_head=2, n_embd=16, n_hidden=40)


def make_model() -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(SMALL).eval()


def test_parameter_names_are_those_of_hugging_face_llama_plus_the_key_smear():
    layer = [
        "input_layernorm.weight",
        "self_attn.q_proj.weight",
        "self_attn.k_proj.weight",
        "self_attn.v_proj.weight",
        "self_attn.o_proj.weight",
        "post_attention_layernorm.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "mlp.down_proj.weight",
    ]
    llama = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    llama |= {f"model.layers.{i}.{name}" for i in range(2) for name in layer}
    smears = {f"model.layers.{i}.self_attn.k_smear" for i in range(2)}
    assert set(make_model().state_dict()) == llama | smears
    plain = TinyGPT(dataclasses.replace(SMALL, smear_keys=False))
    assert set(plain.state_dict()) == llama


def test_there_are_no_biases_and_the_embeddings_are_tied():
    model = make_model()
    assert not any(name.endswith("bias") for name in model.state_dict())
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def test_a_smeared_key_mixes_each_position_with_the_one_before():
    keys = torch.arange(8.0).view(1, 2, 4, 1)  # (B, nh, L, hs)
    out = smear(keys, torch.tensor([0.0, 100.0]))  # head 0: half-half; head 1: own key only
    assert out[0, 0, :, 0].tolist() == [0.0, 0.5, 1.5, 2.5]
    torch.testing.assert_close(out[0, 1], keys[0, 1])


def test_rotary_scores_depend_only_on_the_distance_between_positions():
    cos, sin = rotary_tables(SMALL)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(i: int, j: int) -> float:
        qi = apply_rotary(q, cos[i].view(1, 1, 1, -1), sin[i].view(1, 1, 1, -1))
        kj = apply_rotary(k, cos[j].view(1, 1, 1, -1), sin[j].view(1, 1, 1, -1))
        return float((qi * kj).sum())

    assert score(5, 2) == pytest.approx(score(20, 17), abs=1e-5)
    assert score(5, 2) != pytest.approx(score(5, 3), abs=1e-3)


def test_cached_forward_matches_uncached_token_by_token():
    model = make_model()
    idx = torch.randint(0, 300, (1, 20))
    full = model(idx)
    cache = model.new_cache(1)
    parts = [model(idx[:, :7], cache), model(idx[:, 7:8], cache), model(idx[:, 8:], cache)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.lengths == [20]


def test_rollback_then_rewrite_equals_never_having_written():
    model = make_model()
    idx = torch.randint(0, 300, (1, 12))
    wrong = torch.randint(0, 300, (1, 5))
    cache = model.new_cache(1)
    model(idx[:, :8], cache)
    model(wrong, cache)  # rejected proposals
    cache.crop(8)
    rolled = model(idx[:, 8:], cache)
    torch.testing.assert_close(rolled, model(idx)[:, 8:], atol=1e-5, rtol=1e-5)


def test_batched_cache_with_different_lengths_matches_each_sequence_alone():
    model = make_model()
    a, b = torch.randint(0, 300, (1, 10)), torch.randint(0, 300, (1, 10))
    cache = model.new_cache(2)
    model(torch.cat([a[:, :6], b[:, :6]]), cache)
    cache.crop(torch.tensor([6, 4]))  # sequence b rolled back two positions
    out = model(torch.cat([a[:, 6:9], b[:, 4:7]]), cache)
    torch.testing.assert_close(out[0], model(a[:, :9])[0, 6:9], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1], model(b[:, :7])[0, 4:7], atol=1e-5, rtol=1e-5)


def test_crop_refuses_to_grow_or_go_negative():
    cache = make_model().new_cache(1)
    with pytest.raises(ValueError, match="lengths"):
        cache.crop(1)
    with pytest.raises(ValueError, match="lengths"):
        cache.crop(-1)


def test_forward_refuses_sequences_longer_than_the_context_window():
    model = make_model()
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 33, dtype=torch.long))
    cache = model.new_cache(1)
    model(torch.zeros(1, 30, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 3, dtype=torch.long), cache)


@pytest.mark.parametrize(
    "field", ["n_layer", "n_head", "n_embd", "block_size", "vocab_size", "n_hidden"]
)
def test_config_rejects_non_positive_sizes(field):
    with pytest.raises(ValueError, match=field):
        ModelConfig(**{field: 0})


def test_config_rejects_heads_that_rotary_cannot_split_in_half():
    with pytest.raises(ValueError, match="n_embd"):
        ModelConfig(n_embd=10, n_head=3)
    with pytest.raises(ValueError, match="n_embd"):
        ModelConfig(n_embd=12, n_head=4)  # head size 3 is odd
