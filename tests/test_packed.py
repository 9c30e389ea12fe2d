"""Prepacked oneDNN weights (engine/packed.py): the same model, a different kernel."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from specdec_lib import SamplingParams, generate, speculative_generate
from specdec_lib.engine.drafters import NgramDrafter
from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.engine.packed import PackedLinear, is_packed, prepack
from specdec_lib.engine.smollm2 import SmolLM2Tokenizer, load_smollm2


def _tiny(seed: int = 0) -> TinyGPT:
    torch.manual_seed(seed)
    return TinyGPT(ModelConfig(vocab_size=97, n_layer=2, n_head=2, n_embd=32, block_size=64))


def test_a_packed_model_scores_as_the_dense_one_to_float_rounding():
    dense = _tiny().eval()
    packed = prepack(_tiny())
    ids = torch.randint(0, 97, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = dense(ids), packed(ids)
        cache_a, cache_b = dense.new_cache(3), packed.new_cache(3)
        step_a, step_b = dense(ids[:, :5], cache_a), packed(ids[:, :5], cache_b)
    assert torch.allclose(a, b, atol=1e-5)
    assert torch.allclose(step_a, step_b, atol=1e-5)
    assert isinstance(dense.lm_head, nn.Linear)  # packing another model left this one alone


def test_every_linear_is_packed_and_the_embedding_stays_dense():
    model = prepack(_tiny())
    assert is_packed(model) and not is_packed(_tiny())
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    assert isinstance(model.lm_head, PackedLinear)
    assert model.model.embed_tokens.weight.layout == torch.strided
    assert not model.training


def test_greedy_speculation_on_a_packed_tinygpt_is_its_greedy_decoding():
    model = prepack(_tiny())
    params = SamplingParams(max_tokens=24)
    for seed in range(3):
        prompt = torch.randint(0, 97, (12,), generator=torch.Generator().manual_seed(seed)).tolist()
        want = generate(model, prompt, params)
        got = speculative_generate(model, NgramDrafter(vocab_size=97), prompt, params, k=3)
        assert got == want


def test_packing_refuses_what_it_cannot_pack():
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        prepack("not a model")
    with pytest.raises(ValueError, match="linear must have no bias"):
        PackedLinear(nn.Linear(4, 4, bias=True))
    with pytest.raises(ValueError, match="prepacked must be True or False"):
        load_smollm2(prepacked="yes")


def test_packed_smollm2_writes_what_the_dense_one_writes():
    tok = SmolLM2Tokenizer()
    dense, packed = load_smollm2(), load_smollm2(prepacked=True)
    params = SamplingParams(max_tokens=16)
    for text in ("The capital of France is", "def add(a, b):\n    return a + b\n\n# again:\n"):
        ids = tok.encode(text)
        want = generate(dense, ids, params)
        assert generate(packed, ids, params) == want
        drafter = NgramDrafter(vocab_size=packed.config.vocab_size)
        assert speculative_generate(packed, drafter, ids, params, k=4) == want
