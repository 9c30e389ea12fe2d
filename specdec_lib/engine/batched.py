"""Batched decoding and batched speculation: B requests share each forward pass, each with
its own length in the shared cache, so acceptance and rollback are per row. Batched
speculation *is* :func:`~specdec_lib.engine.generate.speculate`; it stops paying as B grows.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specdec_lib.checks import check_prompts
from specdec_lib.engine.generate import PAD_ID, next_token, speculate
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams


@torch.inference_mode()
def generate_batch(
    model: TinyGPT,
    prompts: Sequence[Sequence[int]],
    params: SamplingParams,
    generator: torch.Generator | None = None,
) -> list[list[int]]:
    """Plain decoding of B requests together: one forward pass per step for all of them."""
    seqs = check_prompts(prompts, model.config, params.max_tokens)
    width = max(len(s) for s in seqs)
    cache = model.new_cache(len(seqs))
    scored = width - min(len(s) for s in seqs) + 1  # down to the shortest prompt's last token
    ids = torch.tensor([s + [PAD_ID] * (width - len(s)) for s in seqs])
    logits = model(ids, cache, logits_to_keep=scored)
    cache.crop([len(s) for s in seqs])  # drop the padding
    logits = logits[torch.arange(len(seqs)), [len(s) - width + scored - 1 for s in seqs]]
    outs: list[list[int]] = [[] for _ in seqs]
    while True:
        for b, out in enumerate(outs):
            out.append(next_token(logits[b], params, generator))
        if len(outs[0]) == params.max_tokens:
            return outs
        logits = model(torch.tensor([[o[-1]] for o in outs]), cache)[:, -1]


speculative_generate_batch = speculate  # the one loop, by the name of what it does here
