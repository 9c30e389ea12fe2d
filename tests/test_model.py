import pytest
import torch

from specdec_lib import ModelConfig, TinyGPT

SMALL = ModelConfig(block_size=32, n_layer=2, n_head=2, n_embd=16)


def make_model() -> TinyGPT:
    torch.manual_seed(0)
    return TinyGPT(SMALL).eval()


def test_parameter_names_follow_gpt2_layout():
    names = set(make_model().state_dict())
    for expected in [
        "transformer.wte.weight",
        "transformer.wpe.weight",
        "transformer.h.0.ln_1.weight",
        "transformer.h.0.attn.c_attn.weight",
        "transformer.h.0.attn.c_proj.weight",
        "transformer.h.0.ln_2.bias",
        "transformer.h.0.mlp.c_fc.weight",
        "transformer.h.1.mlp.c_proj.bias",
        "transformer.ln_f.weight",
        "lm_head.weight",
    ]:
        assert expected in names


def test_embeddings_are_tied():
    model = make_model()
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()


def test_cached_forward_matches_uncached_token_by_token():
    model = make_model()
    idx = torch.randint(0, 256, (1, 20))
    full = model(idx)
    cache = model.new_cache(1)
    parts = [model(idx[:, :7], cache), model(idx[:, 7:8], cache), model(idx[:, 8:], cache)]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.lengths.tolist() == [20]


def test_rollback_then_rewrite_equals_never_having_written():
    model = make_model()
    idx = torch.randint(0, 256, (1, 12))
    wrong = torch.randint(0, 256, (1, 5))
    cache = model.new_cache(1)
    model(idx[:, :8], cache)
    model(wrong, cache)  # rejected proposals
    cache.crop(8)
    rolled = model(idx[:, 8:], cache)
    torch.testing.assert_close(rolled, model(idx)[:, 8:], atol=1e-5, rtol=1e-5)


def test_batched_cache_with_different_lengths_matches_each_sequence_alone():
    model = make_model()
    a, b = torch.randint(0, 256, (1, 10)), torch.randint(0, 256, (1, 10))
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


@pytest.mark.parametrize("field", ["n_layer", "n_head", "n_embd", "block_size", "vocab_size"])
def test_config_rejects_non_positive_sizes(field):
    with pytest.raises(ValueError, match=field):
        ModelConfig(**{field: 0})


def test_config_rejects_embedding_not_divisible_by_heads():
    with pytest.raises(ValueError, match="n_embd"):
        ModelConfig(n_embd=10, n_head=3)
