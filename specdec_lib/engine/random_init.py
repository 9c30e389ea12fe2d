"""Random initial weights that are the same on every CPU.

An untrained model is a control the course runs on every reader's machine (chapter 7's
distribution test, the mutant battery), so it must be the same model everywhere.
"""

from __future__ import annotations

import math

import torch

__all__ = ["normal_"]


def _box_muller(u: torch.Tensor) -> torch.Tensor:
    """torch's ``normal_fill_16`` on blocks of 16 uniforms, in float64: (m*16,) -> (m*16,)."""
    u = u.double().view(-1, 2, 8)  # (m, 2, 8): first halves give radii, second halves angles
    radius, theta = (-2 * torch.log(1 - u[:, 0])).sqrt(), 2 * math.pi * u[:, 1]
    return torch.stack([radius * theta.cos(), radius * theta.sin()], 1).flatten()


def normal_(p: torch.Tensor, std: float) -> None:
    """``nn.init.normal_(p, std=std)``, the same on every CPU.

    torch fills ``p`` with uniforms from the global generator (the same numbers on any CPU)
    and turns each block of 16 into normals by Box-Muller, in float32 with the CPU's
    vector kernels, whose log, cos and sin round differently under AVX-512, AVX2 and
    none: an untrained model would differ from one CPU to the next. Here the same
    uniforms go through the same transform in float64, rounded once. ``p`` needs at
    least 16 elements (every matrix here has thousands); torch redraws a ragged tail
    as one more block of 16.
    """
    n = p.numel()
    if n < 16:  # torch draws fewer than 16 normals another way, which this does not follow
        raise ValueError(f"p must have at least 16 elements, got {n}")
    normals = _box_muller(torch.rand(n)[: n - n % 16])
    if n % 16:
        normals = torch.cat([normals[: n - 16], _box_muller(torch.rand(16))])
    with torch.no_grad():
        p.copy_(normals.view_as(p) * std)
