"""oneDNN's matmul for the linear layers (engine/onednn.py): the same model, another kernel."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from specdec_lib import SamplingParams, generate, speculative_generate
from specdec_lib.engine.drafters import NgramDrafter
from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.engine.onednn import OneDNNLinear, use_onednn, uses_onednn
from specdec_lib.engine.smollm2 import SmolLM2Tokenizer, load_smollm2


def _tiny(seed: int = 0) -> TinyGPT:
    torch.manual_seed(seed)
    return TinyGPT(ModelConfig(vocab_size=97, n_layer=2, n_head=2, n_embd=32, block_size=64))


def test_a_onednn_model_scores_as_the_dense_one_to_float_rounding():
    dense = _tiny().eval()
    fast = use_onednn(_tiny())
    ids = torch.randint(0, 97, (3, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        a, b = dense(ids), fast(ids)
        cache_a, cache_b = dense.new_cache(3), fast.new_cache(3)
        step_a, step_b = dense(ids[:, :5], cache_a), fast(ids[:, :5], cache_b)
    assert torch.allclose(a, b, atol=1e-5)
    assert torch.allclose(step_a, step_b, atol=1e-5)
    assert isinstance(dense.lm_head, nn.Linear)  # converting another model left this one alone


def test_every_linear_uses_onednn_and_the_embedding_stays_dense():
    model = use_onednn(_tiny())
    assert uses_onednn(model) and not uses_onednn(_tiny())
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    assert isinstance(model.lm_head, OneDNNLinear)
    assert model.model.embed_tokens.weight.layout == torch.strided
    assert not model.training


def test_greedy_speculation_on_a_onednn_tinygpt_is_its_greedy_decoding():
    model = use_onednn(_tiny())
    params = SamplingParams(max_tokens=24)
    for seed in range(3):
        prompt = torch.randint(0, 97, (12,), generator=torch.Generator().manual_seed(seed)).tolist()
        want = generate(model, prompt, params)
        got = speculative_generate(model, NgramDrafter(vocab_size=97), prompt, params, k=3)
        assert got == want


def test_the_conversion_refuses_what_it_cannot_pack():
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        use_onednn("not a model")
    with pytest.raises(ValueError, match="linear must have no bias"):
        OneDNNLinear(nn.Linear(4, 4, bias=True))
    with pytest.raises(ValueError, match="onednn must be True or False"):
        load_smollm2(onednn="yes")


def test_onednn_smollm2_writes_what_the_dense_one_writes():
    tok = SmolLM2Tokenizer()
    dense, fast = load_smollm2(), load_smollm2(onednn=True)
    params = SamplingParams(max_tokens=16)
    for text in ("The capital of France is", "def add(a, b):\n    return a + b\n\n# again:\n"):
        ids = tok.encode(text)
        want = generate(dense, ids, params)
        assert generate(fast, ids, params) == want
        drafter = NgramDrafter(vocab_size=fast.config.vocab_size)
        assert speculative_generate(fast, drafter, ids, params, k=4) == want
