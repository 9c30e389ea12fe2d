"""Draft heads on the target: Medusa's heads (Cai et al. 2024), no second model.

Head i (i = 1..n) reads the target's final hidden state h at the position that produced
the pending token, and guesses the token i places after the pending one: one residual
block, h + SiLU(W_i h + b_i), then the target's own output layer (shared, frozen). Its
W_i starts at zero, so an untrained head is the target's own next-token guess, and
training moves it to guess further ahead. The heads cost one small matrix product each
and no pass of anything: the hidden state is a by-product of the verification pass.

Why Medusa's heads and not EAGLE's drafter (Li et al. 2024): EAGLE runs a one-layer
decoder autoregressively over (feature, token) pairs, which is more accurate but is a
second model with its own cache, its own passes and its own tree drafting; Medusa's
heads are independent of one another (a tree is the product of each head's top
choices), train in minutes on the frozen target's features, and show the idea of
drafting from the target's own state with nothing else in the way. What they cannot do
is condition a later guess on an earlier one; the chapter measures what that costs.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from specdec_lib.checks import check_int
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.tree import GrowingTree, TreeShape
from specdec_lib.engine.tree_decode import TreeDrafter
from specdec_lib.engine.weights import WEIGHTS_DIR, load_verified, read_manifest

HEADS_FILE = "heads.safetensors"
HEADS_INFO = "heads.json"  # beside, not in, the manifest: the heads belong to one target


class MedusaHeads(nn.Module):
    """``n_heads`` residual blocks over the target's hidden state, sharing its output layer
    (kept outside the module's parameters: the target's weights stay the target's)."""

    def __init__(self, target: TinyGPT, n_heads: int) -> None:
        super().__init__()
        check_int("n_heads", n_heads)
        width = target.config.n_embd
        self.blocks = nn.ModuleList(nn.Linear(width, width) for _ in range(n_heads))
        for block in self.blocks:
            nn.init.zeros_(block.weight)
            nn.init.zeros_(block.bias)
        self._lm_head = [target.lm_head]  # a list, so it is not registered as a submodule

    @property
    def n_heads(self) -> int:
        return len(self.blocks)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits (n_heads, ..., V) from final hidden states (..., n_embd)."""
        head = self._lm_head[0]
        return torch.stack([head(hidden + F.silu(block(hidden))) for block in self.blocks])


class HeadsTreeDrafter(TreeDrafter):
    """Drafts a static token tree from the heads, reading the hidden state the last target
    pass left for this request (:func:`~specdec_lib.engine.generate.speculate`
    hands it over after each round; before the first there is none, and the tree is empty).

    A node at depth d takes head d's guess of rank r (its rank path's last entry): greedy,
    the head's r-th likeliest token; sampled, the r-th draw without replacement under its
    parent, recorded with the distribution it was drawn from. A head's guess for a depth
    does not depend on the path above it: every parent at a depth gets the same candidates.
    """

    reads_hidden = True

    def __init__(self, heads: MedusaHeads, shape: TreeShape, name: str = "") -> None:
        if shape.depth > heads.n_heads:
            raise ValueError(
                f"shape must be at most {heads.n_heads} deep (one head a depth), got {shape.depth}"
            )
        self.heads = heads
        self.shape = shape
        self.name = name or f"Medusa heads ({len(shape)} nodes)"
        self.hidden: torch.Tensor | None = None
        self.hidden_for = -1  # the context length the hidden state belongs to

    def observe(self, hidden: torch.Tensor, context_length: int) -> None:
        """The final hidden states (n, n_embd) of the last positions of a context (or one
        state, (n_embd,)): the heads read the last, which produced the context's last token."""
        self.hidden, self.hidden_for = hidden.reshape(-1, hidden.shape[-1])[-1], context_length

    def fill(self, tree: GrowingTree, context: list[int], max_depth: int) -> None:
        if self.hidden is not None and self.hidden_for == len(context):
            logits = self.heads(self.hidden)  # (n_heads, V)
            paths = [p for p in self.shape.paths if len(p) <= max_depth]
            tree.grow(paths, lambda path: logits[len(path) - 1])


def heads_info(directory: Path = WEIGHTS_DIR) -> dict:
    """What ``python -m specdec_lib.engine.train_heads`` recorded: checksums, recipe, curve."""
    return json.loads((directory / HEADS_INFO).read_text())


def load_heads(target: TinyGPT, directory: Path = WEIGHTS_DIR) -> MedusaHeads:
    """The shipped heads for the shipped ``target``, checksums verified first."""
    info = heads_info(directory)
    if info["target_sha256"] != read_manifest(directory)["target"]["sha256"]:
        raise ValueError(
            "the heads were trained on another target's features: retrain them with "
            "`python -m specdec_lib.engine.train_heads`"
        )
    heads = MedusaHeads(target, info["n_heads"])
    heads.load_state_dict(load_verified(directory / info["file"], info["sha256"], HEADS_INFO))
    return heads.eval()
