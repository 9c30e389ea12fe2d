"""Chapter 7b's tree rows: one-change mutants of the tree engine, and the tests that hunt them.

Each mutant is a :class:`~specdec_lib.experiments.mutants.Mutant` of chapter 12's engine:
inside :meth:`~specdec_lib.experiments.mutants.Mutant.active` one function of the engine
is rebound wherever the library refers to it (the tree's layout, the sampled walk, or a
child's draw), and everything else is the code that ships. Three tests hunt them:

* :func:`tree_greedy_identity`: greedy tree speculation (trained models, the n-gram trie
  and the draft model's tree) against plain greedy decoding;
* :func:`node_test`: chapter 7's chi-square on the token that leaves one node with two
  sampled children, drawn and walked by the engine's own functions, at a place where the
  target spreads its mass (:class:`NodePlace`);
* :func:`tree_end_to_end_test`: the first two tokens of whole sampled
  ``tree_speculative_generate`` runs, drafts, layout, walk and cache included, against the
  target's exact joint distribution, on two tiny seeded models (:class:`TinyTreeSetup`).

:func:`node_law` is the exact law the node test sees: the mutated walk run on every draw
of the children and every branch of its own draws.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from functools import cached_property

import numpy as np
import torch

from specdec_lib.analysis.hypothesis import distribution_test
from specdec_lib.checks import check_int
from specdec_lib.engine import tree as tree_module
from specdec_lib.engine import tree_decode
from specdec_lib.engine.generate import generate
from specdec_lib.engine.model import Layout, ModelConfig, TinyGPT
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.tree import (
    TokenTree,
    TreeShape,
    draw_child,
    tree_layout,
    typical_walk,
    walk_sampled,
)
from specdec_lib.engine.weights import load_model
from specdec_lib.experiments.mutants import Mutant, rebind
from specdec_lib.experiments.sibling_draws import exact_first_token, sibling_draws
from specdec_lib.text.language import workload_prompts
from specdec_lib.text.tokenizer import Tokenizer

# --- the mutants ------------------------------------------------------------------------


# The real functions are held as default arguments: rebind replaces every module-level
# name bound to them, this module's included, while a mutant is active.


def _layout_by_slot(cached, fed, parents, kept=None, layout=tree_layout) -> Layout:  # noqa: ANN001
    """The real layout with every fed token at the rotary position of its slot."""
    real = layout(cached, fed, parents, kept)
    slots = torch.as_tensor(list(cached))[:, None] + torch.arange(real.positions.shape[1])
    return Layout(slots, real.mask, real.before)


def _layout_causal(cached, fed, parents, kept=None, layout=tree_layout) -> Layout:  # noqa: ANN001
    """The real layout with a causal mask over the tree: a node sees every earlier node."""
    real = layout(cached, fed, parents, kept)
    line = [list(range(-1, len(tree) - 1)) for tree in parents]
    return Layout(real.positions, layout(cached, fed, line, kept).mask, real.before)


def _draw_recording_q(logits, rank, elder, params, generator, draw=draw_child):  # noqa: ANN001, ANN202
    """A child drawn without replacement, as the engine draws it, recorded with the
    drafter's whole distribution q: the rule for independent draws."""
    drawn = draw(logits, rank, elder, params, generator)
    if drawn is None or params.greedy:
        return drawn
    return drawn[0], process_logits(logits, params)


def _patch(original: object, replacement: object):  # noqa: ANN202
    return lambda: rebind(original, replacement)


TREE_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "tree positions by slot",
        "NVIDIA/TensorRT-LLM#12962",
        "https://github.com/NVIDIA/TensorRT-LLM/pull/12962",
        "",
        "each node's rotary position is its slot in the pass, not the pending token's plus depth",
        _patch(tree_layout, _layout_by_slot),
    ),
    Mutant(
        "node sees siblings",
        "",
        "",
        "",
        "a causal mask over the tree's slots: a node attends to every earlier node",
        _patch(tree_layout, _layout_causal),
    ),
    Mutant(
        "stale residual",
        "",
        "",
        "",
        "after a rejected child the residual is taken from p again (update_residual=False)",
        _patch(walk_sampled, functools.partial(walk_sampled, update_residual=False)),
    ),
    Mutant(
        "with-replacement rule on top-k",
        "",
        "",
        "",
        "children drawn without replacement, each divided by the drafter's whole q",
        _patch(draw_child, _draw_recording_q),
    ),
    Mutant(
        "typical acceptance",
        "Medusa (Cai et al. 2024), section 2.3.1",
        "https://arxiv.org/abs/2401.10774",
        "",
        "Medusa's typical acceptance (threshold 0.09, alpha 0.3) in place of the residual rule",
        _patch(walk_sampled, typical_walk),
    ),
)


# --- greedy identity --------------------------------------------------------------------

GREEDY_WORKLOADS = ("copy", "edit", "novel")
GREEDY_PROMPTS = 3  # per workload
GREEDY_TOKENS = 48


def tree_greedy_identity(m: Mutant, seed: int) -> list[bool]:
    """For each copy, edit and novel prompt of ``seed`` and each tree drafter (the n-gram trie,
    the draft model's 2 x 2 x 1 tree): does greedy tree speculation differ from plain
    greedy decoding (caught)?"""
    target, draft, tok = load_model("target"), load_model("draft"), Tokenizer()
    params = SamplingParams(temperature=0.0, max_tokens=GREEDY_TOKENS)
    prompts = [
        tok.encode(p) for w in GREEDY_WORKLOADS for p in workload_prompts(w, GREEDY_PROMPTS, seed)
    ]
    makers = (
        lambda: tree_decode.NgramTreeDrafter(max_nodes=7),
        lambda: tree_decode.DraftModelTreeDrafter(draft, TreeShape.branching([2, 2, 1])),
    )
    plain = [generate(target, ids, params) for ids in prompts]
    caught = []
    with m.active():
        for make in makers:
            for ids, want in zip(prompts, plain, strict=True):
                got = tree_decode.tree_speculative_generate(target, make(), ids, params)
                caught.append(got != want)
    return caught


# --- one node, two sampled children -----------------------------------------------------


class NodePlace:
    """Chapter 12's place: a ``"novel"`` note (seed 4321), ``written`` tokens into the
    target's greedy continuation, at ``params`` (default temperature 1, top-k 6). ``logits``
    are the target's (3 rows, one per node of a two-child tree; row 0 is read), ``p`` its
    processed distribution, ``draft_logits`` the draft model's there."""

    def __init__(self, written: int = 14, params: SamplingParams | None = None) -> None:
        self.params = params or SamplingParams(temperature=1.0, top_k=6)
        target, draft = load_model("target"), load_model("draft")
        note = Tokenizer().encode(workload_prompts("novel", 1, seed=4321)[0])
        at = note + generate(target, note, SamplingParams(max_tokens=written + 1))[:written]
        with torch.inference_mode():
            row = target(torch.tensor([at]))[0, -1]
            self.draft_logits = draft(torch.tensor([at]))[0, -1]
        self.logits = row.repeat(3, 1)  # (3, V)
        self.p = process_logits(row, self.params)
        self.q = process_logits(self.draft_logits, self.params)


#: How the node law records each mutant's children; every other mutant records them as
#: they were drawn (the layout mutants cannot move a node's law: its logits are given).
_RECORDED = {"with-replacement rule on top-k": "parent"}


def node_law(m: Mutant, place: NodePlace) -> torch.Tensor:
    """Exact law (V,) of the token that leaves the node under mutant ``m``."""
    draws = sibling_draws(place.q, 2, _RECORDED.get(m.name, "drawn"))
    with m.active():
        return exact_first_token(tree_module.walk_sampled, place.logits, draws, place.params)


def node_test(m: Mutant, place: NodePlace, n: int, seed: int) -> bool:
    """``n`` seeded rounds at ``place``: two children drawn by the engine's ``draw_child``,
    walked by its sampled walk; chi-square of the token that leaves against p (caught)."""
    check_int("n", n)
    g = torch.Generator().manual_seed(seed)
    tokens = np.empty(n, dtype=np.int64)
    with m.active():
        for i in range(n):
            drawn = []
            for rank in range(2):
                elder = [t for t, _ in drawn]
                drawn.append(
                    tree_module.draw_child(place.draft_logits, rank, elder, place.params, g)
                )
            tree = TokenTree([t for t, _ in drawn], [-1, -1], torch.stack([q for _, q in drawn]))
            tokens[i] = tree_module.walk_sampled(place.logits, tree, place.params, g)[1][0]
    counts = torch.from_numpy(np.bincount(tokens, minlength=place.p.shape[-1]))
    return not distribution_test(counts, place.p).passed


# --- the whole tree loop, end to end ----------------------------------------------------


class TinyTreeSetup:
    """Two tiny seeded models (vocabulary 40) after a fixed context, at temperature 1 and
    top-k 5, the draft model drafting a static tree of three sampled children each with one
    child of its own: small enough that thousands of whole generations take seconds, and
    the target's exact joint distribution of two tokens is 5 x 40 cells."""

    vocab_size = 40
    context = [3, 17, 4, 9, 22, 31, 8, 3, 17]
    params = SamplingParams(temperature=1.0, top_k=5, max_tokens=3)
    shape = TreeShape.branching([3, 1])

    def __init__(self, seed: int = 2) -> None:
        config = ModelConfig(
            block_size=64,
            vocab_size=self.vocab_size,
            n_layer=2,
            n_head=4,
            n_kv_head=2,
            n_embd=32,
            n_hidden=48,
        )
        self.target, self.draft = (self._model(config, seed + i) for i in (0, 100))

    @staticmethod
    def _model(config: ModelConfig, seed: int) -> TinyGPT:
        torch.manual_seed(seed)
        model = TinyGPT(config).eval()
        with torch.no_grad():  # larger logits and a working smear: the layout matters
            model.lm_head.weight.mul_(4.0)
            for layer in model.model.layers:
                layer.self_attn.k_smear.normal_(0, 2)
        return model

    @cached_property
    def joint(self) -> torch.Tensor:
        """The target's exact joint distribution of (y1, y2), flattened as y1 * V + y2."""
        with torch.inference_mode():
            p1 = process_logits(self.target(torch.tensor([self.context]))[0, -1], self.params)
            rows = []
            for y1 in range(self.vocab_size):
                after = self.target(torch.tensor([self.context + [y1]]))[0, -1]
                rows.append(p1[y1] * process_logits(after, self.params))
        return torch.stack(rows).flatten()

    def pairs(self, m: Mutant, n: int, seeds: Sequence[int]) -> torch.Tensor:
        """Counts over (y1, y2) of ``n`` whole generations per seed, run i of seed s on a
        generator seeded s * n + i."""
        check_int("n", n)
        counts = torch.zeros(self.vocab_size**2, dtype=torch.long)
        with m.active():
            for s in seeds:
                for i in range(n):
                    g = torch.Generator().manual_seed(s * n + i)
                    drafter = tree_decode.DraftModelTreeDrafter(self.draft, self.shape)
                    out = tree_decode.tree_speculative_generate(
                        self.target, drafter, self.context, self.params, generator=g
                    )
                    counts[out[0] * self.vocab_size + out[1]] += 1
        return counts


def tree_end_to_end_test(m: Mutant, setup: TinyTreeSetup, n: int, seed: int) -> bool:
    """``n`` whole sampled tree generations of 3 tokens; chi-square of their first two
    tokens against the target's joint distribution (caught)."""
    return not distribution_test(setup.pairs(m, n, [seed]), setup.joint).passed
