"""The course's models in Hugging Face transformers; transformers' drafting rules in the engine.

Why this exists: a course that builds speculative decoding should show that what it built
agrees with a library people deploy, on the same weights. TinyGPT's parameter names are
``LlamaForCausalLM``'s (see :mod:`specdec_lib.engine.model`), so :func:`export_hf` writes a
Hugging Face model folder (``config.json`` and ``model.safetensors``) that transformers'
stock class loads with nothing downloaded.

The draft is plain Llama. The target is not quite: its attention *smears* each key with the
key before it (``ModelConfig.smear_keys``). transformers lets a model swap its attention
function through a public registry, ``AttentionInterface``, chosen by
``attn_implementation``. :func:`key_smear_attention` is that function: it applies the
course's own :func:`~specdec_lib.engine.model.smear` to the keys it is given (every cached
key, rotated, as the course's engine smears them) and hands over to transformers' SDPA
attention. The per-head mixing logits travel in ``config.json`` (``key_smear_logits``),
together with ``attn_implementation``, so a smeared folder loaded without the registration
fails loudly instead of running as plain Llama.

The drafters replay transformers' rules with the course's engine, so that both sides'
target passes can be counted and compared one for one:

* :class:`LeftmostNgramDrafter` is ``PromptLookupCandidateGenerator``'s rule: suffixes from
  ``max_matching_ngram_size`` down to 1, the *first* occurrence from the left that has a
  continuation (the course's :class:`~specdec_lib.engine.drafters.NgramDrafter` takes the
  longest suffix and its *latest* occurrence).
* :class:`ConfidenceStopDrafter` is the assistant's confidence stop: draft greedily, and stop
  after the first token whose draft probability falls below the threshold (transformers'
  ``ConfidenceCriteria``; the token that tripped it is kept).

transformers is imported only inside the functions that need it: the rest of the library
does not depend on it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from specdec_lib.checks import check_ids, check_int, check_real
from specdec_lib.engine.drafters import (
    DraftModelDrafter,
    LibraryDrafter,
    NgramDrafter,
    Proposal,
    one_hot_probs,
)
from specdec_lib.engine.model import TinyGPT, smear
from specdec_lib.engine.sampling import SamplingParams

KEY_SMEAR_ATTENTION = "tinygpt_key_smear"
_CONFIG_FILE = "config.json"
_WEIGHTS_FILE = "model.safetensors"


def hf_config(model: TinyGPT) -> dict[str, Any]:
    """The ``config.json`` of a ``LlamaForCausalLM`` with ``model``'s shape.

    No token is an end-of-sequence token: the course's generators always return exactly
    ``max_tokens`` tokens, and so must transformers' for the outputs to be compared.
    """
    _check_model(model)
    c = model.config
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": c.vocab_size,
        "hidden_size": c.n_embd,
        "intermediate_size": c.n_hidden,
        "num_hidden_layers": c.n_layer,
        "num_attention_heads": c.n_head,
        "num_key_value_heads": c.kv_heads,
        "head_dim": c.n_embd // c.n_head,
        "max_position_embeddings": c.block_size,
        "hidden_act": "silu",
        "rms_norm_eps": c.rms_norm_eps,
        "rope_parameters": {"rope_type": "default", "rope_theta": c.rope_theta},
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": True,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "dtype": "float32",
    }
    if c.smear_keys:
        config["attn_implementation"] = KEY_SMEAR_ATTENTION
        config["key_smear_logits"] = [
            layer.self_attn.k_smear.detach().tolist() for layer in model.model.layers
        ]
    return config


def export_hf(model: TinyGPT, directory: str | Path) -> Path:
    """Write ``model`` as a Hugging Face model folder in ``directory``; return its path.

    ``model.safetensors`` holds every Llama tensor under TinyGPT's own names (the tied
    ``lm_head`` is stored once, as the embedding, and ``tie_word_embeddings`` ties it back).
    The key-smear logits go to ``config.json``, not the weights file, because the stock
    ``LlamaAttention`` has no parameter to load them into.
    """
    from safetensors.torch import save_file

    _check_model(model)
    folder = Path(directory)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"directory must be a folder, got the file {str(folder)!r}")
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {
        name: tensor.detach().contiguous().clone()
        for name, tensor in model.state_dict().items()
        if name != "lm_head.weight" and not name.endswith("k_smear")
    }
    save_file(tensors, str(folder / _WEIGHTS_FILE), metadata={"format": "pt"})
    (folder / _CONFIG_FILE).write_text(json.dumps(hf_config(model), indent=2) + "\n")
    return folder


def key_smear_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """transformers' SDPA attention on smeared keys: the one change the target makes to Llama.

    ``key`` (B, nh, L, hs) holds every key the query may see, the cached ones included and
    already rotated, exactly what the course's ``Attention`` smears; so smearing here gives
    the same result with or without a cache, and the cache itself stays plain. The shares
    become a tensor once per layer, not on every pass: work the stock class does not do
    would otherwise be charged to transformers when the two engines are timed.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    logits = getattr(module, "key_smear_logits", None)
    if logits is None or logits.dtype != key.dtype:
        logits = torch.tensor(module.config.key_smear_logits[module.layer_idx], dtype=key.dtype)
        module.key_smear_logits = logits
    key = smear(key, logits)  # (B, nh, L, hs), as in specdec_lib.engine.model.Attention
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def register_key_smear() -> None:
    """Register :func:`key_smear_attention` under ``KEY_SMEAR_ATTENTION``, with SDPA's mask.

    Two registries: ``AttentionInterface`` picks the attention function, and
    ``AttentionMaskInterface`` the mask builder; a name without a mask builder gets no
    mask at all, and a cached pass over several new tokens would then be masked wrongly.
    """
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    AttentionInterface.register(KEY_SMEAR_ATTENTION, key_smear_attention)
    AttentionMaskInterface.register(KEY_SMEAR_ATTENTION, sdpa_mask)


def load_hf(directory: str | Path) -> torch.nn.Module:
    """Load a folder written by :func:`export_hf` with transformers' stock ``LlamaForCausalLM``.

    A plain folder loads with SDPA attention; a smeared one with :func:`key_smear_attention`
    (registered here first). Eval mode, float32, nothing downloaded.
    """
    from transformers import LlamaForCausalLM
    from transformers.utils import logging

    logging.disable_progress_bar()  # a loading bar per call, on stderr, in every notebook
    logging.set_verbosity_error()  # and advice about generation arguments meant for hub models
    folder = Path(directory)
    if not (folder / _CONFIG_FILE).is_file() or not (folder / _WEIGHTS_FILE).is_file():
        raise ValueError(
            f"directory must hold {_CONFIG_FILE} and {_WEIGHTS_FILE}, got {str(folder)!r}"
        )
    config = json.loads((folder / _CONFIG_FILE).read_text())
    attention = config.get("attn_implementation", "sdpa")
    if attention == KEY_SMEAR_ATTENTION:
        register_key_smear()
    model = LlamaForCausalLM.from_pretrained(
        folder, attn_implementation=attention, dtype=torch.float32, local_files_only=True
    )
    return model.eval()


def transformers_prompt_lookup(
    context: Sequence[int], k: int, top_p: float | None = None, vocab_size: int | None = None
) -> list[int]:
    """What the installed transformers' ``PromptLookupCandidateGenerator`` proposes after
    ``context`` (``max_matching_ngram_size`` 2), screened as under ``top_p`` if it is given.

    The screen is transformers' own: under sampling, the generator runs the request's logits
    processors on all-ones logits and cuts the proposal at the first token they forbid.
    """
    from transformers import LogitsProcessorList, TopPLogitsWarper
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

    check_int("k", k)
    ids = check_ids("context", context, vocab_size if vocab_size is not None else 2**31 - 1)
    if len(ids) < 2:
        raise ValueError(f"context must hold at least 2 tokens, got {len(ids)}")
    processors = None
    if top_p is not None:
        if vocab_size is None:
            raise ValueError("vocab_size must be given with top_p")
        _check_top_p(top_p)
        processors = LogitsProcessorList([TopPLogitsWarper(top_p)])
    generator = PromptLookupCandidateGenerator(
        num_output_tokens=k,
        max_length=len(ids) + k + 2,
        logits_processor=processors,
        vocab_size=vocab_size,
    )
    return generator.get_candidates(torch.tensor([ids]))[0][0, len(ids) :].tolist()


def topp_forbidden_ids(top_p: float, vocab_size: int) -> list[int]:
    """The token ids transformers' prompt-lookup screen forbids under ``top_p``, in id order.

    All-ones logits are a uniform distribution, so top-p keeps the smallest set of tokens
    holding ``top_p`` of the mass and forbids the rest: about ``(1 - top_p) * vocab_size``
    ids, which ones decided by how the sort orders ties, whatever the context.
    """
    from transformers import LogitsProcessorList, TopPLogitsWarper

    _check_top_p(top_p)
    check_int("vocab_size", vocab_size)
    warped = LogitsProcessorList([TopPLogitsWarper(top_p)])(
        torch.zeros(1, 1, dtype=torch.long), torch.ones(1, vocab_size)
    )
    return torch.isinf(warped[0]).nonzero().flatten().tolist()


class ForwardCounter:
    """Counts a module's forward calls, through a forward hook (``with`` closes it).

    Hooking the module itself, not a generator's bookkeeping, counts the same thing on
    both sides: target forward passes, whoever makes them.
    """

    def __init__(self, module: torch.nn.Module) -> None:
        if not isinstance(module, torch.nn.Module):
            raise ValueError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        self.calls = 0
        self._handle = module.register_forward_hook(self._hook)

    def _hook(self, *_: Any) -> None:
        self.calls += 1

    def close(self) -> None:
        self._handle.remove()

    def __enter__(self) -> ForwardCounter:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


def hf_generate(
    model: torch.nn.Module,
    prompt_token_ids: Sequence[int],
    max_new_tokens: int,
    assistant_model: torch.nn.Module | None = None,
    **generate_kwargs: Any,
) -> tuple[list[int], int, int]:
    """``model.generate`` on one prompt: its new tokens, the model's and the assistant's
    forward passes (each counted by a :class:`ForwardCounter`).

    Greedy unless ``generate_kwargs`` says otherwise; no token ends generation early (the
    exported configs name none), so exactly ``max_new_tokens`` come back.
    """
    check_int("max_new_tokens", max_new_tokens)
    ids = check_ids("prompt_token_ids", prompt_token_ids, model.config.vocab_size)
    if not ids:
        raise ValueError("prompt_token_ids must contain at least 1 token, got an empty prompt")
    x = torch.tensor([ids])
    kwargs = {"do_sample": False, **generate_kwargs}
    if assistant_model is not None:
        kwargs["assistant_model"] = assistant_model
    counted = [model] + ([assistant_model] if assistant_model is not None else [])
    counters = [ForwardCounter(m) for m in counted]
    try:
        with torch.inference_mode():
            out = model.generate(
                x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens, **kwargs
            )
    finally:
        for counter in counters:
            counter.close()
    new = out[0, len(ids) :].tolist()
    return new, counters[0].calls, counters[1].calls if assistant_model is not None else 0


class LeftmostNgramDrafter(NgramDrafter):
    """transformers' prompt lookup: the first occurrence from the left, not the latest.

    Suffix lengths run from ``max_n`` (transformers' ``max_matching_ngram_size``, 2 unless
    set) down to ``min_n`` (always 1 there); for the first length that occurs earlier with
    at least one token after it, the leftmost such occurrence wins.
    """

    def __init__(self, max_n: int = 2, min_n: int = 1, vocab_size: int | None = None) -> None:
        if vocab_size is None:
            super().__init__(max_n, min_n)
        else:
            super().__init__(max_n, min_n, vocab_size)
        self.name = f"leftmost n-gram (n={min_n}..{max_n})"

    def find_match(self, context: Sequence[int]) -> tuple[int, int] | None:
        """``(start, n)`` of the leftmost earlier occurrence, with a continuation, of the
        longest suffix that has one; ``None`` if no suffix length has one."""
        L = len(context)
        data = np.asarray(context, dtype=">u4").tobytes()  # token i is data[4i : 4i + 4]
        for n in range(min(self.max_n, L - 1), self.min_n - 1, -1):
            suffix = data[4 * (L - n) :]
            start = 0
            # The occurrence must end before the last token, so a token follows it.
            while (hit := data.find(suffix, start, 4 * (L - 1))) >= 0:
                if hit % 4 == 0:
                    return hit // 4, n
                start = hit + 1  # a hit across a token boundary: look further right
        return None


class ConfidenceStopDrafter(LibraryDrafter):
    """A draft model that stops drafting after its first token with probability < threshold.

    transformers' assistant does this by default (``assistant_confidence_threshold`` 0.4,
    its ``ConfidenceCriteria``): the token whose probability fell below the threshold is
    still proposed, and drafting stops after it. Greedy only, as there: the probability is
    the draft's softmax of its raw logits. Each token costs one cached pass of the course's
    :class:`~specdec_lib.engine.drafters.DraftModelDrafter`.
    """

    def __init__(self, draft_model: TinyGPT, threshold: float = 0.4) -> None:
        self.threshold = check_real(
            "threshold", threshold, "a number in [0, 1]", lambda v: 0.0 <= v <= 1.0
        )
        self.inner = DraftModelDrafter(draft_model)
        self.vocab_size = draft_model.config.vocab_size
        self.name = f"draft model, confidence stop {self.threshold:g}"

    @torch.inference_mode()
    def draft(
        self, context: list[int], k: int, params: SamplingParams, generator: torch.Generator | None
    ) -> Proposal:
        if not params.greedy:
            raise ValueError("params must be greedy (temperature=0) for the confidence stop")
        tokens: list[int] = []
        for _ in range(k):
            # One cached draft pass (the course drafter's own cache and crop logic).
            probs = torch.softmax(self.inner.logits_after(context + tokens).double(), -1)
            tokens.append(int(probs.argmax()))
            if probs[tokens[-1]] < self.threshold:
                break
        return Proposal(tokens, one_hot_probs(tokens, self.vocab_size), draft_passes=len(tokens))


def _check_top_p(top_p: float) -> None:
    check_real("top_p", top_p, "a number in (0, 1]", lambda v: 0.0 < v <= 1.0)


def _check_model(model: TinyGPT) -> None:
    if not isinstance(model, TinyGPT):
        raise ValueError(f"model must be a TinyGPT, got {type(model).__name__}")
