"""Chapter 13's early exit: how often each depth of a model already guesses what its last
layer will say.

An early-exit drafter (:func:`~specdec_lib.engine.model.early_exit`) reads the target's
hidden state after ``layers`` of its decoder layers through the target's own final norm
and output layer. Its first drafted token is accepted exactly when that guess equals the
token the target writes next. So the acceptance at draft position 0 can be read, for every
depth at once, from one uncached pass over text the target wrote: capture each layer's
output, score it with the final norm and output layer, and count where the argmax agrees
with the next token. Later draft positions depend on the drafter's own earlier guesses, so
they need the drafter run for real; position 0 needs only this pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specdec_lib.checks import check_int
from specdec_lib.engine.model import TinyGPT


@torch.inference_mode()
def exit_agreement(model: TinyGPT, tokens: Sequence[int], start: int) -> list[float]:
    """Share of the positions ``start - 1 .. len(tokens) - 2`` where the argmax after
    layer ``d`` (for d = 1 .. n_layer) equals the next token of ``tokens``.

    ``tokens`` is a prompt followed by what the target wrote after it greedily, and
    ``start`` is where the writing begins; the last entry (all layers) is then 1.0,
    which checks that the text is the target's greedy output.
    """
    n = len(tokens)
    if check_int("start", start) >= n:
        raise ValueError(f"start must lie in [1, {n - 1}], got {start}")
    outputs: list[torch.Tensor] = []
    hooks = [
        layer.register_forward_hook(lambda _m, _i, out: outputs.append(out))
        for layer in model.model.layers
    ]
    try:
        model(torch.tensor([list(tokens)]))
    finally:
        for hook in hooks:
            hook.remove()
    nxt = torch.tensor(list(tokens[start:]))  # the tokens the target wrote
    shares = []
    for x in outputs:
        guess = model.lm_head(model.model.norm(x[0, start - 1 : n - 1])).argmax(-1)
        shares.append(float((guess == nxt).double().mean()))
    return shares
