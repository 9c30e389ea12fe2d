"""Chains against trees at equal verified positions: tokens per target pass (greedy).

    python benchmarks/trees.py [--prompts 16] [--tokens 64] [--nodes 7]

Three drafters, each as a chain of ``--nodes`` tokens and as a tree of ``--nodes`` nodes,
so every pass verifies the same number of positions (the pending token and the nodes):
the n-gram drafter (chain: the latest match; tree: a trie of several matches), the draft
model and the target's own Medusa heads (a chain as deep as there are heads). The draft
model's and the heads' trees are static, the shape the measured ranks ask for
(:func:`best_shape`), calibrated on prompts of another seed than the ones
measured. Every output is checked against plain greedy decoding before it is counted.
Intervals resample prompts; the tree-minus-chain difference is paired by prompt.
Writes specdec_lib/results/trees.json.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np
import torch

from specdec_lib import SamplingParams, SpeculationStats, Tokenizer, load_model
from specdec_lib.analysis.intervals import (
    paired_tokens_per_pass_difference,
    position_acceptance,
)
from specdec_lib.checks import check_int
from specdec_lib.engine.generate import generate
from specdec_lib.engine.heads import HeadsTreeDrafter, MedusaHeads, load_heads
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.tree import TreeShape
from specdec_lib.engine.tree_decode import (
    DraftModelTreeDrafter,
    NgramTreeDrafter,
    tree_speculative_generate,
)
from specdec_lib.text.language import WORKLOADS, workload_prompts

from harness import Benchmark, counts_row, greedy_workloads, interval

CALIBRATION_SEED, CALIBRATION_PROMPTS = 7151, 4  # per workload


# Which static tree to draft: the shape the measured ranks ask for (Medusa's recipe).
# A static tree is worth the expected length of its accepted path. Under greedy
# verification, a node is on the accepted path when every token on its path is the
# target's choice, and a depth-d node of rank r is the target's choice when the drafter's
# r-th guess for that depth is. So with ``hits[d][r]``, the measured chance that the
# drafter's rank-r guess at depth d is the target's token, a node's chance is the product
# of its path's hits (assuming depths independent, which chapter 9 showed fails for chains
# far out), the tree's expected accepted length is the sum over its nodes, and the best
# tree of n nodes takes the n likeliest nodes, each with its parent and elder siblings.


def _ranks(logits: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """The rank (0: likeliest) of each true token among each row's logits (ties: stable)."""
    above = logits > logits.gather(-1, truth[..., None])
    return above.sum(-1)


@torch.inference_mode()
def rank_hits(
    target: TinyGPT,
    prompts: Sequence[list[int]],
    max_tokens: int,
    depth: int,
    ranks: int,
    draft: TinyGPT | None = None,
    heads: MedusaHeads | None = None,
) -> np.ndarray:
    """``hits[d][r]``: how often the drafter's rank-r guess at depth d is the token the
    target writes (greedy), over the target's continuations of ``prompts``.

    A draft model guesses every depth from the true prefix, so its row is the same at
    every depth; head d + 1 guesses depth d from the hidden state before the pending token.
    """
    check_int("depth", depth)
    check_int("ranks", ranks)
    if (draft is None) == (heads is None):
        raise ValueError("give exactly one of draft and heads")
    counts = np.zeros((depth, ranks))
    total = np.zeros(depth)
    params = SamplingParams(max_tokens=max_tokens)
    for prompt in prompts:
        ids = list(prompt) + generate(target, prompt, params)
        x = torch.tensor([ids])
        first = len(prompt) - 1  # the position whose next token is the first written
        if draft is not None:
            r = _ranks(draft(x)[0, first:-1], x[0, first + 1 :])  # (written,)
            for d in range(depth):
                counts[d] += np.bincount(r.clamp(max=ranks).numpy(), minlength=ranks + 1)[:ranks]
                total[d] += len(r)
        else:
            _, hidden = target(x, hidden=True)
            guesses = heads(hidden[0])  # (n_heads, T, V)
            for d in range(min(depth, heads.n_heads)):
                # head d + 1 at position t guesses token t + 2 + d; t ranges over the
                # positions before each pending token (the pending token is written)
                t = torch.arange(first, len(ids) - 2 - d)
                r = _ranks(guesses[d, t], x[0, t + 2 + d])
                counts[d] += np.bincount(r.clamp(max=ranks).numpy(), minlength=ranks + 1)[:ranks]
                total[d] += len(t)
    return counts / np.maximum(total, 1)[:, None]


def best_shape(hits: np.ndarray, n_nodes: int) -> tuple[TreeShape, float]:
    """The static tree of ``n_nodes`` nodes with the largest expected accepted length under
    ``hits`` (see above), and that length. Greedy over a heap of candidate nodes: a
    node becomes a candidate once its parent and its elder sibling are in the tree."""
    check_int("n_nodes", n_nodes)
    depth, ranks = hits.shape
    heap: list[tuple[float, tuple[int, ...]]] = [(-float(hits[0, 0]), (0,))]
    chosen: list[tuple[int, ...]] = []
    value: dict[tuple[int, ...], float] = {(): 1.0}
    while heap and len(chosen) < n_nodes:
        neg, path = heapq.heappop(heap)
        chosen.append(path)
        value[path] = -neg
        d, r = len(path) - 1, path[-1]
        if r + 1 < ranks:  # the next sibling
            sibling = path[:-1] + (r + 1,)
            heapq.heappush(heap, (-value[path[:-1]] * float(hits[d, r + 1]), sibling))
        if d + 1 < depth:  # the first child
            heapq.heappush(heap, (-value[path] * float(hits[d + 1, 0]), path + (0,)))
    if len(chosen) < n_nodes:
        raise ValueError(f"n_nodes must be at most {len(chosen)} for hits of shape {hits.shape}")
    return TreeShape(tuple(chosen)), sum(value[p] for p in chosen)


def run(target, make, prompts, greedy, params) -> list[SpeculationStats]:
    out = []
    for i, ids in enumerate(prompts):
        stats = SpeculationStats()
        got = tree_speculative_generate(target, make(), ids, params, stats=stats)
        if got != greedy[i]:
            raise AssertionError(f"tree output differs from greedy on prompt {i}")
        out.append(stats)
    return out


def main(argv=None) -> None:
    bench = Benchmark("trees", __doc__, small={"prompts": 1, "tokens": 8}, seed=7150)
    bench.add("--prompts", type=int, default=16)
    bench.add("--tokens", type=int, default=64)
    bench.add("--nodes", type=int, default=7)
    args = bench.parse(argv)
    tok = Tokenizer()
    target, draft = load_model("target"), load_model("draft")
    heads = load_heads(target)
    params = SamplingParams(max_tokens=args.tokens)
    calibration = [
        tok.encode(p)
        for w in WORKLOADS
        for p in workload_prompts(w, CALIBRATION_PROMPTS, CALIBRATION_SEED)
    ]
    hits = {
        "draft": rank_hits(target, calibration, args.tokens, args.nodes, 4, draft=draft),
        "heads": rank_hits(target, calibration, args.tokens, heads.n_heads, 4, heads=heads),
    }
    n, depth = args.nodes, heads.n_heads  # the heads' chain can be no deeper than the heads
    shapes = {
        ("draft", n): best_shape(hits["draft"], n),
        ("heads", depth): best_shape(hits["heads"], depth),
        ("heads", n): best_shape(hits["heads"], n),
    }
    drafters = {  # (drafter, form, nodes): a fresh drafter
        ("ngram", "chain", n): lambda: NgramTreeDrafter(max_nodes=n, max_paths=1),
        ("ngram", "tree", n): lambda: NgramTreeDrafter(max_nodes=n),
        ("draft", "chain", n): lambda: DraftModelTreeDrafter(draft, TreeShape.chain(n)),
        ("draft", "tree", n): lambda: DraftModelTreeDrafter(draft, shapes["draft", n][0]),
        ("heads", "chain", depth): lambda: HeadsTreeDrafter(heads, TreeShape.chain(depth)),
        ("heads", "tree", depth): lambda: HeadsTreeDrafter(heads, shapes["heads", depth][0]),
        ("heads", "tree", n): lambda: HeadsTreeDrafter(heads, shapes["heads", n][0]),
    }
    rows = []
    print(
        f"{'workload':8} {'drafter':6} {'form':5} {'nodes':>5} {'tok/pass [95%]':>22} "
        f"{'tree - chain':>24}"
    )
    for workload, prompts, greedy in greedy_workloads(target, tok, args.prompts, args.seed, params):
        each = {key: run(target, make, prompts, greedy, params) for key, make in drafters.items()}
        for (name, form, nodes), stats in each.items():
            row = counts_row(stats, workload=workload, drafter=name, form=form, nodes=nodes)
            row |= dict(
                depth_acceptance=[interval(x) for x in position_acceptance(stats)],
                per_prompt=[
                    dict(emitted=x.emitted, target_passes=x.target_passes, accepted=x.accepted)
                    for x in stats
                ],
            )
            diff = ""
            if form == "tree" and (name, "chain", nodes) in each:
                d = paired_tokens_per_pass_difference(stats, each[name, "chain", nodes])
                row["tree_minus_chain"] = interval(d)
                diff = f"{d.value:+.2f} [{d.low:+.2f}, {d.high:+.2f}]"
            rows.append(row)
            e = row["tokens_per_pass_interval"]
            at = f"{e['value']:8.2f} [{e['low']:.2f}, {e['high']:.2f}]"
            print(f"{workload:8} {name:6} {form:5} {nodes:5d} {at} {diff:>24}")
    result = {
        "seed": args.seed,
        "calibration": {"seed": CALIBRATION_SEED, "prompts_per_workload": CALIBRATION_PROMPTS},
        "tokens_per_prompt": args.tokens,
        "nodes": args.nodes,
        "rank_hits": {name: h.round(4).tolist() for name, h in hits.items()},
        "shapes": [
            {
                "drafter": name,
                "nodes": nodes,
                "paths": [list(p) for p in s.paths],
                "expected_accepted": round(v, 4),
            }
            for (name, nodes), (s, v) in shapes.items()
        ],
        "rows": rows,
    }
    print("all outputs identical to greedy")
    bench.save(result)


if __name__ == "__main__":
    main()
