"""oneDNN's inner product for a model's linear layers: a CPU pass over a few positions
that costs less above one position's than PyTorch's default kernel charges.

Speculation's premise is that checking k drafted tokens in one pass costs little more
than decoding one, because a small pass is limited by reading the weights, and the
weights are read once whatever the number of rows. On this course's CPU the premise
depends on the kernel. PyTorch sends a float32 ``F.linear`` to MKL's SGEMM; on
SmolLM2-135M, after a 256-token context, a whole pass over 2 positions cost 1.64 and 1.69
plain steps in two quiet runs, and over 5 positions 1.65 and 1.77
(``benchmarks/smollm2_pass_cost.py``, ``specdec_lib/results/smollm2_kernels*.json``,
its position sweep). With every linear layer run by oneDNN's inner product instead (the weight
converted once to a oneDNN tensor, in its plain row-major layout, and called through
``torch._C._nn.mkldnn_linear``, the call ``torch.utils.mkldnn.MkldnnLinear`` makes), the
same runs measured 1.27 and 1.20 steps for 2 positions and 1.32 and 1.33 for 5, the
one-position pass unchanged (1.01 and 0.97 times the default's). Cheaper, not free, and
measured on whole passes (attention and the rest included), not on the kernels alone.
The weights are not *repacked* into oneDNN's blocked layout, as CPU engines such as
llama.cpp do at load time for their own kernels (ggml-org/llama.cpp #9921, #12332): that
might gain more and is not measured here.

:func:`use_onednn` swaps every ``nn.Linear`` of a model for a :class:`OneDNNLinear`. It is
for inference: the converted weight is a buffer, not a parameter, so nothing trains it, and
the model's ``state_dict`` no longer holds it (load weights first, then convert). The tied
output layer gets its own copy while the embedding keeps the dense one (a lookup needs
rows), which costs one more copy of the output matrix (113 MB on SmolLM2). Results agree
with the default kernel to float32 rounding, not bit for bit: another kernel sums in
another order.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["OneDNNLinear", "use_onednn", "uses_onednn"]


class OneDNNLinear(nn.Module):
    """``nn.Linear`` without bias, computed by oneDNN's inner product; inference only."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        if linear.bias is not None:
            raise ValueError("linear must have no bias (the course's models have none)")
        self.in_features, self.out_features = linear.in_features, linear.out_features
        weight = linear.weight.detach().float().to_mkldnn()
        self.register_buffer("weight", weight, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).float().contiguous().to_mkldnn()
        out = torch._C._nn.mkldnn_linear(rows, self.weight, None).to_dense()
        return out.reshape(*x.shape[:-1], self.out_features)


def uses_onednn(model: nn.Module) -> bool:
    """Whether :func:`use_onednn` has converted ``model``'s linear layers."""
    return any(isinstance(m, OneDNNLinear) for m in model.modules())


def use_onednn(model: nn.Module) -> nn.Module:
    """Run every ``nn.Linear`` of ``model`` through oneDNN, in place; return it in eval mode.

    Raises ``RuntimeError`` where PyTorch was built without oneDNN (then keep the default
    kernel: it computes the same, more slowly for a few rows)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not torch.backends.mkldnn.is_available():
        raise RuntimeError("this PyTorch has no oneDNN (mkldnn); use the default kernel")
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                setattr(module, name, OneDNNLinear(child))
    return model.eval()
