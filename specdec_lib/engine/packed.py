"""Prepacked weights: a CPU pass over a few positions that costs little more than one.

Speculation's premise is that checking k drafted tokens in one pass costs little more
than decoding one, because a small pass is limited by reading the weights, and the
weights are read once whatever the number of rows. On this course's CPU that premise
depends on the matrix-multiply kernel. PyTorch sends a float32 ``F.linear`` to MKL's
GEMM, which (timed alone at SmolLM2's shapes while writing this) took about as long for
2 rows as for two 1-row products:
on SmolLM2-135M, after a 256-token context, a pass over 2 positions cost 1.64 and 1.69
plain steps in two quiet runs, one over 5 positions 1.65 and 1.77
(``benchmarks/smollm2_pass_cost.py``, ``specdec_lib/results/smollm2_pass_cost*.json``).
oneDNN with the weight *prepacked* once into its own blocked layout (the call
``torch.utils.mkldnn.MkldnnLinear`` makes, without TorchScript) cost, in the same runs,
1.27 and 1.20 steps for 2 positions and 1.32 and 1.33 for 5, with the one-position pass
unchanged (1.01 and 0.97 times the default's). Cheaper, not free: these are whole passes,
attention and the rest included, not the matrix products alone. CPU engines make the
same move: llama.cpp repacks quantised weights at load time into the layout its CPU
kernels read (ggml-org/llama.cpp #9921, #12332; ``--no-repack`` turns it off).

:func:`prepack` swaps every ``nn.Linear`` of a model for a :class:`PackedLinear` holding
its weight in oneDNN's layout. It is for inference: a packed weight is a buffer, not a
parameter, so nothing trains it, and the model's ``state_dict`` no longer holds it (load
weights first, then pack). The tied output layer gets its own packed copy while the
embedding keeps the dense one (a lookup needs rows), which costs one more copy of the
output matrix (113 MB on SmolLM2). Results agree with the dense kernel to float32
rounding, not bit for bit: a different kernel sums in a different order.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["PackedLinear", "is_packed", "prepack"]


class PackedLinear(nn.Module):
    """``nn.Linear`` without bias, its weight prepacked for oneDNN; inference only."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        if linear.bias is not None:
            raise ValueError("linear must have no bias (the course's models have none)")
        self.in_features, self.out_features = linear.in_features, linear.out_features
        packed = linear.weight.detach().float().to_mkldnn()
        self.register_buffer("weight", packed, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float().contiguous().to_mkldnn()
        out = torch._C._nn.mkldnn_linear(rows, self.weight, None).to_dense()
        return out.reshape(*x.shape[:-1], self.out_features)


def is_packed(model: nn.Module) -> bool:
    """Whether :func:`prepack` has packed ``model``'s linear layers."""
    return any(isinstance(m, PackedLinear) for m in model.modules())


def prepack(model: nn.Module) -> nn.Module:
    """Pack every ``nn.Linear`` of ``model`` in place and return it, in eval mode.

    Raises ``RuntimeError`` where PyTorch was built without oneDNN (then keep the dense
    model: it computes the same, more slowly for a few rows)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not torch.backends.mkldnn.is_available():
        raise RuntimeError("this PyTorch has no oneDNN (mkldnn); use the dense model")
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                setattr(module, name, PackedLinear(child))
    return model.eval()
