"""Sampling parameters and the one function that turns logits into a distribution.

Speculative sampling is exact only if target, draft and verifier agree on what
"temperature 0.7, top-k 50, top-p 0.9" means, so all three call :func:`process_logits`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from specdec_lib.checks import check_sampling_params

# Below this, logits / temperature overflows float64 for ordinary logits and the
# probabilities come out NaN; a temperature that small is greedy in all but name.
MIN_TEMPERATURE = 1e-6


@dataclass(frozen=True)
class SamplingParams:
    """How to pick each next token.

    ``temperature=0`` means greedy (argmax). ``top_k=None`` and ``top_p=1.0``
    switch those filters off. ``max_tokens`` is the number of new tokens to emit.
    """

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float = 1.0
    max_tokens: int = 64

    def __post_init__(self) -> None:
        for name, value in check_sampling_params(self, MIN_TEMPERATURE).items():
            object.__setattr__(self, name, value)  # plain Python numbers, even from NumPy

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def process_logits(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Probabilities (float64, rows sum to 1) after temperature, top-k and top-p.

    Works on any leading shape: ``(..., V) -> (..., V)``. Greedy returns the
    one-hot of the argmax, so greedy is just the temperature-0 limit of sampling
    and the same verification code handles both.
    """
    logits = logits.detach().to(torch.float64)
    if params.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(torch.float64)
    logits = logits / params.temperature
    if params.top_k is not None and params.top_k < logits.shape[-1]:
        kth = torch.topk(logits, params.top_k, dim=-1).values[..., -1:]  # (..., 1)
        logits = logits.masked_fill(logits < kth, -math.inf)
    probs = torch.softmax(logits, dim=-1)
    if params.top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # Keep a token if the mass strictly before it is still short of top_p:
        # the smallest prefix whose mass reaches top_p, never empty.
        before = sorted_probs.cumsum(-1) - sorted_probs
        keep_sorted = before < params.top_p
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = probs * keep
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def argmax(logits: torch.Tensor) -> list[int] | int:
    """The index of each row's first maximum (an int for one row), ties and NaN to the first.
    NumPy's, because on CPU torch's takes ten times as long for a round's (8, 4253) rows."""
    return logits.numpy(force=True).argmax(-1).tolist()


def sample(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """Draw one token id from a 1-D distribution."""
    return int(torch.multinomial(probs, 1, generator=generator))
